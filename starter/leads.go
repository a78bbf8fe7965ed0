package starter

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/serviceerror"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// SyncLeads starts the site's lead sync if it is not running, and asks it
// to sync now (from the start when full).
func (s *Starter) SyncLeads(ctx context.Context, siteID string, full bool) (client.WorkflowRun, error) {
	id := workflows.LeadSyncID(siteID)
	var run client.WorkflowRun
	// A second "sync now" from a try whose answer was lost costs at most
	// one more sync.
	err := s.Patiently(ctx, "signalling "+id, func() error {
		var err error
		run, err = s.o.Client.SignalWithStartWorkflow(ctx, id, workflows.SignalSync, workflows.SyncRequest{Full: full},
			s.options(workflows.LeadSyncKind, id), workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: siteID, Full: full})
		return err
	})
	return run, err
}

// LeadProgress queries a site's lead sync (its latest run) and, with
// Options.LeadSyncs, adds what the lead event shards did for the site: a
// site whose lead.created events go to a shard (SITEOPS_LEAD_SHARDS) may
// have no lead sync of its own. It fails with the query's
// *serviceerror.NotFound when neither knows the site.
func (s *Starter) LeadProgress(ctx context.Context, siteID string) (workflows.LeadSyncProgress, error) {
	p, err := s.leadProgress(ctx, workflows.LeadSyncID(siteID), "")
	var nf *serviceerror.NotFound
	if s.o.LeadSyncs == nil || (err != nil && !errors.As(err, &nf)) {
		return p, err
	}
	sh, serr := s.o.LeadSyncs.LeadSiteSyncs(ctx, siteID)
	switch {
	case errors.Is(serr, store.ErrNotFound):
		return p, err
	case serr != nil && err != nil:
		return p, err
	case serr != nil:
		s.warn("the lead event shards' syncs of site %s could not be read; the progress is the site's own lead sync's alone: %v", siteID, serr)
		return p, nil
	}
	return addShardSyncs(p, sh), nil
}

// addShardSyncs adds to a site's lead sync progress what the lead event
// shards did for the site: their events and syncs, and their last sync's
// state when it is the later one.
func addShardSyncs(p workflows.LeadSyncProgress, sh store.LeadSiteSyncs) workflows.LeadSyncProgress {
	p.Events += sh.Events
	p.DuplicateEvents += sh.Duplicates
	p.Syncs += sh.Syncs
	if sh.LastSyncAt.After(p.LastSyncAt) {
		p.LastSyncAt = sh.LastSyncAt
		p.CaughtUp = sh.CaughtUp && sh.LastError == ""
		p.Leads = max(p.Leads, sh.Leads)
	}
	return p
}

func (s *Starter) leadProgress(ctx context.Context, id, runID string) (workflows.LeadSyncProgress, error) {
	var p workflows.LeadSyncProgress
	v, err := s.o.Client.QueryWorkflow(ctx, id, runID, workflows.LeadSyncKind.StatusQuery)
	if err != nil {
		return p, err
	}
	return p, v.Get(&p)
}

// FollowLeadSync asks the site's lead sync to sync now (starting it if
// needed) and follows it until a sync that completed after the request has
// caught up, calling progress (when not nil) with what it reports every
// interval. It ends at once when the workflow ends — a lead sync runs
// until cancelled, so that is a failure, a cancellation or a termination,
// returned as a *WorkflowFailedError with its root cause — and with
// *ErrStoppedWaiting when ctx ends first.
func (s *Starter) FollowLeadSync(ctx context.Context, siteID string, full bool, interval time.Duration, progress func(workflows.LeadSyncProgress)) (workflows.LeadSyncProgress, error) {
	id := workflows.LeadSyncID(siteID)
	before := s.runningLeadSync(ctx, id)
	run, err := s.SyncLeads(ctx, siteID, full)
	if err != nil {
		return before.progress, err
	}
	want := before.syncsAfterRequest(s.firstRunOf(ctx, id, run.GetRunID()))
	ended := make(chan error, 1)
	waitCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		// Get follows the run the request reached across continue-as-new,
		// and ends when that chain of runs ends, whichever way.
		ended <- s.Patiently(waitCtx, "following "+id, func() error {
			return s.o.Client.GetWorkflow(waitCtx, id, run.GetRunID()).Get(waitCtx, nil)
		})
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
			if p.CaughtUp && !p.Syncing && p.Syncs >= want {
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

// leadSyncBefore is what a site's lead sync had done when a request to
// sync was about to be sent.
type leadSyncBefore struct {
	// firstRun names the chain of runs that was running ("" when none
	// was): continue-as-new carries the counters along one chain, and a
	// new chain (after a failure, a cancellation or a termination) starts
	// them at zero again.
	firstRun string
	progress workflows.LeadSyncProgress
}

// runningLeadSync reads the running lead sync's progress. A closed run is
// not read: the next request starts a new chain whose counters start at
// zero, and querying a closed run needs a worker to replay it.
func (s *Starter) runningLeadSync(ctx context.Context, id string) leadSyncBefore {
	d, err := s.o.Client.DescribeWorkflow(ctx, id, "")
	if err != nil || d.RawResponse.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return leadSyncBefore{}
	}
	info := d.RawResponse.GetWorkflowExecutionInfo()
	p, err := s.leadProgress(ctx, id, info.GetExecution().GetRunId())
	if err != nil {
		// Not known: any sync the chain completes from now on counts.
		// At worst the follow ends one sync early; it never waits for a
		// sync that will not come.
		return leadSyncBefore{}
	}
	return leadSyncBefore{firstRun: firstRun(info.GetFirstRunId(), info.GetExecution().GetRunId()), progress: p}
}

// firstRunOf names the chain of runs that runID belongs to ("" when it
// cannot be read).
func (s *Starter) firstRunOf(ctx context.Context, id, runID string) string {
	d, err := s.o.Client.DescribeWorkflow(ctx, id, runID)
	if err != nil {
		return ""
	}
	info := d.RawResponse.GetWorkflowExecutionInfo()
	return firstRun(info.GetFirstRunId(), info.GetExecution().GetRunId())
}

// firstRun is a run's first run ID, itself when the server does not say.
func firstRun(first, run string) string {
	if first == "" {
		return run
	}
	return first
}

// syncsAfterRequest is the count of syncs the chain named by reached must
// have completed for one to have started after the request: one more than
// before, and one more again when a sync was under way (it started
// before the request). A new chain counts from zero.
func (b leadSyncBefore) syncsAfterRequest(reached string) int {
	if b.firstRun == "" || reached == "" || reached != b.firstRun {
		return 1
	}
	want := b.progress.Syncs + 1
	if b.progress.Syncing {
		want++
	}
	return want
}
