package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

func (f *fixture) siteWithLeads(t *testing.T, n int) string {
	t.Helper()
	return f.siteNamed(t, "acme", n)
}

// siteNamed creates a site with the slug and n leads.
func (f *fixture) siteNamed(t *testing.T, slug string, n int) string {
	t.Helper()
	setup := "setup-" + slug
	if slug == "acme" {
		setup = "setup-site" // the key the tests before siteNamed used
	}
	cs, err := f.api.CreateSite(t.Context(), setup, agentsite.NewSite{Title: "Acme", Slug: slug, Type: "business", Template: "minimal"})
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

// queried answers the query name of the workflow under test.
func queried[T any](t *testing.T, f *fixture, name string) T {
	t.Helper()
	var out T
	v, err := f.env.QueryWorkflow(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (f *fixture) progress(t *testing.T) workflows.LeadSyncProgress {
	t.Helper()
	return queried[workflows.LeadSyncProgress](t, f, workflows.QueryProgress)
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
	}, 10*time.Minute) // in test time, which runs at the wall clock's pace while an activity does: far past the first sync even on a loaded machine
	f.env.RegisterDelayedCallback(func() {
		// Duplicated and late deliveries of an event already handled.
		f.env.SignalWorkflow(workflows.SignalLeadCreated, workflows.LeadCreatedSignal{EventID: "evt_a"})
		f.env.SignalWorkflow(workflows.SignalLeadCreated, workflows.LeadCreatedSignal{EventID: "evt_a"})
	}, 10*time.Minute+time.Second)
	f.env.RegisterDelayedCallback(func() {
		afterEvent = f.progress(t)
		f.env.CancelWorkflow()
	}, 20*time.Minute)
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
	if f.fail() {
		return 0, errors.New("database is locked")
	}
	return f.Store.UpsertLeads(ctx, siteID, leads)
}

func (f *flakyStore) UpsertLeadsAt(ctx context.Context, siteID, syncKey string, leads []agentsite.Lead, pos store.LeadSyncPosition) (int, error) {
	if f.fail() {
		return 0, errors.New("database is locked")
	}
	return f.Store.UpsertLeadsAt(ctx, siteID, syncKey, leads, pos)
}

func (f *flakyStore) fail() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.calls == f.failOn
}

func TestLeadSyncResumesFromTheHeartbeat(t *testing.T) {
	f := newFixtureWith(t, func(st *store.Store, o *activities.Options) { o.Store = &flakyStore{Store: st, failOn: 4} })
	site := f.siteWithLeads(t, 1000)
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
	// Activities read the time from their own clock: each reading moves it
	// on by ten minutes, as the retries do.
	var mu sync.Mutex
	clock := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	f := newFixtureWith(t, func(_ *store.Store, o *activities.Options) {
		o.Now = func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			clock = clock.Add(10 * time.Minute)
			return clock
		}
	})
	site := f.siteWithLeads(t, 10)
	if err := f.sim.SetFaults(simulator.Faults{RateLimitRate: 1, RetryAfter: simulator.Duration(time.Minute)}); err != nil {
		t.Fatal(err)
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

// TestLeadSyncFailsAtOnceOnABrokenContract answers the lead list with pages
// that break the contract: the sync fails on the first attempt, as a
// ContractViolation that says what the API did wrong, instead of retrying
// (a stuck cursor stores a page on every attempt, so the stall timeout
// would never end it).
func TestLeadSyncFailsAtOnceOnABrokenContract(t *testing.T) {
	tests := []struct {
		name     string
		page     func(cursor string) string
		requests int
		says     string
	}{
		{"stuck cursor", func(string) string { return `{"data":[{"id":"lead_1"}],"next_cursor":"same"}` }, 2, "next_cursor repeats a cursor"},
		{"cursor cycle", func(c string) string {
			next := map[string]string{"": "a", "a": "b", "b": "a"}[c]
			return `{"data":[{"id":"lead_` + c + `"}],"next_cursor":"` + next + `"}`
		}, 3, "next_cursor repeats a cursor"},
		{"lead without id", func(string) string { return `{"data":[{"id":"lead_1"},{"name":"x"}],"next_cursor":null}` }, 1, "lead 1 of the page has no id"},
		{"not JSON", func(string) string { return `<html>maintenance</html>` }, 1, "not valid JSON"},
		{"data not an array", func(string) string { return `{"data":{"id":"lead_1"},"next_cursor":null}` }, 1, "data is a JSON object where an array belongs"},
		{"lead id a number", func(string) string { return `{"data":[{"id":7}],"next_cursor":null}` }, 1, "data.id is a JSON number where a string belongs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			requests := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				requests++
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, tc.page(r.URL.Query().Get("cursor")))
			}))
			t.Cleanup(srv.Close)
			api, err := agentsite.NewClient(srv.URL, apiKey, agentsite.WithTimeout(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			f := newFixtureWith(t, func(_ *store.Store, o *activities.Options) { o.API = api })
			f.env.ExecuteWorkflow(workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: "site_1", PollInterval: workflows.Duration(time.Hour)})
			err = f.env.GetWorkflowError()
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != activities.ErrTypeContract || !app.NonRetryable() || !strings.Contains(app.Message(), tc.says) {
				t.Fatalf("error = %v; want a non-retryable %s saying %q", err, activities.ErrTypeContract, tc.says)
			}
			mu.Lock()
			defer mu.Unlock()
			if requests != tc.requests {
				t.Errorf("%d requests, want %d: one attempt, no retry", requests, tc.requests)
			}
		})
	}
}

