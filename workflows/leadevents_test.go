package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/activities"

	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/workflows"
)

// shardStatus queries the lead event shard under test.
func (f *fixture) shardStatus(t *testing.T) workflows.LeadEventsStatus {
	t.Helper()
	return queried[workflows.LeadEventsStatus](t, f, workflows.QueryLeadEvents)
}

// TestLeadEventsSyncsManySitesWithOneActivity: one signal carrying the
// events of three sites costs one SyncSiteLeads, which stores every site's
// leads; a second signal syncs only what came since, and an event
// delivered again is counted as a duplicate, in the shard and in the
// store's record of each site.
func TestLeadEventsSyncsManySitesWithOneActivity(t *testing.T) {
	f := newFixture(t)
	a, b, c := f.siteNamed(t, "acme-a", 3), f.siteNamed(t, "acme-b", 250), f.siteNamed(t, "acme-c", 0)
	syncs := f.countSyncSiteLeads()
	var first, second workflows.LeadEventsStatus
	f.env.RegisterDelayedCallback(func() {
		f.env.SignalWorkflow(workflows.SignalSiteLeads, workflows.SiteLeadsSignal{Sites: []workflows.SiteEvents{
			{SiteID: a, EventIDs: []string{"evt_1", "evt_2"}}, {SiteID: b, EventIDs: []string{"evt_3"}}, {SiteID: c, EventIDs: []string{"evt_4"}},
		}})
	}, time.Minute)
	f.env.RegisterDelayedCallback(func() {
		first = f.shardStatus(t)
		if _, err := f.sim.CreateLeads(b, 2); err != nil {
			t.Error(err)
		}
		f.env.SignalWorkflow(workflows.SignalSiteLeads, workflows.SiteLeadsSignal{Sites: []workflows.SiteEvents{
			{SiteID: b, EventIDs: []string{"evt_5", "evt_3"}},
		}})
	}, 2*time.Minute)
	f.env.RegisterDelayedCallback(func() {
		second = f.shardStatus(t)
		f.env.CancelWorkflow()
	}, 3*time.Minute)
	f.env.ExecuteWorkflow(workflows.LeadEventsWorkflowName, workflows.LeadEventsInput{Shard: "0"})
	if !temporal.IsCanceledError(f.env.GetWorkflowError()) {
		t.Fatalf("the shard ended with %v; want cancelled", f.env.GetWorkflowError())
	}
	for site, want := range map[string]int{a: 3, b: 252, c: 0} {
		if n, err := f.store.CountLeads(t.Context(), site); err != nil || n != want {
			t.Errorf("site %s: %d leads stored (%v); want %d", site, n, err, want)
		}
	}
	// b's 250 leads are two pages: within one activity's page budget.
	if *syncs != 2 {
		t.Errorf("%d SyncSiteLeads for two signals; want 2", *syncs)
	}
	if first.Events != 4 || first.Syncs != 1 || first.SiteSyncs != 3 || first.Pending != 0 {
		t.Errorf("status after the first signal = %+v; want 4 events, 1 sync of 3 sites", first)
	}
	if second.Events != 5 || second.DuplicateEvents != 1 || second.Syncs != 2 || second.SiteSyncs != 4 {
		t.Errorf("status after the second signal = %+v; want 5 events, 1 duplicate, 2 syncs of 4 sites", second)
	}
	rec, err := f.store.LeadSiteSyncs(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Events != 2 || rec.Duplicates != 1 || rec.Syncs != 2 || rec.Leads != 252 || !rec.CaughtUp {
		t.Errorf("the store's record of site b = %+v; want 2 events, 1 duplicate, 2 syncs, 252 leads, caught up", rec)
	}
}

// countSyncSiteLeads counts the SyncSiteLeads attempts started.
func (f *fixture) countSyncSiteLeads() *int {
	n := new(int)
	f.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "SyncSiteLeads" {
			*n++
		}
	})
	return n
}

