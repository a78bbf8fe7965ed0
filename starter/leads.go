package starter

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/workflows"
)

// SyncLeads starts the site's lead sync if it is not running, and asks it
// to sync now (from the start when full).
func (s *Starter) SyncLeads(ctx context.Context, siteID string, full bool) (client.WorkflowRun, error) {
	id := workflows.LeadSyncID(siteID)
	return s.Client.SignalWithStartWorkflow(ctx, id, workflows.SignalSync, workflows.SyncRequest{Full: full},
		s.options(workflows.LeadSyncKind, id), workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: siteID, Full: full})
}

// LeadProgress queries a site's lead sync.
func (s *Starter) LeadProgress(ctx context.Context, siteID string) (workflows.LeadSyncProgress, error) {
	var p workflows.LeadSyncProgress
	v, err := s.Client.QueryWorkflow(ctx, workflows.LeadSyncID(siteID), "", workflows.QueryProgress)
	if err != nil {
		return p, err
	}
	return p, v.Get(&p)
}

// FollowLeadSync asks the site's lead sync to sync now (starting it if
// needed) and follows it until that sync has caught up, calling progress
// (when not nil) with what it reports every interval. It ends at once when
// the workflow ends — a lead sync runs until cancelled, so that is a
// failure, a cancellation or a termination, returned as a
// *WorkflowFailedError with its root cause — and with *ErrStoppedWaiting
// when ctx ends first.
func (s *Starter) FollowLeadSync(ctx context.Context, siteID string, full bool, interval time.Duration, progress func(workflows.LeadSyncProgress)) (workflows.LeadSyncProgress, error) {
	id := workflows.LeadSyncID(siteID)
	before, _ := s.LeadProgress(ctx, siteID) // zero when not running yet
	run, err := s.SyncLeads(ctx, siteID, full)
	if err != nil {
		return before, err
	}
	ended := make(chan error, 1)
	waitCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		// An empty run id follows the sync across continue-as-new.
		ended <- s.Client.GetWorkflow(waitCtx, id, "").Get(waitCtx, nil)
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last workflows.LeadSyncProgress
	for {
		if p, err := s.LeadProgress(ctx, siteID); err == nil {
			last = p
			if progress != nil {
				progress(p)
			}
			if p.CaughtUp && !p.Syncing && (p.Syncs > before.Syncs || p.Runs > before.Runs) {
				return p, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, &ErrStoppedWaiting{WorkflowID: id, Cause: ctx.Err()}
		case err := <-ended:
			if err == nil {
				return last, &WorkflowFailedError{WorkflowID: id, RunID: run.GetRunID(), Status: "Completed", Cause: Failure{Message: "the lead sync ended"}}
			}
			return last, waitErr(ctx, id, run.GetRunID(), err)
		case <-tick.C:
		}
	}
}
