package activities

import (
	"context"
	"errors"
	"iter"
	"net/http/httptest"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

const testAPIKey = "svc_live_activities_tests"

// leadsFixture is a simulator with one site of n leads, a SQLite store, and
// Activities over them whose metrics a manual reader collects.
type leadsFixture struct {
	site   string
	api    *agentsite.Client
	store  *store.Store
	acts   *Activities
	reader *sdkmetric.ManualReader
	// background, when set, is the worker's context of the activities
	// run: cancelling it cancels them.
	background context.Context
}

// simSite is a simulator over HTTP holding one site with n leads (none
// for 0), an API client of it, and the site's id.
func simSite(tb testing.TB, n int) (*simulator.Simulator, *agentsite.Client, string) {
	tb.Helper()
	sim, err := simulator.New(simulator.Config{Keys: map[string][]string{testAPIKey: {simulator.ScopeAll}}, TimeScale: 1, Seed: 1})
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	tb.Cleanup(func() { srv.Close(); sim.Close() })
	api, err := agentsite.NewClient(srv.URL, testAPIKey, agentsite.WithTimeout(5*time.Second))
	if err != nil {
		tb.Fatal(err)
	}
	cs, err := api.CreateSite(tb.Context(), "setup-site", agentsite.NewSite{Title: "Acme", Slug: "acme", Type: "business", Template: "minimal"})
	if err != nil {
		tb.Fatal(err)
	}
	if n > 0 {
		if _, err := sim.CreateLeads(cs.Site.ID, n); err != nil {
			tb.Fatal(err)
		}
	}
	return sim, api, cs.Site.ID
}

func newLeadsFixture(t *testing.T, n int) *leadsFixture {
	t.Helper()
	_, api, site := simSite(t, n)
	reader := sdkmetric.NewManualReader()
	m := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
	stored, _ := m.Int64Counter("siteops.leads.stored")
	pages, _ := m.Int64Counter("siteops.lead.pages.read")
	st := storetest.Open(t, store.SQLite)
	acts := New(Options{API: api, Store: st})
	acts.leadsStored, acts.pagesRead = stored, pages
	return &leadsFixture{site: site, api: api, store: st, acts: acts, reader: reader}
}

// sum reads a counter's total.
func (f *leadsFixture) sum(t *testing.T, name string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := f.reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				var total int64
				for _, dp := range s.DataPoints {
					total += dp.Value
				}
				return total
			}
		}
	}
	return 0
}

func (f *leadsFixture) run(t *testing.T, in SyncLeadsInput) (SyncLeadsResult, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	if f.background != nil {
		env.SetWorkerOptions(worker.Options{BackgroundActivityContext: f.background})
	}
	env.RegisterActivity(f.acts)
	v, err := env.ExecuteActivity(f.acts.SyncLeads, in)
	var res SyncLeadsResult
	if err == nil {
		err = v.Get(&res)
	}
	return res, err
}