// TestLeadSyncCutsItsSyncShortWhenTheHistoryFills fills the history while
// the sync activity runs (it would take ten minutes): the run cancels it
// and continues as new at once, counting the signal that arrived and
// resuming where the sync began, since the test environment's cancel
// carries no progress (the way the server answers for an activity waiting
// to be retried).
func TestLeadSyncCutsItsSyncShortWhenTheHistoryFills(t *testing.T) {
	f := newFixture(t)
	var from, elsewhere agentsite.Cursor
	if err := json.Unmarshal([]byte(`{"site_id":"site_1","token":"page_7"}`), &from); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(`{"site_id":"site_1","token":"page_57"}`), &elsewhere); err != nil {
		t.Fatal(err)
	}
	stored := 10_000
	f.env.OnActivity("SyncLeads", mock.Anything, mock.Anything).After(10*time.Minute).
		Return(activities.SyncLeadsResult{Pages: 50, Leads: 10_000, New: 10_000, Stored: &stored, Resume: &elsewhere}, nil)
	start := f.env.Now()
	f.env.RegisterDelayedCallback(func() {
		f.env.SetCurrentHistoryLength(workflows.MaxHistoryEvents + 1)
		f.env.SignalWorkflow(workflows.SignalLeadsCreated, workflows.LeadsCreatedSignal{EventIDs: []string{"evt_1"}})
	}, time.Second)
	f.env.ExecuteWorkflow(workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{
		SiteID: "site_1", Resume: &from, PollInterval: workflows.Duration(time.Hour),
		Progress: workflows.LeadSyncProgress{Leads: 1400, Pages: 7, Syncs: 3},
	})
	var can *workflow.ContinueAsNewError
	if err := f.env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("error = %v, want continue-as-new", err)
	}
	if took := f.env.Now().Sub(start); took >= 10*time.Minute {
		t.Errorf("continued as new after %s, when the activity ended; want as soon as the history filled", took)
	}
	var next workflows.LeadSyncInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.Resume == nil || *next.Resume != from {
		t.Errorf("the next run resumes at %v, want where the cut sync began", next.Resume)
	}
	if p := next.Progress; p.Syncs != 3 || p.Pages != 7 || p.Leads != 1400 || p.Events != 1 || p.Syncing {
		t.Errorf("carried progress = %+v; want the counts from before the cut sync and the signal's event", p)
	}
	if !next.StallSince.Equal(start) {
		t.Errorf("carried stall clock = %s, want %s (the cut sync's start): a sync cut again and again must still stall out", next.StallSince, start)
	}
	if !slices.Equal(next.RecentEvents, []string{"evt_1"}) {
		t.Errorf("carried events %v, want evt_1", next.RecentEvents)
	}
	// The next run goes on under the cut sync's key, from the position the
	// store holds for it, having counted nothing of it yet.
	if c := next.Cut; c == nil || !strings.HasPrefix(c.Key, "default-test-workflow-id/default-test-run-id/sync/") || c.Pages != 0 || c.LeadsRead != 0 {
		t.Errorf("carried cut = %+v; want the sync's key and nothing counted", c)
	}
}

