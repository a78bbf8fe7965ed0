package nexus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

// SearchAttrCaller is the search attribute (Keyword) that each onboarding
// the service starts carries while running onboardings are limited: the
// Key of the caller it counts against.
const SearchAttrCaller = starter.SearchAttrCaller

// pendingFor bounds how long an onboarding this process started is counted
// without visibility listing it: far longer than visibility takes to
// catch up, and cleared as soon as it has.
const pendingFor = 10 * time.Minute

var (
	errTooManyRunning    = errors.New("nexus: too many onboardings running")
	errNoSearchAttribute = errors.New("nexus: the namespace lacks the search attribute " + SearchAttrCaller)
)

// visibility is what counting needs of a Temporal client.
type visibility interface {
	ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error)
	DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
}

// running counts each caller's running onboardings, for the limit.
//
// Temporal's visibility is the count every worker shares: the onboardings
// of the Onboarding type, running, whose SiteopsCaller is the caller's
// key. Visibility is eventually consistent — a start shows in it a moment
// later (milliseconds on SQL visibility, about a second on
// Elasticsearch) — so a burst of requests would all see the same count.
// Two things close that within a process: a caller's admissions take
// turns, and the onboardings this process started that visibility does not
// list yet are counted too, each checked with DescribeWorkflowExecution,
// which reads the execution itself. Across N worker processes a burst can
// still pass the limit, by at most the limit for each other process.
type running struct {
	now     func() time.Time
	mu      sync.Mutex
	turns   map[string]chan struct{}        // one per key: a caller's admissions take turns
	pending map[string]map[string]time.Time // key → workflow ID → when this process started it
}

func newRunning(now func() time.Time) *running {
	return &running{now: now, turns: map[string]chan struct{}{}, pending: map[string]map[string]time.Time{}}
}

// admit takes key's turn and counts its running onboardings. Under limit,
// it returns n and done, which the caller calls once it tried to start one
// (with the workflow ID it started, or "") to end its turn; at the limit
// or past it, errTooManyRunning with n. The keys are the callers' Keys:
// endpoints the operators made and the one shared key, so the turns and
// pending maps stay as small as that.
func (r *running) admit(ctx context.Context, v visibility, key string, limit int) (done func(started string), n int, err error) {
	turn := r.turn(key)
	select {
	case turn <- struct{}{}:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	done = func(started string) {
		if started != "" {
			r.mu.Lock()
			if r.pending[key] == nil {
				r.pending[key] = map[string]time.Time{}
			}
			r.pending[key][started] = r.now()
			r.mu.Unlock()
		}
		<-turn
	}
	n, err = r.count(ctx, v, key, limit)
	switch {
	case err != nil:
		done("")
		return nil, n, err
	case n >= limit:
		done("")
		return nil, n, errTooManyRunning
	}
	return done, n, nil
}

func (r *running) turn(key string) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.turns[key]
	if !ok {
		t = make(chan struct{}, 1)
		r.turns[key] = t
	}
	return t
}

// count is key's running onboardings, counted up to limit: those
// visibility lists, and those this process started that it does not list
// yet and that still run.
func (r *running) count(ctx context.Context, v visibility, key string, limit int) (int, error) {
	listed, err := listRunning(ctx, v, key, limit)
	if err != nil || len(listed) >= limit {
		return len(listed), err
	}
	n := len(listed)
	for _, id := range r.pendingOf(key) {
		if listed[id] {
			r.forget(key, id) // visibility has caught up
			continue
		}
		d, err := v.DescribeWorkflowExecution(ctx, id, "")
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			r.forget(key, id)
		case err != nil:
			return n, err
		case d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			n++
		default:
			r.forget(key, id)
		}
	}
	return n, nil
}

// pendingOf is the workflow IDs this process started for key within
// pendingFor; older ones are forgotten.
func (r *running) pendingOf(key string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id, at := range r.pending[key] {
		if r.now().Sub(at) > pendingFor {
			delete(r.pending[key], id)
			continue
		}
		ids = append(ids, id)
	}
	return ids
}

func (r *running) forget(key, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pending[key], id)
}

// runningQuery finds key's running onboardings in visibility.
func runningQuery(key string) string {
	return fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND %s = '%s'", workflows.OnboardingWorkflowName, SearchAttrCaller, key)
}

// listRunning returns the workflow IDs of key's running onboardings that
// visibility lists, up to limit of them.
func listRunning(ctx context.Context, v visibility, key string, limit int) (map[string]bool, error) {
	ids := map[string]bool{}
	var token []byte
	for {
		resp, err := v.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			PageSize: int32(min(limit, 1000)), //nolint:gosec // bounded above
			Query:    runningQuery(key), NextPageToken: token,
		})
		var invalid *serviceerror.InvalidArgument
		if errors.As(err, &invalid) && strings.Contains(invalid.Error(), SearchAttrCaller) {
			return nil, fmt.Errorf("%w: %w", errNoSearchAttribute, err)
		}
		if err != nil {
			return nil, err
		}
		for _, ex := range resp.GetExecutions() {
			ids[ex.GetExecution().GetWorkflowId()] = true
		}
		if token = resp.GetNextPageToken(); len(token) == 0 || len(ids) >= limit {
			return ids, nil
		}
	}
}
