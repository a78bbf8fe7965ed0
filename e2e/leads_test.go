package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

func TestTenThousandLeadSync(t *testing.T) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			e := newEnv(t, d, simulator.Config{})
			e.startWorker(t)
			api, _ := agentsite.NewClient(e.SimURL, apiKey)
			cs, err := api.CreateSite(t.Context(), "leads-site", agentsite.NewSite{Title: "Leads", Slug: "leads", Type: "business", Template: "minimal"})
			if err != nil {
				t.Fatal(err)
			}
			site := cs.Site.ID
			if _, err := e.Sim.CreateLeads(site, 10_000); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if _, err := e.Starter.SyncLeads(t.Context(), site, false); err != nil {
				t.Fatal(err)
			}
			var p workflows.LeadSyncProgress
			siteopstest.Eventually(t, 2*time.Minute, "the sync to catch up", func() bool {
				p, err = e.Starter.LeadProgress(t.Context(), site)
				return err == nil && p.CaughtUp && !p.Syncing && p.Leads >= 10_000
			})
			t.Logf("%s: 10,000 leads in %d pages synced in %s", d, p.Pages, time.Since(start).Round(time.Millisecond))
			assertStoreEqualsSim(t, e, site)

			// A lead.created trigger (as the relay sends) picks up new leads.
			if _, err := e.Sim.CreateLeads(site, 300); err != nil {
				t.Fatal(err)
			}
			if err := e.Client.SignalWorkflow(t.Context(), workflows.LeadSyncID(site), "", workflows.SignalLeadCreated, workflows.LeadCreatedSignal{EventID: "evt_e2e_1"}); err != nil {
				t.Fatal(err)
			}
			siteopstest.Eventually(t, time.Minute, "the second sync", func() bool {
				n, _ := e.Store.CountLeads(t.Context(), site)
				return n == 10_300
			})
			assertStoreEqualsSim(t, e, site)
			if err := e.Client.CancelWorkflow(t.Context(), workflows.LeadSyncID(site), ""); err != nil {
				t.Fatal(err)
			}
			if d == store.SQLite {
				_ = e.Client.GetWorkflow(t.Context(), workflows.LeadSyncID(site), "").Get(t.Context(), nil)
				recordHistory(t, e, workflows.LeadSyncID(site), "lead_sync")
			}
		})
	}
}

func assertStoreEqualsSim(t *testing.T, e *env, site string) {
	t.Helper()
	want := e.Sim.LeadIDs(site)
	got, err := e.Store.LeadIDs(t.Context(), site)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("store holds %d leads, simulator %d (first difference at %d)", len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