// storeThenFail stores the n-th page and then fails, as a worker that dies
// after the page's transaction commits and before it heartbeats.
type storeThenFail struct {
	activities.Store
	mu     sync.Mutex
	calls  int
	failOn int
}

func (s *storeThenFail) UpsertLeads(ctx context.Context, siteID string, leads []agentsite.Lead) (int, error) {
	n, err := s.Store.UpsertLeads(ctx, siteID, leads)
	if err == nil && s.fail() {
		return 0, errors.New("connection reset after commit")
	}
	return n, err
}

func (s *storeThenFail) UpsertLeadsAt(ctx context.Context, siteID, syncKey string, leads []agentsite.Lead, pos store.LeadSyncPosition) (int, error) {
	n, err := s.Store.UpsertLeadsAt(ctx, siteID, syncKey, leads, pos)
	if err == nil && s.fail() {
		return 0, errors.New("connection reset after commit")
	}
	return n, err
}

func (s *storeThenFail) fail() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return s.calls == s.failOn
}

// TestLeadSyncCountsLeadsStoredNotLeadsNew fails the attempt right after
// the fourth page's transaction commits, before it heartbeats: the retry
// goes on from the position stored with that page, reads no page twice,
// and progress says 1,000 leads (the store's count).
func TestLeadSyncCountsLeadsStoredNotLeadsNew(t *testing.T) {
	f := newFixtureWith(t, func(st *store.Store, o *activities.Options) { o.Store = &storeThenFail{Store: st, failOn: 4} })
	site := f.siteWithLeads(t, 1000)
	var p workflows.LeadSyncProgress
	f.env.RegisterDelayedCallback(func() { p = f.progress(t); f.env.CancelWorkflow() }, time.Minute)
	f.env.ExecuteWorkflow(workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: site, PageLimit: 100, PollInterval: workflows.Duration(time.Hour)})
	n, err := f.store.CountLeads(t.Context(), site)
	if err != nil || n != 1000 {
		t.Fatalf("store holds %d leads (%v), want 1000", n, err)
	}
	// The retry went on from the position stored with the fourth page,
	// not from the heartbeat after page three: no page read twice.
	if p.Leads != 1000 || p.Pages != 10 || p.LeadsRead != 1000 || !p.CaughtUp {
		t.Errorf("progress = %+v; want 1000 leads stored, 10 pages and 1000 records read", p)
	}
	if n := len(f.requests("GET", "/leads")); n != 10 {
		t.Errorf("%d list requests; want 10, each page once", n)
	}
}

