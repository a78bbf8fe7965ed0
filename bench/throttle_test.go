package bench

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/examples"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/wiring"
	"github.com/siteops/siteops/workflows"
)

// BenchmarkThrottledAPI runs 20 onboardings and a 10,000-lead sync at once
// against a simulator that serves the API key at a fixed 20 requests per
// second (burst 5) and answers the rest 429 with Retry-After, with the
// client as it was (each activity retries on its own after the Retry-After
// it got) and with the shared adaptive limiter (a Retry-After pauses every
// caller of the key; the rate backs off and recovers). It reports the 429s
// received, the onboardings that failed instead of publishing, and the time
// until every onboarding had ended and the sync had stored every lead.
func BenchmarkThrottledAPI(b *testing.B) {
	for _, v := range []struct {
		name    string
		limiter bool
	}{{"per-activity-retries", false}, {"shared-limiter", true}} {
		b.Run(v.name, func(b *testing.B) {
			scenario(b)
			for range b.N {
				throttled, failed, took := throttledRun(b, v.limiter)
				b.ReportMetric(float64(throttled), "429s")
				b.ReportMetric(float64(failed), "failed-onboardings")
				b.ReportMetric(took.Seconds(), "s-to-complete")
			}
		})
	}
}

// throttledRun returns the 429s received, the onboardings that did not
// publish, and the time until every workflow had ended or caught up.
func throttledRun(b *testing.B, limiter bool) (throttled, failed int, took time.Duration) {
	b.Helper()
	const onboardings, leads = 20, 10_000
	queue := fmt.Sprintf("bench-throttle-%d", time.Now().UnixNano())
	e := testenv.New(b, testenv.Options{Address: temporalAddress, TaskQueue: queue, APIKey: "svc_live_bench", Sim: simulator.Config{
		TimeScale: 100, KnowledgeDelay: time.Hour, Seed: 3,
		Faults: simulator.Faults{RateLimitRPS: 20, RateLimitBurst: 5},
	}})
	defer e.Close()
	sim, st, c, s := e.Sim, e.Store, e.Client, e.Starter
	// An SDK worker on the client under test: the production one with its
	// adaptive limiter, or a plain one without.
	var api *agentsite.Client
	var err error
	if limiter {
		api, err = wiring.APIClient(config.AgentSite{BaseURL: e.SimURL, APIKey: "svc_live_bench"}, nil)
	} else {
		api, err = agentsite.NewClient(e.SimURL, "svc_live_bench", agentsite.WithTimeout(wiring.APITimeout))
	}
	if err != nil {
		b.Fatal(err)
	}
	siteopsWorker(b, c, queue, api, st, nil)

	// The lead collection exists before the clock starts.
	setup, _ := agentsite.NewClient(e.SimURL, "svc_live_bench")
	if err := sim.SetFaults(simulator.Faults{}); err != nil {
		b.Fatal(err)
	}
	site, err := setup.CreateSite(b.Context(), "bench-setup", agentsite.NewSite{Title: "Leads", Slug: "leads-" + queue, Type: "business", Template: "minimal"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := sim.CreateLeads(site.Site.ID, leads); err != nil {
		b.Fatal(err)
	}
	if err := sim.SetFaults(simulator.Faults{RateLimitRPS: 20, RateLimitBurst: 5}); err != nil {
		b.Fatal(err)
	}
	spec, err := starter.LoadSpecFS(examples.FS, "bayside-dental.json")
	if err != nil {
		b.Fatal(err)
	}
	before := sim.RequestStats().ByStatus[429]
	var unpublished atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for i := range onboardings {
		sp := spec
		sp.Site.Slug = fmt.Sprintf("%s-%02d", queue, i)
		sp.WaitForKnowledge = false
		p, problems := starter.Prepare(sp)
		if len(problems) > 0 {
			b.Fatal(problems)
		}
		wg.Go(func() {
			o, err := s.Onboard(b.Context(), p)
			if err != nil {
				b.Error(err)
				return
			}
			// An onboarding that fails (its activities out of attempts
			// under the throttle) is an outcome to count, not an error
			// of the benchmark.
			var res workflows.OnboardingResult
			if err := s.Wait(b.Context(), o.Run, &res); err != nil || res.Status != "published" {
				unpublished.Add(1)
				b.Logf("%s did not publish (status %q): %v", o.WorkflowID, res.Status, err)
			}
		})
	}
	wg.Go(func() {
		id := workflows.LeadSyncID(site.Site.ID)
		if _, err := c.SignalWithStartWorkflow(b.Context(), id, workflows.SignalSync, workflows.SyncRequest{}, client.StartWorkflowOptions{ID: id, TaskQueue: queue},
			workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: site.Site.ID}); err != nil {
			b.Error(err)
			return
		}
		deadline := time.Now().Add(15 * time.Minute)
		for {
			p, err := s.LeadProgress(b.Context(), site.Site.ID)
			if err == nil && p.CaughtUp && !p.Syncing && p.Leads == leads {
				break
			}
			if time.Now().After(deadline) {
				b.Errorf("the lead sync had not caught up with %d leads after 15 minutes (last progress %+v, %v)", leads, p, err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Terminated, not cancelled: every run's simulator numbers its
		// lead site site_1, so the next run signals the same workflow id,
		// and a cancellation this run's worker stops before handling
		// would leave it running on a task queue nobody polls any more.
		if err := c.TerminateWorkflow(b.Context(), id, "", "benchmark done"); err != nil {
			b.Error(err)
		}
	})
	wg.Wait()
	took = time.Since(start)
	if n, _ := st.CountLeads(b.Context(), site.Site.ID); n != leads {
		b.Fatalf("%d leads stored, want %d", n, leads)
	}
	return sim.RequestStats().ByStatus[429] - before, int(unpublished.Load()), took
}
