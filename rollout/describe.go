package rollout

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// describePatience bounds how long describe asks again when the frontend
// answers NotFound for a deployment that the deployment list names.
const describePatience = 5 * time.Second

// describe reads the deployment. A frontend may answer NotFound for a
// deployment it served a moment ago (another frontend host's view of the
// deployment's workflow, a describe racing its own update): when the
// namespace's deployment list names the deployment, describe asks again
// for up to describePatience before it believes the NotFound. A
// deployment the list does not name is NotFound at once, so that a
// deployment that truly does not exist costs one more call, not a wait.
func (r *Rollout) describe(ctx context.Context) (client.WorkerDeploymentDescribeResponse, error) {
	h := r.o.Client.WorkerDeploymentClient().GetHandle(r.o.Deployment)
	desc, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	var nf *serviceerror.NotFound
	if !errors.As(err, &nf) || !r.listed(ctx) {
		return desc, err
	}
	deadline := time.Now().Add(describePatience)
	for wait := 100 * time.Millisecond; time.Now().Before(deadline); wait = min(2*wait, time.Second) {
		r.logf("deployment %s: the frontend answered not found, though the namespace lists it; asking again", r.o.Deployment)
		select {
		case <-ctx.Done():
			return desc, err
		case <-time.After(wait):
		}
		if desc, err = h.Describe(ctx, client.WorkerDeploymentDescribeOptions{}); !errors.As(err, &nf) {
			return desc, err
		}
	}
	return desc, err
}

// listed reports whether the namespace's deployment list names the
// deployment; false when the list cannot be read.
func (r *Rollout) listed(ctx context.Context) bool {
	it, err := r.o.Client.WorkerDeploymentClient().List(ctx, client.WorkerDeploymentListOptions{})
	if err != nil {
		return false
	}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return false
		}
		if e.Name == r.o.Deployment {
			return true
		}
	}
	return false
}
