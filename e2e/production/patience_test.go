package production

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/siteops/siteops/rollout"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store/storetest"
)

// describeCounter counts the DescribeWorkerDeployment calls a client makes
// and answers the first notFound of them NotFound without asking the
// frontend: the eventual answer a frontend gives for a deployment it
// served a moment ago, which cannot be caused on demand.
type describeCounter struct {
	mu       sync.Mutex
	calls    int
	notFound int
}

func (d *describeCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method == workflowservice.WorkflowService_DescribeWorkerDeployment_FullMethodName {
		d.mu.Lock()
		d.calls++
		answerNotFound := d.calls <= d.notFound
		d.mu.Unlock()
		if answerNotFound {
			return serviceerror.ToStatus(serviceerror.NewNotFound("Worker Deployment not found")).Err() // as the frontend answers: a gRPC NotFound
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (d *describeCounter) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

// TestReleaseIsPatientWithNotFound checks the release commands' describe
// of the Worker Deployment on the cluster: a deployment that exists and is
// answered NotFound twice (as a frontend may answer right after another
// served it) is asked again and found, by status and by rollback's first
// step; a deployment that does not exist is not found after one describe,
// without asking again.
func TestReleaseIsPatientWithNotFound(t *testing.T) {
	world.Need(t)
	_, simURL := newSimulator(t, simulator.Config{})
	dbURL := storetest.PostgresSchemaURL(t)
	deployment := fmt.Sprintf("siteops-patience-%d", time.Now().UnixNano())
	env := slices.Clip(append(clusterEnv(), "SITEOPS_DATABASE_URL="+dbURL, "SITEOPS_SECRET_KEY="+secretKey(),
		"AGENTSITE_BASE_URL="+simURL, "AGENTSITE_API_KEY="+apiKey, "SITEOPS_TASK_QUEUE="+deployment,
		"SITEOPS_DEPLOYMENT_NAME="+deployment, "SITEOPS_METRICS_ADDR=", "SITEOPS_BUILD_ID=build-p"))
	w := startProc(t, "worker build-p", env, "worker")
	waitLog(t, w, "this build is now current")

	counted := func(notFound int) (client.Client, *describeCounter) {
		t.Helper()
		d := &describeCounter{notFound: notFound}
		o, err := temporal.ClientOptions(namespace)
		if err != nil {
			t.Fatal(err)
		}
		o.ConnectionOptions.DialOptions = append(o.ConnectionOptions.DialOptions, grpc.WithChainUnaryInterceptor(d.intercept))
		c, err := client.DialContext(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c, d
	}
	ctx := t.Context()

	c, d := counted(2)
	st, err := rollout.New(rollout.Options{Client: c, Namespace: namespace, Deployment: deployment}).Status(ctx)
	if err != nil || st.Current != "build-p" {
		t.Fatalf("status of a deployment answered not found twice: current %q, %v; want build-p", st.Current, err)
	}
	if n := d.count(); n != 3 {
		t.Errorf("status described the deployment %d times; want 3 (two not found, then found)", n)
	}
	c, d = counted(2)
	_, err = rollout.New(rollout.Options{Client: c, Namespace: namespace, Deployment: deployment}).Rollback(ctx, "build-p")
	if err == nil || !strings.Contains(err.Error(), "already the current version") {
		t.Errorf("rollback to the current build of a deployment answered not found twice: %v; want it found, and refused as already current", err)
	}

	c, d = counted(0)
	missing := deployment + "-missing"
	st, err = rollout.New(rollout.Options{Client: c, Namespace: namespace, Deployment: missing}).Status(ctx)
	if err != nil || st.Current != "" || len(st.Versions) != 0 {
		t.Errorf("status of a deployment that does not exist: %+v, %v; want empty", st, err)
	}
	if n := d.count(); n != 1 {
		t.Errorf("status of a deployment that does not exist described it %d times; want 1, without asking again", n)
	}
	c, d = counted(0)
	_, err = rollout.New(rollout.Options{Client: c, Namespace: namespace, Deployment: missing}).Rollback(ctx, "build-p")
	var nf *serviceerror.NotFound
	if !errors.As(err, &nf) || d.count() != 1 {
		t.Errorf("rollback of a deployment that does not exist: %v after %d describes; want NotFound after 1", err, d.count())
	}
}