// TestLeadEventsKeepsAFailingSiteFromTheOthers: a site that is gone fails
// alone and is recorded with the reason; while the API fails every read,
// the sites wait and are tried again with backoff, and are synced once it
// answers again.
func TestLeadEventsKeepsAFailingSiteFromTheOthers(t *testing.T) {
	f := newFixture(t)
	a := f.siteWithLeads(t, 4)
	var failing, after workflows.LeadEventsStatus
	f.env.RegisterDelayedCallback(func() {
		f.env.SignalWorkflow(workflows.SignalSiteLeads, workflows.SiteLeadsSignal{Sites: []workflows.SiteEvents{
			{SiteID: "site_gone", EventIDs: []string{"evt_1"}}, {SiteID: a, EventIDs: []string{"evt_2"}},
		}})
	}, time.Minute)
	f.env.RegisterDelayedCallback(func() {
		if _, err := f.sim.CreateLeads(a, 3); err != nil {
			t.Error(err)
		}
		if err := f.sim.SetFaults(simulator.Faults{ErrorRate: 1}); err != nil {
			t.Error(err)
		}
		f.env.SignalWorkflow(workflows.SignalSiteLeads, workflows.SiteLeadsSignal{Sites: []workflows.SiteEvents{{SiteID: a, EventIDs: []string{"evt_3"}}}})
	}, 2*time.Minute)
	f.env.RegisterDelayedCallback(func() {
		failing = f.shardStatus(t)
		if err := f.sim.SetFaults(simulator.Faults{}); err != nil {
			t.Error(err)
		}
	}, 2*time.Minute+30*time.Second)
	f.env.RegisterDelayedCallback(func() {
		after = f.shardStatus(t)
		f.env.CancelWorkflow()
	}, 10*time.Minute)
	f.env.ExecuteWorkflow(workflows.LeadEventsWorkflowName, workflows.LeadEventsInput{Shard: "0"})
	if failing.Retrying != 1 || failing.Pending != 1 {
		t.Errorf("status while the API fails = %+v; want the site pending, retrying", failing)
	}
	if after.Pending != 0 || after.Failed != 1 || after.GaveUp != 0 {
		t.Errorf("status after the API answers again = %+v; want nothing pending, the gone site failed", after)
	}
	if n, _ := f.store.CountLeads(t.Context(), a); n != 7 {
		t.Errorf("site a holds %d leads; want 7", n)
	}
	gone, err := f.store.LeadSiteSyncs(t.Context(), "site_gone")
	if err != nil || gone.LastError == "" || gone.Events != 1 || gone.Syncs != 0 {
		t.Errorf("the store's record of the gone site = %+v, %v; want its event and the reason, no sync", gone, err)
	}
	rec, err := f.store.LeadSiteSyncs(t.Context(), a)
	if err != nil || rec.Events != 2 || rec.LastError != "" || !rec.CaughtUp {
		t.Errorf("the store's record of site a = %+v, %v; want both events counted once, caught up", rec, err)
	}
}

// TestLeadEventsContinuesAsNewWithWhatItHasNotSynced: a shard whose
// history passes its bound continues as new carrying its status, the
// event ids it remembers and the sites it has yet to sync; a run started
// with pending sites (continued) syncs them first.
func TestLeadEventsContinuesAsNewWithWhatItHasNotSynced(t *testing.T) {
	f := newFixture(t)
	a, b := f.siteNamed(t, "acme-can-a", 2), f.siteNamed(t, "acme-can-b", 3)
	f.env.RegisterDelayedCallback(func() {
		f.env.SetCurrentHistoryLength(workflows.MaxHistoryEvents + 1)
		f.env.SignalWorkflow(workflows.SignalSiteLeads, workflows.SiteLeadsSignal{Sites: []workflows.SiteEvents{{SiteID: b, EventIDs: []string{"evt_b"}}}})
	}, time.Minute)
	f.env.ExecuteWorkflow(workflows.LeadEventsWorkflowName, workflows.LeadEventsInput{Shard: "0",
		Pending: []workflows.PendingSite{{SiteLeadEvents: activities.SiteLeadEvents{SiteID: a, Events: 1}}}})
	var can *workflow.ContinueAsNewError
	if !errors.As(f.env.GetWorkflowError(), &can) {
		t.Fatalf("the shard ended with %v; want it continued as new", f.env.GetWorkflowError())
	}
	var next workflows.LeadEventsInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if len(next.Pending) != 1 || next.Pending[0].SiteID != b || next.Pending[0].Events != 1 {
		t.Errorf("the next run's pending sites = %+v; want %s with its event", next.Pending, b)
	}
	if next.Status.Runs != 1 || next.Status.Syncs != 1 || next.Status.Events != 1 || len(next.RecentEvents) != 1 || next.RecentEvents[0] != "evt_b" {
		t.Errorf("the next run's input carries status %+v and event ids %v; want this run's one sync and evt_b", next.Status, next.RecentEvents)
	}
	if n, _ := f.store.CountLeads(t.Context(), a); n != 2 {
		t.Errorf("the pending site of the input holds %d leads; want 2", n)
	}
}
