package workflows_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// countTimers counts the timers the workflow under test starts.
func (f *fixture) countTimers() *int {
	n := new(int)
	f.env.SetOnTimerScheduledListener(func(string, time.Duration) { *n++ })
	return n
}

// sweep runs one SweepLeads over every site, as the lead sweep does.
func (f *fixture) sweep(t *testing.T) activities.SweepLeadsResult {
	t.Helper()
	env := f.suite.NewTestActivityEnvironment()
	env.RegisterActivity(f.acts)
	v, err := env.ExecuteActivity(f.acts.SweepLeads, activities.SweepLeadsInput{PageLimit: workflows.DefaultPageLimit})
	if err != nil {
		t.Fatal(err)
	}
	var res activities.SweepLeadsResult
	if err := v.Get(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestIdleLeadSyncArmsNoTimerAndTheSweepFindsItsMissedLeads: a lead sync
// started without a poll interval waits for events with no timer (a quiet
// site costs no Temporal action), a lead whose lead.created never came
// stays unsynced, and the sweep finds it, checks the current sites and
// leaves the signal to sync to the workflow, which then stores it.
func TestIdleLeadSyncArmsNoTimerAndTheSweepFindsItsMissedLeads(t *testing.T) {
	f := newFixture(t)
	site := f.siteWithLeads(t, 5)
	timers := f.countTimers()
	var found, after activities.SweepLeadsResult
	var beforeSweep int
	f.env.RegisterDelayedCallback(func() {
		// Leads whose lead.created delivery never comes (no endpoint).
		if _, err := f.sim.CreateLeads(site, 5); err != nil {
			t.Error(err)
		}
	}, time.Minute)
	f.env.RegisterDelayedCallback(func() {
		beforeSweep, _ = f.store.CountLeads(t.Context(), site)
		found = f.sweep(t)
		f.env.SignalWorkflow(workflows.SignalSync, workflows.SyncRequest{})
	}, 6*time.Hour)
	f.env.RegisterDelayedCallback(func() {
		after = f.sweep(t)
		f.env.CancelWorkflow()
	}, 6*time.Hour+time.Minute)
	f.env.ExecuteWorkflow(workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: site})

	if !f.env.IsWorkflowCompleted() || !temporal.IsCanceledError(f.env.GetWorkflowError()) {
		t.Fatalf("the lead sync waiting without a timer did not end cancelled: completed %v, %v", f.env.IsWorkflowCompleted(), f.env.GetWorkflowError())
	}
	if beforeSweep != 5 {
		t.Errorf("after six quiet hours the store holds %d leads; want the 5 of the first sync (no poll)", beforeSweep)
	}
	if *timers != 0 {
		t.Errorf("the lead sync started %d timers in six quiet hours; want none", *timers)
	}
	if len(found.Missed) != 1 || found.Missed[0] != site || found.Checked != 0 || !found.Done {
		t.Errorf("the sweep found %+v; want %s missed", found, site)
	}
	if n, _ := f.store.CountLeads(t.Context(), site); n != 10 {
		t.Errorf("after the sweep's signal the store holds %d leads; want 10", n)
	}
	if len(after.Missed) != 0 || after.Checked != 1 {
		t.Errorf("the sweep after the sync found %+v; want the site current", after)
	}
}

// TestSweptLeadSyncKeepsOnePollTimerAcrossEvents: a lead sync asked to
// poll arms its timer once and keeps it while events come and go, where
// runs before the sweep armed one per sync.
func TestSweptLeadSyncKeepsOnePollTimerAcrossEvents(t *testing.T) {
	f := newFixture(t)
	site := f.siteWithLeads(t, 5)
	timers := f.countTimers()
	for i := 1; i <= 3; i++ {
		f.env.RegisterDelayedCallback(func() {
			f.env.SignalWorkflow(workflows.SignalLeadsCreated, workflows.LeadsCreatedSignal{EventIDs: []string{"evt_" + string(rune('0'+i))}})
		}, time.Duration(i)*time.Minute)
	}
	var p workflows.LeadSyncProgress
	f.env.RegisterDelayedCallback(func() { p = f.progress(t) }, 4*time.Minute)
	f.env.RegisterDelayedCallback(func() { f.env.CancelWorkflow() }, 11*time.Minute)
	f.env.ExecuteWorkflow(workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: site, PollInterval: workflows.Duration(10 * time.Minute)})
	if p.Syncs != 4 || p.Events != 3 {
		t.Errorf("progress after three events = %+v; want 4 syncs (the first and one per event)", p)
	}
	// One timer for the first ten minutes, one more after it fired.
	if *timers != 2 {
		t.Errorf("%d timers in 11 minutes with three events; want 2 (one per poll interval)", *timers)
	}
}

