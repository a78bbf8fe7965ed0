package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// apiActivity is how every call to the Agent-Site API is run: 20 s per
// attempt (the worker's client gives up after 10 s, so an attempt lost with
// a crashed worker is retried within 20 s), and retries that back off to a
// minute, capped at 12 attempts (about 8 minutes) so that an outage fails
// the workflow with the cause rather than hanging it. Retry-After answers
// set the next delay themselves.
func apiActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 20 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    12,
		},
	})
}

// fingerprint is a short digest of an operation's content, part of its
// idempotency key: the same step with the same content replays, a re-run
// with changed content is a new operation. encoding/json writes struct
// fields in declaration order, so the digest is deterministic; workflowcheck
// cannot see that through json's type caches.
//
//workflowcheck:ignore
func fingerprint(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // inputs are plain data; this cannot happen
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// inParallel runs n activities with at most limit in flight. start launches
// activity i; done handles its result. After the first error no new activity
// starts, the ones in flight finish, and the error is returned.
func inParallel(ctx workflow.Context, limit, n int, start func(i int) workflow.Future, done func(i int, f workflow.Future) error) error {
	sel := workflow.NewSelector(ctx)
	next, pending := 0, 0
	var firstErr error
	for {
		for firstErr == nil && next < n && pending < limit {
			i := next
			next++
			pending++
			sel.AddFuture(start(i), func(f workflow.Future) {
				pending--
				if err := done(i, f); err != nil && firstErr == nil {
					firstErr = err
				}
			})
		}
		if pending == 0 {
			return firstErr
		}
		sel.Select(ctx)
	}
}
