package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// TestLeadSyncSurvivesThrottling syncs leads from an API that answers 30 %
// and then 50 % of requests 429 with Retry-After: 1, through the worker's
// real client with its shared limiter. Every attempt makes progress, so
// the sync never fails, and the store ends equal to the source. make soak
// runs the 10,000 leads; make test 2,000 (pages of 200 either way,
// the most the API serves).
func TestLeadSyncSurvivesThrottling(t *testing.T) {
	leads := size(10_000, 2_000)
	for _, rate := range []float64{0.3, 0.5} {
		t.Run(fmt.Sprintf("%.0f%% 429", rate*100), func(t *testing.T) {
			e := newEnv(t, store.SQLite, simulator.Config{Seed: 7})
			e.startWorker(t)
			site := e.site(t, "throttled")
			if _, err := e.sim.CreateLeads(site, leads); err != nil {
				t.Fatal(err)
			}
			if err := e.sim.SetFaults(simulator.Faults{RateLimitRate: rate, RetryAfter: simulator.Duration(time.Second)}); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			// FollowLeadSync ends at once, with the cause, if the sync fails.
			p, err := e.starter.FollowLeadSync(ctx, site, false, 200*time.Millisecond, nil)
			if err != nil {
				t.Fatalf("the throttled sync: %v (progress %+v)", err, p)
			}
			st := e.sim.RequestStats()
			t.Logf("%d leads with %.0f%% 429 in %s: %d requests, %d answered 429", leads, rate*100, time.Since(start).Round(time.Millisecond), st.Requests, st.ByStatus[429])
			if st.ByStatus[429] == 0 {
				t.Errorf("no request was answered 429; the fault did not bite")
			}
			if p.Leads != leads {
				t.Errorf("progress says %d leads stored, want %d", p.Leads, leads)
			}
			assertStoreEqualsSim(t, e, site)
			_ = e.client.CancelWorkflow(t.Context(), workflows.LeadSyncID(site), "")
		})
	}
}
