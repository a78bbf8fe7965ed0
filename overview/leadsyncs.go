package overview

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/siteops/siteops/workflows"
)

// LeadSyncs is how the sites' lead syncs stand: how many run, which lag
// (running, but their last page is older than LagAfter), which failed
// in the last day with no run after them, and which sites the lead sweep
// could not read in the last day.
type LeadSyncs struct {
	Running int           `json:"running"`
	Lagging []LeadSyncLag `json:"lagging"`
	// LaggingChecked is how many of the store's oldest positions were
	// checked against Temporal; Stale how many are older than LagAfter
	// in all (running or not).
	Stale  int              `json:"stale"`
	Failed []FailedLeadSync `json:"failed"`
	// SweepFailing are the sites whose leads the lead sweep could not
	// read (the longest failing first, at most Limit), SweepFailingTotal
	// how many in all.
	SweepFailing      []SweepFailure `json:"sweep_failing"`
	SweepFailingTotal int            `json:"sweep_failing_total"`
}

// SweepFailure is a site whose leads the lead sweep could not read: the
// failure's class (an HTTP status, "network", ...), since when, and how
// many sweeps failed at it.
type SweepFailure struct {
	SiteID   string    `json:"site_id"`
	Reason   string    `json:"reason"`
	Since    time.Time `json:"since"`
	LastAt   time.Time `json:"last_at"`
	Failures int64     `json:"failures"`
	Next     string    `json:"next"`
}

// LeadSyncLag is a running lead sync that has not stored a page for a
// while: Behind is how long.
type LeadSyncLag struct {
	SiteID       string    `json:"site_id"`
	WorkflowID   string    `json:"workflow_id"`
	LastSyncedAt time.Time `json:"last_synced_at"`
	Behind       string    `json:"behind"`
	Next         string    `json:"next"`
}

// FailedLeadSync is a lead sync that failed and was not started again.
type FailedLeadSync struct {
	SiteID     string    `json:"site_id"`
	WorkflowID string    `json:"workflow_id"`
	ClosedAt   time.Time `json:"closed_at"`
	Cause      string    `json:"cause,omitempty"`
	Next       string    `json:"next"`
}

// failedWithin is how far back failed lead syncs are looked for.
const failedWithin = 24 * time.Hour

// LeadSyncStatus reads the lead syncs: the count and the failures from
// Temporal, the lag from the store (and whether each lagging one still
// runs from Temporal). A part that cannot be read is returned as
// unavailable, beside the rest.
func LeadSyncStatus(ctx context.Context, o Options) (LeadSyncs, []Unavailable) {
	o = o.withDefaults()
	out := LeadSyncs{Lagging: []LeadSyncLag{}, Failed: []FailedLeadSync{}, SweepFailing: []SweepFailure{}}
	var missing []Unavailable
	if o.Temporal != nil {
		q := "WorkflowType = " + quote(workflows.LeadSyncWorkflowName)
		n, err := count(ctx, o, q+" AND ExecutionStatus = 'Running'")
		if err != nil {
			missing = append(missing, Unavailable{Part: "lead syncs running", Reason: oneLine(err)})
		}
		out.Running = n
		failed, err := failedLeadSyncs(ctx, o, q)
		if err != nil {
			missing = append(missing, Unavailable{Part: "lead syncs failed", Reason: oneLine(err)})
		}
		out.Failed = failed
	}
	if o.Store == nil {
		return out, append(missing, Unavailable{Part: "lead syncs lagging", Reason: o.NoStore}, Unavailable{Part: "lead sweep failures", Reason: o.NoStore})
	}
	if lagging, stale, err := LaggingLeadSyncs(ctx, o, o.Limit); err != nil {
		missing = append(missing, Unavailable{Part: "lead syncs lagging", Reason: oneLine(err)})
	} else {
		out.Lagging, out.Stale = lagging, stale
	}
	if failing, total, err := sweepFailures(ctx, o); err != nil {
		missing = append(missing, Unavailable{Part: "lead sweep failures", Reason: oneLine(err)})
	} else {
		out.SweepFailing, out.SweepFailingTotal = failing, total
	}
	return out, missing
}

