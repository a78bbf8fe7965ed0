package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/activities"
)

// Names of the lead sweep.
const (
	LeadSweepWorkflowName = "LeadSweep"
	// LeadSweepScheduleID is the Temporal Schedule that the worker
	// creates at start and that starts LeadSweep every
	// SITEOPS_LEAD_SWEEP_EVERY.
	LeadSweepScheduleID = "lead-sweep"
	// QueryLeadSweep answers LeadSweepStatus.
	QueryLeadSweep = "status"
)

// LeadSweepInput starts a sweep; its fields carry a sweep across
// continue-as-new, and a scheduled start leaves them empty.
type LeadSweepInput struct {
	After  string          `json:"after,omitempty"`
	Status LeadSweepStatus `json:"status"`
}

// LeadSweepStatus answers QueryLeadSweep and is the result.
type LeadSweepStatus struct {
	Done    bool `json:"done"`
	Checked int  `json:"checked"`
	Syncing int  `json:"syncing"`
	Failed  int  `json:"failed"`
	// Missed counts the sites found with leads the store does not hold;
	// Signalled how many of their lead syncs were asked to sync, and
	// NotRunning how many had no running lead sync to ask.
	Missed     int `json:"missed"`
	Signalled  int `json:"signalled"`
	NotRunning int `json:"not_running"`
}

// LeadSweepID is the ID the schedule gives its workflows (the server
// appends the scheduled time).
func LeadSweepID() string { return LeadSweepKind.ID("scheduled") }

// LeadSweep is the lead syncs' safety net for a lead.created delivery that
// never comes: it checks every site with a lead sync (one API read each,
// activities.SweepLeads) and asks the lead sync of each site found
// missing leads to sync now (SignalSync). Its cost in Temporal actions is
// the same for ten sites or a hundred thousand quiet ones, give or take
// one activity per DefaultSweepSites sites and a signal per site missed,
// where a poll timer per site would cost three actions every five minutes
// each. A missed delivery is found within one schedule period plus the
// sweep's own run.
func LeadSweep(ctx workflow.Context, in LeadSweepInput) (LeadSweepStatus, error) {
	st := in.Status
	if err := workflow.SetQueryHandler(ctx, QueryLeadSweep, func() (LeadSweepStatus, error) { return st, nil }); err != nil {
		return st, err
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    leadSyncHeartbeat,
		// Transient errors are retried from the last site handled for as
		// long as the schedule lets the run go on.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
	})
	var a *activities.Activities
	after := in.After
	for {
		var res activities.SweepLeadsResult
		if err := workflow.ExecuteActivity(actx, a.SweepLeads, activities.SweepLeadsInput{After: after, PageLimit: DefaultPageLimit}).Get(ctx, &res); err != nil {
			return st, err
		}
		st.Checked += res.Checked
		st.Syncing += res.Syncing
		st.Failed += res.Failed
		st.Missed += len(res.Missed)
		signals := make([]workflow.Future, len(res.Missed))
		for i, site := range res.Missed {
			signals[i] = workflow.SignalExternalWorkflow(ctx, LeadSyncID(site), "", SignalSync, SyncRequest{})
		}
		for i, f := range signals {
			if err := f.Get(ctx, nil); err != nil {
				st.NotRunning++
				workflow.GetLogger(ctx).Warn("lead sweep: a site misses leads and has no running lead sync to sync them", "site_id", res.Missed[i], "error", err)
				continue
			}
			st.Signalled++
		}
		if res.Done {
			st.Done = true
			return st, nil
		}
		after = res.Next
		info := workflow.GetInfo(ctx)
		if info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > MaxHistoryEvents {
			return st, workflow.NewContinueAsNewError(ctx, LeadSweepWorkflowName, LeadSweepInput{After: after, Status: st})
		}
	}
}

// Summary implements Status.
func (s *LeadSweepStatus) Summary() []string {
	state := "sweeping"
	if s.Done {
		state = "swept"
	}
	line := fmt.Sprintf("%s: %d site(s) current, %d missing leads (%d lead sync(s) asked to sync, %d not running), %d syncing, %d not checkable",
		state, s.Checked, s.Missed, s.Signalled, s.NotRunning, s.Syncing, s.Failed)
	return []string{line}
}