// TestLeadSyncContinuedFromBeforeTheSweepDropsTheOldDefault: a run
// continued from one before the sweep carries the 5-minute default that
// run wrote into its input; it relies on the sweep instead. A run the
// caller asked to poll every 5 minutes keeps polling.
func TestLeadSyncContinuedFromBeforeTheSweepDropsTheOldDefault(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     workflows.LeadSyncInput
		timers int
	}{
		{"continued from before the sweep", workflows.LeadSyncInput{PollInterval: workflows.Duration(5 * time.Minute), Progress: workflows.LeadSyncProgress{Runs: 1}}, 0},
		{"continued from a swept run", workflows.LeadSyncInput{PollInterval: workflows.Duration(5 * time.Minute), Progress: workflows.LeadSyncProgress{Runs: 1}, Swept: true}, 1},
		{"started asking for 5 minutes", workflows.LeadSyncInput{PollInterval: workflows.Duration(5 * time.Minute)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.in.SiteID = f.siteWithLeads(t, 1)
			timers := f.countTimers()
			f.env.RegisterDelayedCallback(func() { f.env.CancelWorkflow() }, 4*time.Minute)
			f.env.ExecuteWorkflow(workflows.LeadSyncWorkflowName, tc.in)
			if *timers != tc.timers {
				t.Errorf("%d timers; want %d", *timers, tc.timers)
			}
		})
	}
}

var errUnknownWorkflow = errors.New("unknown external workflow execution")

