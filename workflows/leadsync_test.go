package workflows_test

import (
	"context"
	"errors"
	"github.com/siteops/siteops/simulator"
	"go.temporal.io/sdk/temporal"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/workflows"
)

func (f *fixture) siteWithLeads(t *testing.T, n int) string {
	t.Helper()
	cs, err := f.api.CreateSite(t.Context(), "setup-site", agentsite.NewSite{Title: "Acme", Slug: "acme", Type: "business", Template: "minimal"})
	if err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		if _, err := f.sim.CreateLeads(cs.Site.ID, n); err != nil {
			t.Fatal(err)
		}
	}
	return cs.Site.ID
}

func (f *fixture) progress(t *testing.T) workflows.LeadSyncProgress {
	t.Helper()
	v, err := f.env.QueryWorkflow(workflows.QueryProgress)
	if err != nil {
		t.Fatal(err)
	}
	var p workflows.LeadSyncProgress
	if err := v.Get(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLeadSyncCatchesUpAndFollowsEvents(t *testing.T) {
	f := newFixture(t)
	site := f.siteWithLeads(t, 450)
	var afterFirst, afterEvent workflows.LeadSyncProgress
	f.env.RegisterDelayedCallback(func() {
		afterFirst = f.progress(t)
		if _, err := f.sim.CreateLeads(site, 10); err != nil {
			t.Error(err)
		}
		f.env.SignalWorkflow(workflows.SignalLeadCreated, workflows.LeadCreatedSignal{EventID: "evt_a", LeadID: "lead_451"})
	}, time.Second)
	f.env.RegisterDelayedCallback(func() {
		// Duplicated and late deliveries of an event already handled.
		f.env.SignalWorkflow(workflows.SignalLeadCreated, workflows.LeadCreatedSignal{EventID: "evt_a"})
		f.env.SignalWorkflow(workflows.SignalLeadCreated, workflows.LeadCreatedSignal{EventID: "evt_a"})
	}, 2*time.Second)
	f.env.RegisterDelayedCallback(func() {
		afterEvent = f.progress(t)
		f.env.CancelWorkflow()
	}, time.Minute)
	f.env.ExecuteWorkflow(workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: site, PollInterval: workflows.Duration(time.Hour)})

	if !f.env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not end")
	}
	if afterFirst.Leads != 450 || afterFirst.Pages != 3 || !afterFirst.CaughtUp || afterFirst.Syncs != 1 {
		t.Errorf("after the first sync: %+v", afterFirst)
	}
	// The second sync re-reads the last partial page (50 leads) and the
	// 10 new ones: 510 records read, 460 distinct leads stored; one
	// distinct event, delivered three times.
	if afterEvent.Syncs != 2 || afterEvent.Events != 1 || afterEvent.DuplicateEvents != 2 || !afterEvent.CaughtUp ||
		afterEvent.Leads != 460 || afterEvent.LeadsRead != 510 {
		t.Errorf("after the event: %+v", afterEvent)
	}
	if n, _ := f.store.CountLeads(t.Context(), site); n != 460 {
		t.Errorf("store holds %d leads, want 460", n)
	}
	// Three list calls for the first sync, one for the second (50 + 10 leads).
	if n := len(f.requests("GET", "/leads")); n != 4 {
		t.Errorf("%d list requests, want 4", n)
	}
}

func TestLeadSyncPollsWithoutEvents(t *testing.T) {
	f := newFixture(t)
	site := f.siteWithLeads(t, 5)
	f.env.RegisterDelayedCallback(func() {
		if _, err := f.sim.CreateLeads(site, 5); err != nil {
			t.Error(err)
		}
	}, time.Minute)
	f.env.RegisterDelayedCallback(func() { f.env.CancelWorkflow() }, 12*time.Minute)
	f.env.ExecuteWorkflow(workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: site, PollInterval: workflows.Duration(5 * time.Minute)})
	if n, _ := f.store.CountLeads(t.Context(), site); n != 10 {
		t.Errorf("store holds %d leads after polling, want 10", n)
	}
	if n := len(f.requests("GET", "/leads")); n != 3 {
		t.Errorf("%d list requests in 12 minutes at a 5 minute interval, want 3", n)
	}
}

