package starter

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
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
	// Detail is the workflow's own status (a workflows.Status), when it
	// answers its query.
	Detail workflows.Status `json:"detail,omitempty"`
	// Failure is the root cause of a workflow that did not succeed.
	Failure *Failure `json:"failure,omitempty"`
	// Pending are the activities a running workflow waits on.
	Pending []PendingActivity `json:"pending_activities,omitempty"`
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
// workflow is ErrNotFound.
func (s *Starter) Status(ctx context.Context, workflowID string) (Status, error) {
	d, err := s.Client.DescribeWorkflowExecution(ctx, workflowID, "")
	if isNotFound(err) {
		return Status{}, fmt.Errorf("no workflow with ID %s (IDs look like %s): %w", workflowID, workflows.IDForms(), ErrNotFound)
	}
	if err != nil {
		return Status{}, err
	}
	info := d.GetWorkflowExecutionInfo()
	st := Status{
		WorkflowID: workflowID,
		RunID:      info.GetExecution().GetRunId(),
		Type:       info.GetType().GetName(),
		Status:     statusName(info.GetStatus()),
		StartedAt:  info.GetStartTime().AsTime(),
	}
	if info.GetCloseTime() != nil {
		st.ClosedAt = info.GetCloseTime().AsTime()
	}
	for _, pa := range d.GetPendingActivities() {
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
	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT,
		enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		err := s.Client.GetWorkflow(ctx, workflowID, st.RunID).GetWithOptions(ctx, nil, client.WorkflowRunGetOptions{DisableFollowingRuns: true})
		if err != nil {
			f := RootCause(err)
			st.Failure = &f
		}
	}
	if k, ok := workflows.KindNamed(st.Type); ok {
		detail := k.NewStatus()
		if v, err := s.Client.QueryWorkflow(ctx, workflowID, st.RunID, k.StatusQuery); err == nil && v.Get(detail) == nil {
			st.Detail = detail
		}
	}
	return st, nil
}

// failure converts a failure of the server's API into a root cause.
func (s *Starter) failure(f *failurepb.Failure) Failure {
	return RootCause(temporal.GetDefaultFailureConverter().FailureToError(f))
}

// statusName names a workflow's state as the Web UI does: Running,
// Completed, Failed, TimedOut, Canceled, Terminated, ContinuedAsNew.
func statusName(st enumspb.WorkflowExecutionStatus) string { return st.String() }
