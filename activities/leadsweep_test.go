package activities

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// sweepFixture is a simulator over HTTP with sites whose leads are all
// synced into a SQLite store, behind a front that answers every read of
// one site's leads with failing's status while it is not 0.
type sweepFixture struct {
	sites   []string
	store   *store.Store
	acts    *Activities
	failing atomic.Int32 // the status every read of sites[1]'s leads gets
	allFail atomic.Int32 // the status every read of any site's leads gets
}

func newSweepFixture(t *testing.T, n int) *sweepFixture {
	t.Helper()
	sim, err := simulator.New(simulator.Config{Keys: map[string][]string{testAPIKey: {simulator.ScopeAll}}, TimeScale: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	f := &sweepFixture{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := int(f.allFail.Load())
		if len(f.sites) > 1 && strings.HasPrefix(r.URL.Path, "/api/v1/sites/"+f.sites[1]+"/leads") && status == 0 {
			status = int(f.failing.Load())
		}
		if status != 0 && strings.Contains(r.URL.Path, "/leads") {
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"error":{"code":"internal","message":"the site's leads cannot be read"}}`, status)
			return
		}
		sim.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.Close(); sim.Close() })
	api, err := agentsite.NewClient(srv.URL, testAPIKey, agentsite.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	f.store = storetest.Open(t, store.SQLite)
	f.acts = New(Options{API: api, Store: f.store})
	for i := range n {
		cs, err := api.CreateSite(t.Context(), fmt.Sprint("setup-site-", i), agentsite.NewSite{Title: "Acme", Slug: fmt.Sprint("acme-", i), Type: "business", Template: "minimal"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sim.CreateLeads(cs.Site.ID, 3); err != nil {
			t.Fatal(err)
		}
		f.sites = append(f.sites, cs.Site.ID)
		var s testsuite.WorkflowTestSuite
		env := s.NewTestActivityEnvironment()
		env.RegisterActivity(f.acts)
		if _, err := env.ExecuteActivity(f.acts.SyncLeads, SyncLeadsInput{SiteID: cs.Site.ID, SyncKey: "lead-sync/" + cs.Site.ID}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// sweep runs one SweepLeads as a worker would.
func (f *sweepFixture) sweep(t *testing.T) (SweepLeadsResult, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(f.acts)
	v, err := env.ExecuteActivity(f.acts.SweepLeads, SweepLeadsInput{})
	var res SweepLeadsResult
	if err == nil {
		err = v.Get(&res)
	}
	return res, err
}

// failures reads the store's record of the sites the sweep could not read.
func (f *sweepFixture) failures(t *testing.T) []store.LeadSweepFailure {
	t.Helper()
	got, _, err := f.store.LeadSweepFailures(t.Context(), time.Now().Add(-time.Hour), 100)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestSweepGoesOnPastASiteWhoseReadsFail: the second of three sites
// answers every read of its leads with a 500. Each sweep checks the other
// two, records the failing one in the store (its reason, not its error's
// text) and ends; once its reads succeed again, a sweep checks it and the
// record of its failure is gone.
func TestSweepGoesOnPastASiteWhoseReadsFail(t *testing.T) {
	f := newSweepFixture(t, 3)
	bad := f.sites[1]
	f.failing.Store(http.StatusInternalServerError)
	for round := 1; round <= 2; round++ {
		res, err := f.sweep(t)
		if err != nil {
			t.Fatalf("sweep %d stopped: %v; want it to go on past %s", round, err, bad)
		}
		if !res.Done || res.Checked != 2 || res.Failed != 1 || len(res.Missed) != 0 || res.Next != f.sites[2] {
			t.Fatalf("sweep %d = %+v; want the two other sites checked, %s failed, done after %s", round, res, bad, f.sites[2])
		}
		got := f.failures(t)
		if len(got) != 1 || got[0].SiteID != bad || got[0].Reason != "http_500" || got[0].Failures != int64(round) {
			t.Errorf("after sweep %d the store records %+v; want %s failing with http_500, %d time(s)", round, got, bad, round)
		}
	}
	f.failing.Store(0)
	res, err := f.sweep(t)
	if err != nil || res.Checked != 3 || res.Failed != 0 {
		t.Fatalf("the sweep once %s reads again = %+v, %v; want all three checked", bad, res, err)
	}
	if got := f.failures(t); len(got) != 0 {
		t.Errorf("after %s was read again the store still records %+v", bad, got)
	}
}

// TestSweepWaitsOutTheAPIAsAWhole: when every read is answered 503 with
// Retry-After (the service, not a site), the attempt fails for Temporal to
// retry after the delay, and no site is recorded as failing.
func TestSweepWaitsOutTheAPIAsAWhole(t *testing.T) {
	f := newSweepFixture(t, 2)
	f.allFail.Store(http.StatusServiceUnavailable)
	_, err := f.sweep(t)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrTypeRetryable || app.NonRetryable() {
		t.Fatalf("the sweep against a 503 = %v; want a retryable %s failure", err, ErrTypeRetryable)
	}
	if got := f.failures(t); len(got) != 0 {
		t.Errorf("the store records %+v; want no site failing for the service's 503", got)
	}
}