// TestLeadSyncGoesOnWithASyncCutShort runs the next run of a sync cut
// short as the worst case hands it on: a cancel that reached the activity
// between attempts, so the cut run knew nothing of the two pages the sync
// had stored and resumes where the sync began. The store's position, kept
// with those pages under the sync's key, wins: the run reads the eight
// pages left, none twice, and the progress counts each page once.
func TestLeadSyncGoesOnWithASyncCutShort(t *testing.T) {
	f := newFixture(t)
	site := f.siteWithLeads(t, 1000)
	const key = "lead-sync/site_1/run-before/sync/0"
	pos := store.LeadSyncPosition{LastPageAt: f.env.Now()}
	for page, err := range f.api.LeadPages(t.Context(), site, agentsite.ListLeadsOptions{Limit: 100}) {
		if err != nil {
			t.Fatal(err)
		}
		pos.Pages++
		pos.Leads += len(page.Leads)
		pos.Resume, pos.Next = pos.Next, page.Next
		if _, err := f.store.UpsertLeadsAt(t.Context(), site, key, page.Leads, pos); err != nil {
			t.Fatal(err)
		}
		if pos.Pages == 2 {
			break
		}
	}
	before := len(f.requests("GET", "/leads"))
	var p workflows.LeadSyncProgress
	f.env.RegisterDelayedCallback(func() { p = f.progress(t); f.env.CancelWorkflow() }, time.Minute)
	f.env.ExecuteWorkflow(workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{
		SiteID: site, PageLimit: 100, PollInterval: workflows.Duration(time.Hour),
		Cut:      &workflows.SyncCut{Key: key}, // nothing of it counted
		Progress: workflows.LeadSyncProgress{Runs: 1},
	})
	if n := len(f.requests("GET", "/leads")) - before; n != 8 {
		t.Errorf("%d list requests; want 8, the pages the sync had not stored", n)
	}
	// The activity counts the sync since it began: all ten pages, added
	// once, since the cut run had added none.
	if p.Leads != 1000 || p.Pages != 10 || p.LeadsRead != 1000 || !p.CaughtUp || p.Syncs != 1 {
		t.Errorf("progress = %+v; want the sync's 10 pages and 1,000 leads, counted once", p)
	}

	// Had the cut run counted the two pages (the cancel's answer), the
	// next run adds only the rest.
	g := newFixture(t)
	site = g.siteWithLeads(t, 1000)
	pos = store.LeadSyncPosition{LastPageAt: g.env.Now()}
	for page, err := range g.api.LeadPages(t.Context(), site, agentsite.ListLeadsOptions{Limit: 100}) {
		if err != nil {
			t.Fatal(err)
		}
		pos.Pages++
		pos.Leads += len(page.Leads)
		pos.Resume, pos.Next = pos.Next, page.Next
		if _, err := g.store.UpsertLeadsAt(t.Context(), site, key, page.Leads, pos); err != nil {
			t.Fatal(err)
		}
		if pos.Pages == 2 {
			break
		}
	}
	g.env.RegisterDelayedCallback(func() { p = g.progress(t); g.env.CancelWorkflow() }, time.Minute)
	g.env.ExecuteWorkflow(workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{
		SiteID: site, PageLimit: 100, PollInterval: workflows.Duration(time.Hour), Resume: pos.Next,
		Cut:      &workflows.SyncCut{Key: key, Pages: 2, LeadsRead: 200, New: 200},
		Progress: workflows.LeadSyncProgress{Runs: 1, Pages: 2, LeadsRead: 200, Leads: 200},
	})
	if p.Leads != 1000 || p.Pages != 10 || p.LeadsRead != 1000 || !p.CaughtUp {
		t.Errorf("progress = %+v; want 10 pages and 1,000 leads read, each page once", p)
	}
}

// A lead sync started with settings past their bounds fails at once with a
// PolicyViolation naming each bound, and reads nothing: whoever starts it
// cannot turn it into a loop against the API.
func TestLeadSyncRefusesSettingsPastTheirBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   workflows.LeadSyncInput
		want []string
	}{
		{"a negative poll interval", workflows.LeadSyncInput{PollInterval: workflows.Duration(-time.Second)}, []string{"poll_interval is -1s", "1m0s"}},
		{"a millisecond's poll interval", workflows.LeadSyncInput{PollInterval: workflows.Duration(time.Millisecond)}, []string{"poll_interval is 1ms"}},
		{"a stall timeout of a year", workflows.LeadSyncInput{StallTimeout: workflows.Duration(365 * 24 * time.Hour)}, []string{"stall_timeout is 8760h0m0s", "168h0m0s"}},
		{"a page of a million", workflows.LeadSyncInput{PageLimit: 1_000_000, PagesPerRun: -1}, []string{"page_limit is 1000000", "from 1 to 200", "pages_per_run is -1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			site := f.siteWithLeads(t, 5)
			tc.in.SiteID = site
			f.env.ExecuteWorkflow(workflows.LeadSyncWorkflowName, tc.in)
			err := f.env.GetWorkflowError()
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != activities.ErrTypePolicy || !app.NonRetryable() {
				t.Fatalf("workflow error = %v, want a non-retryable %s", err, activities.ErrTypePolicy)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if n, err := f.store.CountLeads(t.Context(), site); err != nil || n != 0 {
				t.Errorf("the refused sync stored %d leads (%v)", n, err)
			}
		})
	}
	if err := workflows.CheckLeadSyncLimits(workflows.LeadSyncInput{SiteID: "s", PollInterval: workflows.Duration(time.Hour), PageLimit: 200, StallTimeout: workflows.Duration(7 * 24 * time.Hour)}); err != nil {
		t.Errorf("settings at their bounds refused: %v", err)
	}
}
