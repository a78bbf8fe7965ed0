package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/activities"
	sitenexus "github.com/siteops/siteops/nexus"
	"github.com/siteops/siteops/nexus/api"
)

// StopTimeout is how long a stopping worker lets in-flight activities
// finish; the ones still running after it are retried by another worker.
const StopTimeout = 30 * time.Second

// Deployment is the Worker Deployment Version a worker polls as.
type Deployment struct {
	Name    string
	BuildID string
}

// Options are what a worker runs on.
type Options struct {
	Client     client.Client
	TaskQueue  string
	Activities *activities.Activities
	Logger     *slog.Logger
	// Deployment, when set, opts into Worker Versioning: the workflows
	// keep their catalogue behaviour (Pinned or AutoUpgrade) and, when the
	// deployment has no current version yet (its first build), this one
	// becomes current. Later builds become current when an operator says
	// so (`siteops release promote`, which also moves the runs an older
	// build pinned whose kinds are AutoUpgrade now).
	Deployment *Deployment
	// Nexus, when set, registers siteops' Nexus service (package nexus) on
	// the same worker, beside the workflows and activities it starts.
	Nexus *sitenexus.Options
	// Worker tunes the SDK worker; StopTimeout is the default
	// WorkerStopTimeout.
	Worker sdkworker.Options
	// SecretReconcileEvery is the period of the secret reconciliation's
	// schedule, created or updated at start; zero is
	// DefaultSecretReconcileEvery, negative leaves the schedule alone.
	SecretReconcileEvery time.Duration
}

// HeartbeatThrottle is the longest the worker holds back an activity's
// heartbeats, and so the longest a cancellation waits to reach it.
const HeartbeatThrottle = 2 * time.Second

// Run runs a worker until ctx is done, then stops it gracefully.
func Run(ctx context.Context, o Options) error {
	if o.Worker.WorkerStopTimeout == 0 {
		o.Worker.WorkerStopTimeout = StopTimeout
	}
	if o.Worker.MaxHeartbeatThrottleInterval == 0 {
		// A cancellation reaches an activity only with the answer to a
		// heartbeat, and the SDK holds heartbeats back for up to 80 % of
		// the heartbeat timeout (24 s for the lead sync). The lead sync
		// cancels its page loop when its history fills, and on-call cancels
		// workflows: both should take effect in seconds. One heartbeat
		// call every 2 s per running activity is cheap.
		o.Worker.MaxHeartbeatThrottleInterval = HeartbeatThrottle
	}
	if d := o.Deployment; d != nil {
		o.Worker.DeploymentOptions = sdkworker.DeploymentOptions{
			UseVersioning:             true,
			Version:                   sdkworker.WorkerDeploymentVersion{DeploymentName: d.Name, BuildID: d.BuildID},
			DefaultVersioningBehavior: workflow.VersioningBehaviorPinned,
		}
	}
	w := sdkworker.New(o.Client, o.TaskQueue, o.Worker)
	Register(w, o.Activities)
	if o.Nexus != nil {
		n := *o.Nexus
		if n.TaskQueue == "" {
			n.TaskQueue = o.TaskQueue
		}
		if err := RegisterNexus(w, n); err != nil {
			return err
		}
		o.Logger.Info("Nexus service registered", "service", api.ServiceName)
	}
	if err := w.Start(); err != nil {
		return fmt.Errorf("starting the worker: %w", err)
	}
	o.Logger.Info("worker started", "task_queue", o.TaskQueue, "nexus", o.Nexus != nil)
	if every := o.SecretReconcileEvery; every >= 0 {
		if every == 0 {
			every = DefaultSecretReconcileEvery
		}
		// A worker without the right to manage schedules still serves;
		// the reconciliation waits until one can create it.
		if err := EnsureSecretReconcileSchedule(ctx, o.Client, o.TaskQueue, every, o.Logger); err != nil {
			o.Logger.Error("the secret reconciliation is not scheduled: deleted endpoints' secrets stay accepted until it is", "error", err)
		}
	}
	if d := o.Deployment; d != nil {
		if err := becomeCurrentIfFirst(ctx, o.Client, *d, o.Logger); err != nil {
			w.Stop()
			return err
		}
	}
	<-ctx.Done()
	o.Logger.Info("worker stopping: in-flight activities get time to finish", "timeout", StopTimeout)
	w.Stop()
	return nil
}

// becomeCurrentIfFirst makes d the current version of its deployment when
// the deployment has none (the first build ever deployed), so that a new
// namespace works without a manual step; it leaves a current version that
// exists alone, and says how to move to d. The version is registered when
// its first poll reaches the server, so it retries for a while.
func becomeCurrentIfFirst(ctx context.Context, c client.Client, d Deployment, logger *slog.Logger) error {
	h := c.WorkerDeploymentClient().GetHandle(d.Name)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var lastErr error
	for {
		desc, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
		if err == nil {
			cur := desc.Info.RoutingConfig.CurrentVersion
			switch {
			case cur != nil && cur.BuildID == d.BuildID:
				logger.Info("worker deployment version is current", "deployment", d.Name, "build_id", d.BuildID)
				return nil
			case cur != nil:
				logger.Warn("another build is the deployment's current version: this worker serves the pinned workflows of its own build and waits to be made current",
					"deployment", d.Name, "build_id", d.BuildID, "current_build_id", cur.BuildID,
					"to_switch", fmt.Sprintf("siteops release promote --build-id %s", d.BuildID))
				return nil
			}
			_, err = h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: d.BuildID, ConflictToken: desc.ConflictToken})
			if err == nil {
				logger.Info("the deployment had no current version: this build is now current", "deployment", d.Name, "build_id", d.BuildID)
				return nil
			}
		}
		lastErr = err
		var nf *serviceerror.NotFound
		var pre *serviceerror.FailedPrecondition
		if !errors.As(err, &nf) && !errors.As(err, &pre) && ctx.Err() == nil {
			logger.Warn("reading the worker deployment failed; retrying", "deployment", d.Name, "error", err)
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil // the worker is stopping
			}
			return fmt.Errorf("worker deployment %s: build %s could not be made current (%w); make it current with `siteops release promote --build-id %s` (SITEOPS_DEPLOYMENT_NAME=%s), or start with SITEOPS_WORKER_VERSIONING=false",
				d.Name, d.BuildID, lastErr, d.BuildID, d.Name)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