// TestLeadSweepSignalsOnlyTheSitesMissingLeads: the sweep workflow checks
// every site with a position, signals the lead sync of each site missing
// leads (and counts one with none running), and leaves the rest alone.
func TestLeadSweepSignalsOnlyTheSitesMissingLeads(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	var sites []string
	for i := range 5 {
		sites = append(sites, f.siteNamed(t, "site-"+string(rune('a'+i)), 3))
	}
	// Each site's lead sync caught up once (its position in the store).
	for _, site := range sites {
		f.syncLeads(t, site, "sync-"+site)
	}
	current, missed, gone, syncing, stalled := sites[0], sites[1], sites[2], sites[3], sites[4]
	for _, site := range []string{missed, gone} {
		if _, err := f.sim.CreateLeads(site, 2); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.store.UpsertLeadsAt(ctx, syncing, "sync-"+syncing, nil, store.LeadSyncPosition{Pages: 1, LastPageAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// A sync that stopped short and stored nothing for longer than the
	// stall timeout has ended: the sweep counts its site as missed.
	if _, err := f.store.UpsertLeadsAt(ctx, stalled, "sync-"+stalled, nil, store.LeadSyncPosition{Pages: 1, LastPageAt: time.Now().Add(-2 * activities.DefaultStallTimeout)}); err != nil {
		t.Fatal(err)
	}
	seen, err := f.store.LeadSyncLastSeen(ctx, current)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // so that the check's time is later
	f.env.OnSignalExternalWorkflow(mock.Anything, workflows.LeadSyncID(missed), "", workflows.SignalSync, mock.Anything).Return(nil).Once()
	f.env.OnSignalExternalWorkflow(mock.Anything, workflows.LeadSyncID(gone), "", workflows.SignalSync, mock.Anything).Return(errUnknownWorkflow).Once()
	f.env.OnSignalExternalWorkflow(mock.Anything, workflows.LeadSyncID(stalled), "", workflows.SignalSync, mock.Anything).Return(nil).Once()
	f.env.ExecuteWorkflow(workflows.LeadSweepWorkflowName, workflows.LeadSweepInput{})
	var st workflows.LeadSweepStatus
	if err := f.env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	want := workflows.LeadSweepStatus{Done: true, Checked: 1, Syncing: 1, Missed: 3, Signalled: 2, NotRunning: 1}
	if st != want {
		t.Errorf("sweep = %+v; want %+v", st, want)
	}
	f.env.AssertExpectations(t)
	if n, _ := f.store.CountLeads(ctx, missed); n != 3 {
		t.Errorf("the sweep stored leads itself (%d); it only signals", n)
	}
	if checked, err := f.store.LeadSyncLastSeen(ctx, current); err != nil || !checked.After(seen) {
		t.Errorf("the current site was last seen %s (%v); want the sweep's check after %s", checked, err, seen)
	}
}

// TestLeadSweepAsksTheShardThatSyncedASite: a missed site that a lead
// event shard synced last is asked through that shard, one signal for
// its sites; when the shard does not run, the site's own lead sync is
// asked instead.
func TestLeadSweepAsksTheShardThatSyncedASite(t *testing.T) {
	f := newFixture(t)
	var sites []string
	for i := range 3 {
		sites = append(sites, f.siteNamed(t, "shard-site-"+string(rune('a'+i)), 3))
	}
	// Shard 0 synced the first two, shard 1 the third; then each got a
	// lead whose delivery never came.
	shardOf := []string{"0", "0", "1"}
	for i, site := range sites {
		f.syncLeads(t, site, workflows.Key(workflows.LeadEventsKind.ID(shardOf[i]), "run", "sync", "1", site))
		if _, err := f.sim.CreateLeads(site, 1); err != nil {
			t.Fatal(err)
		}
	}
	var toShard0 workflows.SiteLeadsSignal
	f.env.OnSignalExternalWorkflow(mock.Anything, workflows.LeadEventsKind.ID("0"), "", workflows.SignalSiteLeads, mock.Anything).
		Run(func(args mock.Arguments) { toShard0 = args.Get(4).(workflows.SiteLeadsSignal) }).Return(nil).Once()
	f.env.OnSignalExternalWorkflow(mock.Anything, workflows.LeadEventsKind.ID("1"), "", workflows.SignalSiteLeads, mock.Anything).Return(errUnknownWorkflow).Once()
	f.env.OnSignalExternalWorkflow(mock.Anything, workflows.LeadSyncID(sites[2]), "", workflows.SignalSync, mock.Anything).Return(nil).Once()
	f.env.ExecuteWorkflow(workflows.LeadSweepWorkflowName, workflows.LeadSweepInput{})
	var st workflows.LeadSweepStatus
	if err := f.env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	want := workflows.LeadSweepStatus{Done: true, Missed: 3, Signalled: 3}
	if st != want {
		t.Errorf("sweep = %+v; want %+v", st, want)
	}
	f.env.AssertExpectations(t)
	if len(toShard0.Sites) != 2 || toShard0.Sites[0].SiteID != sites[0] || toShard0.Sites[1].SiteID != sites[1] {
		t.Errorf("shard 0 was asked for %+v; want the first two sites in one signal", toShard0.Sites)
	}
}

// syncLeads runs one SyncLeads of site to the end under key, as a lead
// sync (or a shard, by its key) would.
func (f *fixture) syncLeads(t *testing.T, site, key string) {
	t.Helper()
	env := f.suite.NewTestActivityEnvironment()
	env.RegisterActivity(f.acts)
	if _, err := env.ExecuteActivity(f.acts.SyncLeads, activities.SyncLeadsInput{SiteID: site, Limit: workflows.DefaultPageLimit, SyncKey: key}); err != nil {
		t.Fatal(err)
	}
}