func TestLeadSyncContinuesAsNewCarryingState(t *testing.T) {
	f := newFixture(t)
	site := f.siteWithLeads(t, 30)
	f.env.RegisterDelayedCallback(func() {
		f.env.SignalWorkflow(workflows.SignalLeadCreated, workflows.LeadCreatedSignal{EventID: "evt_1"})
	}, time.Second)
	f.env.ExecuteWorkflow(workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{
		SiteID: site, PageLimit: 10, PagesPerRun: 2, SyncsPerRun: 3, PollInterval: workflows.Duration(time.Hour),
	})
	var can *workflow.ContinueAsNewError
	if err := f.env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("error = %v, want continue-as-new", err)
	}
	var next workflows.LeadSyncInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	// Syncs: pages 1-2 (budget), page 3 (caught up), then the event's re-read of page 3.
	if next.SiteID != site || next.Progress.Syncs != 3 || next.Progress.Leads != 30 || next.Progress.LeadsRead != 40 || next.Progress.Runs != 1 || next.Resume == nil || next.Resume.SiteID() != site {
		t.Errorf("carried input = %+v (progress %+v)", next, next.Progress)
	}
	if len(next.RecentEvents) != 1 || next.RecentEvents[0] != "evt_1" || next.PageLimit != 10 {
		t.Errorf("carried events %v, page limit %d", next.RecentEvents, next.PageLimit)
	}
	if n, _ := f.store.CountLeads(t.Context(), site); n != 30 {
		t.Errorf("store holds %d leads, want 30", n)
	}
}

func TestLeadSyncFullRescan(t *testing.T) {
	f := newFixture(t)
	site := f.siteWithLeads(t, 25)
	f.env.RegisterDelayedCallback(func() {
		f.env.SignalWorkflow(workflows.SignalSync, workflows.SyncRequest{Full: true})
	}, time.Second)
	var p workflows.LeadSyncProgress
	f.env.RegisterDelayedCallback(func() { p = f.progress(t); f.env.CancelWorkflow() }, time.Minute)
	f.env.ExecuteWorkflow(workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: site, PageLimit: 10, PollInterval: workflows.Duration(time.Hour)})
	// 3 pages, then a full re-scan of 3 pages: 50 records read, 25 leads.
	if p.Syncs != 2 || p.Pages != 6 || p.LeadsRead != 50 || p.Leads != 25 {
		t.Errorf("progress = %+v", p)
	}
	if n, _ := f.store.CountLeads(t.Context(), site); n != 25 {
		t.Errorf("store holds %d leads, want 25 (no duplicates)", n)
	}
}

func TestLeadSyncOfAnUnknownSiteFails(t *testing.T) {
	f := newFixture(t)
	f.env.ExecuteWorkflow(workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: "site_404"})
	err := f.env.GetWorkflowError()
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("error = %v, want the 404", err)
	}
	if n := len(f.requests("GET", "/leads")); n != 1 {
		t.Errorf("%d list requests, want 1 (a 404 is not retried)", n)
	}
}

// flakyStore fails the n-th page upsert once.
type flakyStore struct {
	activities.Store
	mu     sync.Mutex
	calls  int
	failOn int
}

func (f *flakyStore) UpsertLeads(ctx context.Context, siteID string, leads []agentsite.Lead) (int, error) {
	f.mu.Lock()
	f.calls++
	fail := f.calls == f.failOn
	f.mu.Unlock()
	if fail {
		return 0, errors.New("database is locked")
	}
	return f.Store.UpsertLeads(ctx, siteID, leads)
}

func TestLeadSyncResumesFromTheHeartbeat(t *testing.T) {
	f := newFixture(t)
	site := f.siteWithLeads(t, 1000)
	f.acts.Store = &flakyStore{Store: f.store, failOn: 4}
	var p workflows.LeadSyncProgress
	f.env.RegisterDelayedCallback(func() { p = f.progress(t); f.env.CancelWorkflow() }, time.Minute)
	f.env.ExecuteWorkflow(workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: site, PageLimit: 100, PollInterval: workflows.Duration(time.Hour)})
	// Ten pages; the fourth page's write failed once, and the retried
	// attempt resumed after page three: eleven reads, not fourteen.
	if n := len(f.requests("GET", "/leads")); n != 11 {
		t.Errorf("%d list requests, want 11", n)
	}
	if n, _ := f.store.CountLeads(t.Context(), site); n != 1000 {
		t.Errorf("store holds %d leads, want 1000", n)
	}
	if p.Leads != 1000 || p.Pages != 10 || !p.CaughtUp {
		t.Errorf("progress = %+v", p)
	}
}

