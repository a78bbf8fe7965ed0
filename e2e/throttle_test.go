package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// TestLeadSyncSurvivesThrottling syncs leads from an API that answers 30 %
// and then 50 % of requests 429 with Retry-After: 1, through the worker's
// real client with its shared limiter. Every attempt makes progress, so
// the sync never fails, and the store ends equal to the source. make soak
// runs the 10,000 leads in pages of 200 (the most the API serves);
// make test 2,000, in pages of 200 at 30 % and of 50 at 50 %: 40 pages, so
// that one activity run fails more attempts than the 20 an activity run
// was once allowed (checked in its history), which the bug this guards
// against needs.
func TestLeadSyncSurvivesThrottling(t *testing.T) {
	t.Parallel() // it mostly waits (main_test.go)
	leads := size(10_000, 2_000)
	for _, rate := range []float64{0.3, 0.5} {
		t.Run(fmt.Sprintf("%.0f%% 429", rate*100), func(t *testing.T) {
			e := newEnv(t, store.SQLite, simulator.Config{Seed: 7})
			e.startWorker(t)
			site := e.site(t, "throttled")
			if _, err := e.Sim.CreateLeads(site, leads); err != nil {
				t.Fatal(err)
			}
			if err := e.Sim.SetFaults(simulator.Faults{RateLimitRate: rate, RetryAfter: simulator.Duration(time.Second)}); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			manyAttempts := rate == 0.5 && leads < 10_000
			if manyAttempts {
				// Started here with smaller pages; FollowLeadSync joins it.
				if _, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.LeadSyncID(site), TaskQueue: taskQueue},
					workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: site, PageLimit: 50}); err != nil {
					t.Fatal(err)
				}
			}
			// FollowLeadSync ends at once, with the cause, if the sync fails.
			p, err := e.Starter.FollowLeadSync(ctx, site, false, 200*time.Millisecond, nil)
			if err != nil {
				t.Fatalf("the throttled sync: %v (progress %+v)", err, p)
			}
			st := e.Sim.RequestStats()
			t.Logf("%d leads with %.0f%% 429 in %s: %d requests, %d answered 429", leads, rate*100, time.Since(start).Round(time.Millisecond), st.Requests, st.ByStatus[429])
			if st.ByStatus[429] == 0 {
				t.Errorf("no request was answered 429; the fault did not bite")
			}
			if p.Leads != leads {
				t.Errorf("progress says %d leads stored, want %d", p.Leads, leads)
			}
			assertStoreEqualsSim(t, e, site)
			attempts := maxActivityAttempt(t, e, workflows.LeadSyncID(site))
			t.Logf("the most attempts one activity took: %d", attempts)
			if manyAttempts && attempts <= 20 {
				t.Errorf("no activity needed more than 20 attempts (the most was %d): the test no longer shows that an activity run may fail more often than the old budget", attempts)
			}
			_ = e.Client.CancelWorkflow(t.Context(), workflows.LeadSyncID(site), "")
		})
	}
}

// maxActivityAttempt reads the latest run of a workflow and returns the
// highest attempt number any of its activities started with (a retried
// activity's history keeps only its last attempt's start).
func maxActivityAttempt(t *testing.T, e *env, workflowID string) int {
	t.Helper()
	most := 0
	it := e.Client.GetWorkflowHistory(t.Context(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			most = max(most, int(a.GetAttempt()))
		}
	}
	return most
}
