package workflows

import (
	"fmt"
	"strings"
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
		s := sweepSignals{}
		for i, site := range res.Missed {
			if i < len(res.MissedBy) {
				if shard, ok := shardOfSyncKey(res.MissedBy[i]); ok && s.shards(ctx) {
					s.toShard(shard, site)
					continue
				}
			}
			s.sites = append(s.sites, site)
			s.futures = append(s.futures, workflow.SignalExternalWorkflow(ctx, LeadSyncID(site), "", SignalSync, SyncRequest{}))
		}
		for i, shard := range s.shardKeys {
			sig := SiteLeadsSignal{}
			for _, site := range s.byShard[i] {
				sig.Sites = append(sig.Sites, SiteEvents{SiteID: site})
			}
			s.futures = append(s.futures, workflow.SignalExternalWorkflow(ctx, LeadEventsKind.ID(shard), "", SignalSiteLeads, sig))
		}
		for i, f := range s.futures {
			sites := s.sitesOf(i)
			err := f.Get(ctx, nil)
			if err != nil && i >= len(s.sites) {
				// The shard is not running (cancelled, or shards turned
				// off): ask the sites' own lead syncs, if they run.
				sites, err = s.askLeadSyncs(ctx, sites)
				st.Signalled += len(s.byShard[i-len(s.sites)]) - len(sites)
			}
			if err != nil {
				st.NotRunning += len(sites)
				workflow.GetLogger(ctx).Warn("lead sweep: sites miss leads and have no running lead sync to sync them", "site_ids", sites, "error", err)
				continue
			}
			st.Signalled += len(sites)
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

// versionSweepShards marks sweeps that ask a lead event shard, not the
// site's own lead sync, to sync a missed site that the shard synced last
// (one signal per shard). It is asked only for such a site, so sweeps
// that meet none record no marker.
const versionSweepShards = "lead-sweep-shards"

// sweepSignals are the signals one page of a sweep sends: one per missed
// site with its own lead sync (sites, in order), then one per shard
// (shardKeys, with its sites in byShard).
type sweepSignals struct {
	futures   []workflow.Future
	sites     []string
	shardKeys []string
	byShard   [][]string
	version   workflow.Version
	asked     bool
}

// shards says whether this sweep signals shards (versionSweepShards).
func (s *sweepSignals) shards(ctx workflow.Context) bool {
	if !s.asked {
		s.version, s.asked = workflow.GetVersion(ctx, versionSweepShards, workflow.DefaultVersion, 1), true
	}
	return s.version == 1
}

func (s *sweepSignals) toShard(shard, site string) {
	for i, k := range s.shardKeys {
		if k == shard {
			s.byShard[i] = append(s.byShard[i], site)
			return
		}
	}
	s.shardKeys = append(s.shardKeys, shard)
	s.byShard = append(s.byShard, []string{site})
}

// askLeadSyncs signals sync to the lead syncs of sites and returns those
// that have none running, with the last error.
func (s *sweepSignals) askLeadSyncs(ctx workflow.Context, sites []string) ([]string, error) {
	fs := make([]workflow.Future, len(sites))
	for i, site := range sites {
		fs[i] = workflow.SignalExternalWorkflow(ctx, LeadSyncID(site), "", SignalSync, SyncRequest{})
	}
	var missed []string
	var last error
	for i, f := range fs {
		if err := f.Get(ctx, nil); err != nil {
			missed, last = append(missed, sites[i]), err
		}
	}
	return missed, last
}

// sitesOf names the sites the i-th signal asks to sync.
func (s *sweepSignals) sitesOf(i int) []string {
	if i < len(s.sites) {
		return s.sites[i : i+1]
	}
	return s.byShard[i-len(s.sites)]
}

// shardOfSyncKey is the shard whose sync a sync key names (LeadEvents
// makes them from its workflow ID), false for the key of a site's own
// lead sync.
func shardOfSyncKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, LeadEventsKind.Prefix)
	if !ok {
		return "", false
	}
	shard, _, _ := strings.Cut(rest, "/")
	return shard, shard != ""
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