// TestSyncLeadsCountsLeadsStoredOnce syncs 25 leads, then again from the
// last page: the re-read page counts as a page read, not as leads stored,
// and Stored is the store's count both times.
func TestSyncLeadsCountsLeadsStoredOnce(t *testing.T) {
	f := newLeadsFixture(t, 25)
	first, err := f.run(t, SyncLeadsInput{SiteID: f.site, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	second, err := f.run(t, SyncLeadsInput{SiteID: f.site, Limit: 10, From: first.Resume})
	if err != nil {
		t.Fatal(err)
	}
	if first.Stored == nil || *first.Stored != 25 || second.Stored == nil || *second.Stored != 25 {
		t.Errorf("Stored = %v then %v, want 25 both times", first.Stored, second.Stored)
	}
	if second.Pages != 1 || second.Leads != 5 || second.New != 0 {
		t.Errorf("the second sync read %d pages, %d leads, %d new; want the last page again: 1, 5, 0", second.Pages, second.Leads, second.New)
	}
	if got := f.sum(t, "siteops.leads.stored"); got != 25 {
		t.Errorf("siteops.leads.stored = %d, want 25: a lead read again is not stored again", got)
	}
	if got := f.sum(t, "siteops.lead.pages.read"); got != 4 {
		t.Errorf("siteops.lead.pages.read = %d, want 4 (3 pages, then the last one again)", got)
	}
}

// cancelAfter cancels the activity's context after pages pages, as the
// worker does when the server says the workflow cancelled the activity.
type cancelAfter struct {
	API
	pages  int
	cancel func()
}

func (c cancelAfter) LeadPages(ctx context.Context, siteID string, opts agentsite.ListLeadsOptions) iter.Seq2[*agentsite.LeadPage, error] {
	return func(yield func(*agentsite.LeadPage, error) bool) {
		n := 0
		for page, err := range c.API.LeadPages(ctx, siteID, opts) {
			if !yield(page, err) || err != nil {
				return
			}
			if n++; n == c.pages {
				c.cancel()
			}
		}
	}
}

// TestSyncLeadsAnswersACancelWithItsProgress cancels a sync after two of
// five pages: a cancel from the server ends it with a CanceledError whose
// details are its progress, paused at the third page; a worker that shuts
// down fails the attempt as retryable instead, so that another worker goes
// on from the heartbeat.
func TestSyncLeadsAnswersACancelWithItsProgress(t *testing.T) {
	f := newLeadsFixture(t, 50)
	ctx, cancel := context.WithCancelCause(t.Context())
	f.background = ctx
	f.acts.api = cancelAfter{API: f.api, pages: 2, cancel: func() { cancel(temporal.NewCanceledError()) }}
	began := time.Now()
	_, err := f.run(t, SyncLeadsInput{SiteID: f.site, Limit: 10})
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) {
		t.Fatalf("error = %v, want a CanceledError", err)
	}
	var res SyncLeadsResult
	if err := canceled.Details(&res); err != nil {
		t.Fatalf("the CanceledError carries no progress: %v", err)
	}
	if res.Pages != 2 || res.Leads != 20 || res.CaughtUp || res.Resume == nil || res.Stored == nil || *res.Stored != 20 || res.LastPageAt.Before(began) {
		t.Fatalf("progress = %+v; want 2 pages, 20 leads stored, the third page next, the last page's time", res)
	}
	// The next sync starts at the third page: 30 leads more, none twice.
	f.acts.api, f.background = f.api, nil
	rest, err := f.run(t, SyncLeadsInput{SiteID: f.site, Limit: 10, From: res.Resume, StallSince: res.LastPageAt})
	if err != nil {
		t.Fatal(err)
	}
	if rest.Pages != 3 || rest.New != 30 || !rest.CaughtUp || *rest.Stored != 50 {
		t.Errorf("the rest = %+v; want 3 pages, 30 new, caught up, 50 stored", rest)
	}

	shutdown, stop := context.WithCancelCause(t.Context())
	f.background = shutdown
	f.acts.api = cancelAfter{API: f.api, pages: 1, cancel: func() { stop(errors.New("worker stopping")) }}
	_, err = f.run(t, SyncLeadsInput{SiteID: f.site, Limit: 10})
	var app *temporal.ApplicationError
	if errors.As(err, &canceled) || !errors.As(err, &app) || app.NonRetryable() {
		t.Errorf("on a worker shutdown: error = %v, want a retryable failure", err)
	}
}

// TestSyncLeadsGoesOnFromTheStoredPosition cuts a keyed sync after two of
// five pages, then runs it again as the worst case would: from where the
// sync began (a cancel that reached the activity between attempts carries
// no progress) and with a heartbeat that lags the store by a page. The
// store's position, written with each page, wins: the sync reads the
// three pages it had not stored, no page twice, and counts the sync's
// five pages since it began.
func TestSyncLeadsGoesOnFromTheStoredPosition(t *testing.T) {
	f := newLeadsFixture(t, 50)
	const key = "lead-sync/site_1/run-a/sync-1"
	ctx, cancel := context.WithCancelCause(t.Context())
	f.background = ctx
	f.acts.api = cancelAfter{API: f.api, pages: 2, cancel: func() { cancel(temporal.NewCanceledError()) }}
	_, err := f.run(t, SyncLeadsInput{SiteID: f.site, Limit: 10, SyncKey: key})
	var canceled *temporal.CanceledError
	var cut SyncLeadsResult
	if !errors.As(err, &canceled) || canceled.Details(&cut) != nil || cut.Pages != 2 {
		t.Fatalf("the cut sync: %v (progress %+v); want a CanceledError with 2 pages", err, cut)
	}
	pos, err := f.store.LeadSyncPosition(t.Context(), f.site, key)
	if err != nil || pos.Pages != 2 || pos.Next == nil || *pos.Next != *cut.Resume {
		t.Fatalf("stored position %+v, %v; want 2 pages and the cut's resume point next", pos, err)
	}

	f.acts.api, f.background = f.api, nil
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(f.acts)
	env.SetHeartbeatDetails(syncProgress{Pages: 1, Leads: 10, New: 10, Resume: nil, Next: pos.Resume, LastPageAt: time.Now()})
	v, err := env.ExecuteActivity(f.acts.SyncLeads, SyncLeadsInput{SiteID: f.site, Limit: 10, SyncKey: key})
	var res SyncLeadsResult
	if err == nil {
		err = v.Get(&res)
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Pages != 5 || res.Leads != 50 || res.New != 50 || !res.CaughtUp || res.Stored == nil || *res.Stored != 50 {
		t.Errorf("the sync went on to %+v; want the sync's 5 pages, 50 leads, 50 new, caught up", res)
	}
	if got := f.sum(t, "siteops.lead.pages.read"); got != 5 {
		t.Errorf("siteops.lead.pages.read = %d; want 5: no page read twice", got)
	}
	// A sync under another key starts where its input says.
	again, err := f.run(t, SyncLeadsInput{SiteID: f.site, Limit: 10, From: res.Resume, SyncKey: key + "-next"})
	if err != nil || again.Pages != 1 || again.New != 0 {
		t.Errorf("a new sync from the last page: %+v, %v; want that page read again, nothing new", again, err)
	}
}
