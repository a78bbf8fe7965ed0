package overview

import (
	"context"
	"fmt"
	"strings"
	"time"

	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/siteops/siteops/workflows"
)

// Rotation is a signing-secret rotation in flight: its step, and what to
// run next.
type Rotation struct {
	EndpointID    string    `json:"endpoint_id"`
	WorkflowID    string    `json:"workflow_id"`
	Step          string    `json:"step"`
	NewEndpointID string    `json:"new_endpoint_id,omitempty"`
	Operator      string    `json:"operator,omitempty"`
	StartedAt     time.Time `json:"started_at"`
	// DecisionDeadline is when a rotation waiting for on-call's decision
	// aborts unless decided.
	DecisionDeadline time.Time `json:"decision_deadline,omitzero"`
	Next             string    `json:"next,omitempty"`
}

// ListRotations lists the rotations in flight, newest first, each with
// its step from its status query.
func ListRotations(ctx context.Context, o Options) ([]Rotation, error) {
	o = o.withDefaults()
	if o.Temporal == nil {
		return nil, errNoTemporal
	}
	runs, err := list(ctx, o, "WorkflowType = "+quote(workflows.SecretRotationWorkflowName)+" AND ExecutionStatus = 'Running'", o.Limit)
	if err != nil {
		return nil, err
	}
	out := make([]Rotation, len(runs))
	each(runs, func(i int, run *workflowpb.WorkflowExecutionInfo) {
		id := run.GetExecution().GetWorkflowId()
		r := Rotation{EndpointID: strings.TrimPrefix(id, workflows.SecretRotationKind.Prefix), WorkflowID: id, StartedAt: run.GetStartTime().AsTime().UTC()}
		var st workflows.SecretRotationStatus
		if err := query(ctx, o, id, run.GetExecution().GetRunId(), workflows.QueryRotation, &st); err != nil {
			r.Step = StateUnknown
		} else {
			r.Step, r.NewEndpointID, r.DecisionDeadline, r.Operator = st.Step, st.NewEndpointID, st.DecisionDeadline, st.DecidedBy
		}
		r.Next = rotationNext(r)
		out[i] = r
	})
	return out, nil
}

// rotationNext is what on-call runs next for a rotation at its step.
func rotationNext(r Rotation) string {
	switch r.Step {
	case workflows.RotationDeciding:
		return fmt.Sprintf("no verified delivery came: siteops secret proceed --endpoint %s, or siteops secret abort --endpoint %s", r.EndpointID, r.EndpointID)
	case workflows.RotationVerifying:
		return fmt.Sprintf("waits for a verified delivery on %s: siteops status %s", orNew(r.NewEndpointID), r.WorkflowID)
	case StateUnknown:
		return fmt.Sprintf("no worker answered its status: siteops status %s, and check that a worker runs (siteops doctor)", r.WorkflowID)
	default:
		return "siteops status " + r.WorkflowID
	}
}

func orNew(id string) string {
	if id == "" {
		return "the new endpoint"
	}
	return id
}
