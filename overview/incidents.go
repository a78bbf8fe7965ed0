package overview

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/siteops/siteops/workflows"
)

// Incident is an embed incident: the site, its state, who opened it and
// why, and what to run next.
type Incident struct {
	SiteID     string    `json:"site_id"`
	WorkflowID string    `json:"workflow_id"`
	State      string    `json:"state"`
	Operator   string    `json:"operator,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	OpenedAt   time.Time `json:"opened_at"`
	ClosedAt   time.Time `json:"closed_at,omitzero"`
	Next       string    `json:"next,omitempty"`
}

// StateUnknown is the state of a run whose status query no worker
// answered.
const StateUnknown = "unknown"

// IncidentFilter selects incidents: the open ones unless All, of one site
// when SiteID is set, at most Limit (the options' otherwise).
type IncidentFilter struct {
	SiteID string
	All    bool
	Limit  int
}

// ListIncidents lists embed incidents, newest first: the open ones with
// their state from their status query, the closed ones (All) with how
// they ended.
func ListIncidents(ctx context.Context, o Options, f IncidentFilter) ([]Incident, error) {
	o = o.withDefaults()
	if o.Temporal == nil {
		return nil, errNoTemporal
	}
	q := "WorkflowType = " + quote(workflows.EmbedIncidentWorkflowName)
	if !f.All {
		q += " AND ExecutionStatus = 'Running'"
	}
	if f.SiteID != "" {
		q += " AND WorkflowId = " + quote(workflows.EmbedIncidentID(f.SiteID))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = o.Limit
	}
	runs, err := list(ctx, o, q, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Incident, len(runs))
	each(runs, func(i int, run *workflowpb.WorkflowExecutionInfo) {
		id := run.GetExecution().GetWorkflowId()
		in := Incident{
			SiteID: strings.TrimPrefix(id, workflows.EmbedIncidentKind.Prefix), WorkflowID: id,
			OpenedAt: run.GetStartTime().AsTime().UTC(),
			Operator: memo(o, run.GetMemo(), "operator"), Reason: memo(o, run.GetMemo(), "reason"),
		}
		if run.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			in.State = closedState(run.GetStatus())
			in.ClosedAt = run.GetCloseTime().AsTime().UTC()
		} else {
			var st workflows.EmbedIncidentStatus
			if err := query(ctx, o, id, run.GetExecution().GetRunId(), workflows.QueryIncident, &st); err != nil {
				in.State = StateUnknown
			} else {
				in.State = st.State
			}
			in.Next = incidentNext(in)
		}
		out[i] = in
	})
	return out, nil
}

// incidentNext is what on-call runs next for an open incident.
func incidentNext(in Incident) string {
	switch in.State {
	case workflows.IncidentOff:
		return fmt.Sprintf("siteops embed on --site %s   (or keep it off: siteops embed close --site %s)", in.SiteID, in.SiteID)
	case StateUnknown:
		return fmt.Sprintf("no worker answered its status: siteops status %s, and check that a worker runs (siteops doctor)", in.WorkflowID)
	default:
		return "siteops status " + in.WorkflowID
	}
}

// closedState names how a closed run ended, as `siteops status` does.
func closedState(s enumspb.WorkflowExecutionStatus) string {
	return "closed: " + strings.ToLower(strings.TrimPrefix(s.String(), "WORKFLOW_EXECUTION_STATUS_"))
}

// list lists the runs that q selects, newest first, at most limit.
func list(ctx context.Context, o Options, q string, limit int) ([]*workflowpb.WorkflowExecutionInfo, error) {
	var out []*workflowpb.WorkflowExecutionInfo
	var page []byte
	for len(out) < limit {
		size := int32(1000)
		if left := limit - len(out); left < 1000 {
			size = int32(left) //nolint:gosec // below 1000
		}
		resp, err := o.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: o.namespace(), Query: q, PageSize: size, NextPageToken: page,
		})
		if err != nil {
			return nil, fmt.Errorf("listing the workflows (%s): %w", q, err)
		}
		out = append(out, resp.GetExecutions()...)
		if page = resp.GetNextPageToken(); len(page) == 0 {
			break
		}
	}
	return out[:min(len(out), limit)], nil
}

func (o Options) namespace() string {
	if o.Namespace == "" {
		return "default"
	}
	return o.Namespace
}

// count counts the runs that q selects.
func count(ctx context.Context, o Options, q string) (int, error) {
	resp, err := o.Temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: o.namespace(), Query: q})
	if err != nil {
		return 0, fmt.Errorf("counting the workflows (%s): %w", q, err)
	}
	return int(resp.GetCount()), nil
}

// query asks a run's status query, within the options' query timeout.
func query(ctx context.Context, o Options, id, runID, name string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, o.QueryTimeout)
	defer cancel()
	v, err := o.Temporal.QueryWorkflow(ctx, id, runID, name)
	if err != nil {
		return err
	}
	return v.Get(out)
}

// memo reads a string field of a run's memo ("" when it has none or it
// does not decode: a payload encrypted under a key the CLI lacks).
func memo(o Options, m *commonpb.Memo, field string) string {
	p := m.GetFields()[field]
	if p == nil {
		return ""
	}
	var s string
	if err := o.DataConverter.FromPayload(p, &s); err != nil {
		return ""
	}
	return s
}

// errNoTemporal is returned by the lists when the options hold no client.
var errNoTemporal = errors.New("overview: no Temporal connection")