// TestLeadSyncCountsBatchedEventsOnce sends the relay's batched signals,
// overlapping and repeated: each distinct event counts once.
func TestLeadSyncCountsBatchedEventsOnce(t *testing.T) {
	f := newFixture(t)
	site := f.siteWithLeads(t, 5)
	var p workflows.LeadSyncProgress
	f.env.RegisterDelayedCallback(func() {
		f.env.SignalWorkflow(workflows.SignalLeadsCreated, workflows.LeadsCreatedSignal{EventIDs: []string{"evt_1", "evt_2", "evt_3"}})
		f.env.SignalWorkflow(workflows.SignalLeadsCreated, workflows.LeadsCreatedSignal{EventIDs: []string{"evt_3", "evt_4"}})
		f.env.SignalWorkflow(workflows.SignalLeadCreated, workflows.LeadCreatedSignal{EventID: "evt_4"})
	}, time.Second)
	f.env.RegisterDelayedCallback(func() { p = f.progress(t); f.env.CancelWorkflow() }, time.Minute)
	f.env.ExecuteWorkflow(workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: site, PollInterval: workflows.Duration(time.Hour)})
	if p.Events != 4 || p.DuplicateEvents != 2 || p.Syncs < 2 || p.Leads != 5 {
		t.Errorf("progress = %+v; want 4 distinct events and 2 repeats", p)
	}
}

// TestLeadSyncContinuesAsNewWhileWaiting fills the history while the sync
// waits: it continues as new at MaxHistoryEvents without waiting for a
// sync or the poll timer.
func TestLeadSyncContinuesAsNewWhileWaiting(t *testing.T) {
	f := newFixture(t)
	site := f.siteWithLeads(t, 5)
	f.env.RegisterDelayedCallback(func() {
		f.env.SetCurrentHistoryLength(workflows.MaxHistoryEvents + 1)
		f.env.SignalWorkflow(workflows.SignalSync, workflows.SyncRequest{})
	}, time.Second)
	f.env.ExecuteWorkflow(workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: site, PollInterval: workflows.Duration(time.Hour)})
	var can *workflow.ContinueAsNewError
	if err := f.env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("error = %v, want continue-as-new", err)
	}
	var next workflows.LeadSyncInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.Progress.Syncs != 1 || next.Progress.Leads != 5 {
		t.Errorf("carried progress = %+v", next.Progress)
	}
	// The wake-up is not lost: the next run syncs first.
	if n := len(f.requests("GET", "/leads")); n != 1 {
		t.Errorf("%d list requests, want 1 (the sync request is left to the next run)", n)
	}
}

// TestLeadSyncFailsAfterTheStallTimeout throttles every request: with no
// page stored for the stall timeout, the sync fails and says why.
func TestLeadSyncFailsAfterTheStallTimeout(t *testing.T) {
	f := newFixture(t)
	site := f.siteWithLeads(t, 10)
	if err := f.sim.SetFaults(simulator.Faults{RateLimitRate: 1, RetryAfter: simulator.Duration(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// Activities read the time from their own clock: each reading moves it
	// on by ten minutes, as the retries do.
	var mu sync.Mutex
	clock := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	f.acts.Now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(10 * time.Minute)
		return clock
	}
	f.env.ExecuteWorkflow(workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: site, StallTimeout: workflows.Duration(time.Hour)})
	err := f.env.GetWorkflowError()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != activities.ErrTypeStalled || !strings.Contains(app.Message(), "429") || !strings.Contains(app.Message(), "stall timeout is 1h0m0s") {
		t.Fatalf("error = %v; want LeadSyncStalled naming the last error", err)
	}
	// The clock reads twice per attempt (its start, then the failure):
	// the hour is up within a few attempts, well inside the test
	// environment's cap of ten.
	if n := len(f.requests("GET", "/leads")); n < 2 || n > 6 {
		t.Errorf("%d attempts before giving up; want a few", n)
	}
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