// sweepFailures lists the sites whose leads the lead sweep could not read
// in the last day, the longest failing first, at most the options'
// Limit, and how many there are in all.
func sweepFailures(ctx context.Context, o Options) ([]SweepFailure, int, error) {
	rows, total, err := o.Store.LeadSweepFailures(ctx, o.Now().Add(-failedWithin), o.Limit)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the lead sweep's failures: %w", err)
	}
	out := []SweepFailure{}
	for _, r := range rows {
		out = append(out, SweepFailure{SiteID: r.SiteID, Reason: r.Reason, Since: r.Since, LastAt: r.LastAt, Failures: r.Failures,
			Next: fmt.Sprintf("siteops leads sync --site %s --follow (its error says why the site's leads cannot be read)", r.SiteID)})
	}
	return out, total, nil
}

// LaggingLeadSyncs returns the lead syncs that have not stored a page for
// longer than the options' LagAfter, the longest first, at most limit;
// with a Temporal client only those whose workflow still runs (one that
// ended is not syncing at all: it is among the failed, or was stopped on
// purpose). It also returns how many positions are that old in all.
func LaggingLeadSyncs(ctx context.Context, o Options, limit int) ([]LeadSyncLag, int, error) {
	o = o.withDefaults()
	now := o.Now()
	// Some of the oldest may have ended: read more than limit of them.
	seen, stale, err := o.Store.StaleLeadSyncs(ctx, now.Add(-o.LagAfter), 4*limit)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the lead syncs' last pages: %w", err)
	}
	lags := make([]*LeadSyncLag, len(seen))
	each(seen, func(i int, s storeSeen) {
		id := workflows.LeadSyncID(s.SiteID)
		if o.Temporal != nil {
			d, err := o.Temporal.DescribeWorkflow(ctx, id, "")
			if err != nil || d.RawResponse.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				return
			}
		}
		lags[i] = &LeadSyncLag{SiteID: s.SiteID, WorkflowID: id, LastSyncedAt: s.At, Behind: now.Sub(s.At).Round(time.Second).String(),
			Next: fmt.Sprintf("siteops status %s (why it stores nothing), then siteops leads sync --site %s", id, s.SiteID)}
	})
	out := []LeadSyncLag{}
	for _, l := range lags {
		if l != nil && len(out) < limit {
			out = append(out, *l)
		}
	}
	return out, stale, nil
}

// failedLeadSyncs lists the lead syncs that failed or timed out in the
// last day and whose workflow ID has no run since.
func failedLeadSyncs(ctx context.Context, o Options, q string) ([]FailedLeadSync, error) {
	since := o.Now().Add(-failedWithin).UTC().Format(time.RFC3339)
	runs, err := list(ctx, o, q+" AND ExecutionStatus IN ('Failed', 'TimedOut') AND CloseTime > "+quote(since), o.Limit)
	if err != nil {
		return nil, err
	}
	found := make([]*FailedLeadSync, len(runs))
	each(runs, func(i int, run *workflowpb.WorkflowExecutionInfo) {
		id := run.GetExecution().GetWorkflowId()
		d, err := o.Temporal.DescribeWorkflow(ctx, id, "")
		if err == nil && d.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId() != run.GetExecution().GetRunId() {
			return // started again since
		}
		site := id[len(workflows.LeadSyncKind.Prefix):]
		f := FailedLeadSync{SiteID: site, WorkflowID: id, ClosedAt: run.GetCloseTime().AsTime().UTC(),
			Next: fmt.Sprintf("siteops status %s (the cause), then siteops leads sync --site %s", id, site)}
		if o.Starter != nil {
			if st, err := o.Starter.Status(ctx, id); err == nil && st.Failure != nil {
				f.Cause = st.Failure.Message
			}
		}
		found[i] = &f
	})
	out := []FailedLeadSync{}
	for _, f := range found {
		if f != nil {
			out = append(out, *f)
		}
	}
	return out, nil
}
