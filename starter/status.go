package starter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/siteops/siteops/workflows"
)

// Status describes any siteops workflow: how it stands, what it reports of
// itself through its status query, why it failed, and what it is waiting
// on while it runs.
type Status struct {
	WorkflowID string    `json:"workflow_id"`
	RunID      string    `json:"run_id"`
	Type       string    `json:"type"`
	Status     string    `json:"status"`
	StartedAt  time.Time `json:"started_at"`
	ClosedAt   time.Time `json:"closed_at,omitzero"`
	// TaskQueue is where the workflow's worker polls.
	TaskQueue string `json:"task_queue,omitempty"`
	// Detail is the workflow's own status (a workflows.Status), when it
	// answers its query.
	Detail workflows.Status `json:"detail,omitempty"`
	// DetailMissing says why Detail is missing: the status query needs a
	// worker (for a closed run too: the worker replays its history), and
	// none answered.
	DetailMissing string `json:"detail_missing,omitempty"`
	// Result is the result of a completed run, read from its history (no
	// worker needed): the workflow's result type as JSON.
	Result json.RawMessage `json:"result,omitempty"`
	// Failure is the root cause of a workflow that did not succeed.
	Failure *Failure `json:"failure,omitempty"`
	// Pending are the activities a running workflow waits on.
	Pending []PendingActivity `json:"pending_activities,omitempty"`
	// RequestedBy is who the run's memo says started it ("nexus" for the
	// Nexus service's onboardings), and CallerEndpoint the Nexus endpoint
	// the request came through, when the server named one.
	RequestedBy    string `json:"requested_by,omitempty"`
	CallerEndpoint string `json:"caller_endpoint,omitempty"`
}

// PendingActivity is an activity a running workflow waits on: its attempt
// and, after a failed attempt, why it failed.
type PendingActivity struct {
	Activity      string    `json:"activity"`
	State         string    `json:"state"`
	Attempt       int32     `json:"attempt"`
	LastFailure   *Failure  `json:"last_failure,omitempty"`
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
}

// Status looks a workflow up by ID (any kind of the catalogue). A missing
// workflow is ErrNotFound. What Temporal keeps (the state, the pending
// activities, the failure or result of a closed run) is read first and
// retried while Temporal is unavailable; the workflow's own status comes
// from its status query, which needs a worker, and when none answers
// DetailMissing says so instead.
func (s *Starter) Status(ctx context.Context, workflowID string) (Status, error) {
	st, err := s.Describe(ctx, workflowID)
	if err != nil {
		return Status{}, err
	}
	s.Detail(ctx, &st)
	return st, nil
}

// Describe is Status without the workflow's own status: what Temporal
// keeps, which needs no worker. A caller that decides from it whether to
// ask further (the Nexus service's owner check) reads it first.
func (s *Starter) Describe(ctx context.Context, workflowID string) (Status, error) {
	var st Status
	err := s.Patiently(ctx, "reading "+workflowID, func() error {
		var err error
		st, err = s.describe(ctx, workflowID)
		return err
	})
	return st, err
}

// Detail adds the workflow's own status to st, from its status query
// (DetailMissing when no worker answers), for a kind of the catalogue.
func (s *Starter) Detail(ctx context.Context, st *Status) {
	if k, ok := workflows.KindNamed(st.Type); ok {
		st.Detail, st.DetailMissing = s.statusQuery(ctx, st.WorkflowID, st.RunID, st.TaskQueue, k)
	}
}

