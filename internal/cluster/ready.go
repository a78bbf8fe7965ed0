package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// systemNamespace is the namespace the server creates for itself.
const systemNamespace = "temporal-system"

// waitReady waits until the frontend answers and reaches history and
// matching: a health check, a namespace read, a workflow lookup (answered by
// history) and a task queue description (answered by matching). It fails
// early, with the end of its log, when a service exits.
func (c *Cluster) waitReady(ctx context.Context, timeout time.Duration) error {
	return c.poll(ctx, timeout, "the cluster did not become ready", func(ctx context.Context, cl client.Client) error {
		if _, err := cl.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
			return err
		}
		if _, err := cl.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: systemNamespace}); err != nil {
			return err
		}
		return probeNamespace(ctx, cl, systemNamespace)
	})
}

// waitNamespaces waits until every service knows the namespaces (the
// services refresh their namespace cache every few seconds).
func (c *Cluster) waitNamespaces(ctx context.Context, timeout time.Duration) error {
	return c.poll(ctx, timeout, "the namespaces did not become usable", func(ctx context.Context, cl client.Client) error {
		for _, ns := range c.Namespaces {
			if err := probeNamespace(ctx, cl, ns); err != nil {
				return fmt.Errorf("namespace %s: %w", ns, err)
			}
		}
		return nil
	})
}

// probeID names the workflow and task queue the probes ask about; neither
// exists, and the answer "not found" shows the service behind is up.
const probeID = "siteops-cluster-readiness-probe"

// probeNamespace asks history (a workflow lookup) and matching (a task queue
// description) about namespace ns.
func probeNamespace(ctx context.Context, cl client.Client, ns string) error {
	_, err := cl.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: ns,
		Execution: &commonpb.WorkflowExecution{WorkflowId: probeID},
	})
	var notFound *serviceerror.NotFound
	if err != nil && !errors.As(err, &notFound) {
		return err
	}
	_, err = cl.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
		Namespace:     ns,
		TaskQueue:     &taskqueuepb.TaskQueue{Name: probeID, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
		TaskQueueType: enumspb.TASK_QUEUE_TYPE_WORKFLOW,
	})
	return err
}

// poll runs probe against the frontend every 100 ms until it succeeds, the
// timeout passes, ctx ends or a service exits.
func (c *Cluster) poll(ctx context.Context, timeout time.Duration, what string, probe func(context.Context, client.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opts, err := c.clientOptions(systemNamespace)
	if err != nil {
		return err
	}
	opts.Logger = quiet{}
	var cl client.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	lastErr := errors.New("no answer yet")
	for {
		if s, ok := c.exitedService(); ok {
			return c.errExited(s)
		}
		if cl == nil {
			cl, err = client.DialContext(ctx, opts)
			if err != nil {
				cl, lastErr = nil, err
			}
		}
		if cl != nil {
			pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
			lastErr = probe(pctx, cl)
			pcancel()
			if lastErr == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: %s within %s on %s: %w (logs in %s)", what, timeout, c.Address, lastErr, c.Dir)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// quiet is a Temporal logger that drops everything, for readiness probes.
type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}