// describe reads what Temporal itself keeps of a workflow.
func (s *Starter) describe(ctx context.Context, workflowID string) (Status, error) {
	d, err := s.o.Client.DescribeWorkflow(ctx, workflowID, "")
	if isNotFound(err) {
		return Status{}, fmt.Errorf("no workflow with ID %s (IDs look like %s): %w", workflowID, workflows.IDForms(), ErrNotFound)
	}
	if err != nil {
		return Status{}, err
	}
	info := d.RawResponse.GetWorkflowExecutionInfo()
	st := Status{
		WorkflowID: workflowID,
		RunID:      info.GetExecution().GetRunId(),
		Type:       info.GetType().GetName(),
		Status:     statusName(info.GetStatus()),
		StartedAt:  info.GetStartTime().AsTime(),
		TaskQueue:  info.GetTaskQueue(),
	}
	if info.GetCloseTime() != nil {
		st.ClosedAt = info.GetCloseTime().AsTime()
	}
	// A memo field that does not read as a string is left out: it is
	// what the run says of itself, never a reason to fail the read.
	for name, to := range map[string]*string{"requested_by": &st.RequestedBy, "caller_endpoint": &st.CallerEndpoint} {
		if p := info.GetMemo().GetFields()[name]; p != nil {
			_ = s.converter().FromPayload(p, to)
		}
	}
	for _, pa := range d.RawResponse.GetPendingActivities() {
		p := PendingActivity{
			Activity: pa.GetActivityType().GetName(),
			State:    strings.ToLower(strings.TrimPrefix(pa.GetState().String(), "PendingActivityState")),
			Attempt:  pa.GetAttempt(),
		}
		if f := pa.GetLastFailure(); f != nil {
			lf := s.failure(f)
			p.LastFailure = &lf
		}
		if t := pa.GetNextAttemptScheduleTime(); t != nil {
			p.NextAttemptAt = t.AsTime()
		}
		st.Pending = append(st.Pending, p)
	}
	run := s.o.Client.GetWorkflow(ctx, workflowID, st.RunID)
	once := client.WorkflowRunGetOptions{DisableFollowingRuns: true}
	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT,
		enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		err := run.GetWithOptions(ctx, nil, once)
		if IsUnavailable(ctx, err) {
			return Status{}, err
		}
		if err != nil {
			f := RootCause(err)
			st.Failure = &f
		}
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		var res json.RawMessage
		err := run.GetWithOptions(ctx, &res, once)
		if IsUnavailable(ctx, err) {
			return Status{}, err
		}
		if err == nil && len(res) > 0 && string(res) != "null" {
			st.Result = res
		}
	}
	return st, nil
}

// statusQueryWait is how long Status waits for a worker to answer the
// status query.
const statusQueryWait = 5 * time.Second

// statusQuery asks the workflow for its own status, and when it cannot
// answer says why in words that name the fix.
func (s *Starter) statusQuery(ctx context.Context, workflowID, runID, taskQueue string, k workflows.Kind) (workflows.Status, string) {
	// The SDK gives a call half the time its context has left.
	qctx, cancel := context.WithTimeout(ctx, 2*statusQueryWait)
	defer cancel()
	began := time.Now()
	v, err := s.o.Client.QueryWorkflow(qctx, workflowID, runID, k.StatusQuery)
	detail := k.NewStatus()
	if err == nil {
		if err := v.Get(detail); err != nil {
			return nil, "the status query's answer cannot be read: " + err.Error()
		}
		return detail, ""
	}
	if ctx.Err() != nil {
		return nil, "not asked: " + ctx.Err().Error()
	}
	var (
		failed   *serviceerror.QueryFailed
		precond  *serviceerror.FailedPrecondition
		deadline *serviceerror.DeadlineExceeded
	)
	switch {
	case errors.As(err, &failed):
		return nil, "the workflow refused the status query: " + failed.Message
	case errors.As(err, &precond) && strings.Contains(precond.Message, "closed before"):
		return nil, fmt.Sprintf("the workflow closed before any worker ran it (%s), so it has no status to report: is a siteops worker running on task queue %s?", precond.Message, taskQueue)
	case errors.As(err, &deadline), errors.Is(err, context.DeadlineExceeded), strings.Contains(err.Error(), "timed out"):
		return nil, fmt.Sprintf("no worker answered the status query within %s: is a siteops worker running on task queue %s? (a closed run is answered by replaying its history, which needs a worker too)",
			roundDuration(time.Since(began)), taskQueue)
	}
	return nil, "the status query failed: " + innermost(err.Error())
}

// failure converts a failure of the server's API into a root cause.
func (s *Starter) failure(f *failurepb.Failure) Failure {
	return RootCause(temporal.GetDefaultFailureConverter().FailureToError(f))
}

// statusName names a workflow's state as the Web UI does: Running,
// Completed, Failed, TimedOut, Canceled, Terminated, ContinuedAsNew.
func statusName(st enumspb.WorkflowExecutionStatus) string { return st.String() }

// ResultSummary words a completed run's result, read from its history,
// for when no worker answered the status query (nil without a result).
// Every kind's result is its status type except the onboarding's
// (workflows.OnboardingResult); a lead sync has none.
func (st Status) ResultSummary() []string {
	if st.Result == nil {
		return nil
	}
	if st.Type == workflows.OnboardingWorkflowName {
		var res workflows.OnboardingResult
		if json.Unmarshal(st.Result, &res) == nil {
			return []string{"result (from history): " + OnboardingSummary(res)}
		}
	} else if k, ok := workflows.KindNamed(st.Type); ok {
		detail := k.NewStatus()
		if json.Unmarshal(st.Result, detail) == nil {
			lines := detail.Summary()
			if len(lines) > 0 {
				lines[0] = "result (from history): " + lines[0]
			}
			return lines
		}
	}
	return []string{"result (from history): " + string(st.Result)}
}
