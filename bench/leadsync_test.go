package bench

import (
	"context"
	"fmt"
	"iter"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/wiring"
	"github.com/siteops/siteops/workflows"
)

// leadSyncLeads is the size of the lead collection BenchmarkLeadSync syncs
// (issue 13, item 3). SITEOPS_BENCH_LEADS overrides it for a quick check.
const leadSyncLeads = 100_000

// BenchmarkLeadSync syncs sites of 100,000 leads from the simulator into
// PostgreSQL in the same run: with a plain, non-durable loop over the
// agentsite client's LeadPages and the store's UpsertLeads, and with the
// LeadSync workflow on an in-process worker using the same client and
// store (started with starter.SyncLeads, followed in its history until its
// SyncLeads activity returns caught up). Each sync has a site of its own,
// so every one inserts every lead; each variant runs twice, in the order
// loop, workflow, workflow, loop. It reports both rates and their ratio
// (goal: ≥ 0.9), the workflow's rate inside its activities, and, per sync
// of each variant, the seconds spent fetching pages, upserting them, in
// the workflow's activities besides (activity-rest-s: heartbeats, the
// activity's plumbing) and outside its activities (workflow and activity
// tasks). Use -benchtime 1x.
func BenchmarkLeadSync(b *testing.B) {
	scenario(b)
	n := benchSize(b, "SITEOPS_BENCH_LEADS", leadSyncLeads)
	for range b.N {
		t := leadSyncRun(b, n)
		b.ReportMetric(float64(2*n)/t.loop.Seconds(), "loop-leads/s")
		b.ReportMetric(float64(2*n)/t.flow.Seconds(), "workflow-leads/s")
		b.ReportMetric(t.loop.Seconds()/t.flow.Seconds(), "ratio")
		b.ReportMetric(float64(2*n)/t.inActivities.Seconds(), "in-activity-leads/s")
		b.ReportMetric((t.flow-t.inActivities).Seconds()/2, "outside-activities-s")
		b.ReportMetric(t.loopFetch.Seconds()/2, "loop-fetch-s")
		b.ReportMetric(t.flowFetch.Seconds()/2, "workflow-fetch-s")
		b.ReportMetric(t.loopUpsert.Seconds()/2, "loop-upsert-s")
		b.ReportMetric(t.flowUpsert.Seconds()/2, "workflow-upsert-s")
		b.ReportMetric((t.inActivities-t.flowFetch-t.flowUpsert).Seconds()/2, "activity-rest-s")
	}
}

// leadSyncTimes are the total times of the rounds of each variant, the
// parts of them spent fetching pages and upserting them, and of the
// workflow's, the time its activities ran.
type leadSyncTimes struct {
	loop, loopFetch, loopUpsert time.Duration
	flow, flowFetch, flowUpsert time.Duration
	inActivities                time.Duration
}

// leadSyncRun syncs n leads twice with each variant.
func leadSyncRun(b *testing.B, n int) (res leadSyncTimes) {
	b.Helper()
	const apiKey = "svc_live_bench"
	run := time.Now().UnixNano()
	e := testenv.New(b, testenv.Options{Address: temporalAddress, TaskQueue: fmt.Sprintf("bench-leadsync-%d", run), APIKey: apiKey,
		Dialect: store.Postgres, Sim: simulator.Config{Seed: 7}})
	defer e.Close()
	sim, pg, c, s := e.Sim, e.Store, e.Client, e.Starter
	// The production client (with its shared limiter, idle here), one for
	// both variants.
	api, err := wiring.APIClient(config.AgentSite{BaseURL: e.SimURL, APIKey: apiKey}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var fetching, upserting atomic.Int64
	st := timedStore{Store: pg, spent: &upserting}
	timed := timedAPI{API: api, spent: &fetching}
	site := func(name string, leads int) string {
		s, err := api.CreateSite(b.Context(), fmt.Sprintf("bench-%s-%d", name, run), agentsite.NewSite{
			Title: "Leads", Slug: fmt.Sprintf("leads-%s-%d", name, run), Type: "business", Template: "minimal",
		})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sim.CreateLeads(s.Site.ID, leads); err != nil {
			b.Fatal(err)
		}
		return s.Site.ID
	}
	// Two rounds, loop then workflow and workflow then loop, each on a
	// site of its own: a load that drifts during the run, and the table
	// that grows, weigh on both alike.
	sites := [2][2]string{{site("loop-0", n), site("workflow-0", n)}, {site("workflow-1", n), site("loop-1", n)}}
	warmLoop, warmFlow := site("warm-loop", min(n, 1000)), site("warm-workflow", min(n, 1000))

	// An SDK worker with the timed client and store: the time the
	// workflow's activities spend fetching and upserting is measured.
	siteopsWorker(b, c, e.TaskQueue, timed, st, nil)

	// parts adds the time spent fetching and upserting during f to
	// fetch and upsert.
	parts := func(fetch, upsert *time.Duration, f func()) {
		f0, u0 := fetching.Load(), upserting.Load()
		f()
		*fetch += time.Duration(fetching.Load() - f0)
		*upsert += time.Duration(upserting.Load() - u0)
	}
	viaLoop := func(siteID string) {
		start := time.Now()
		var stored int
		parts(&res.loopFetch, &res.loopUpsert, func() { stored = plainLeadLoop(b.Context(), b, timed, st, siteID) })
		if siteID == warmLoop {
			res.loopFetch, res.loopUpsert = 0, 0
			return
		}
		if stored != n {
			b.Fatalf("plain loop stored %d new leads, want %d", stored, n)
		}
		res.loop += time.Since(start)
	}
	viaWorkflow := func(siteID string) {
		start := time.Now()
		var ran time.Duration
		var fresh int
		parts(&res.flowFetch, &res.flowUpsert, func() {
			if _, err := s.SyncLeads(b.Context(), siteID, false); err != nil {
				b.Fatal(err)
			}
			ran, fresh = followSyncHistory(b, c, workflows.LeadSyncID(siteID))
		})
		took := time.Since(start)
		_ = c.CancelWorkflow(context.Background(), workflows.LeadSyncID(siteID), "")
		if siteID == warmFlow {
			res.flowFetch, res.flowUpsert = 0, 0
			return
		}
		if fresh != n {
			b.Fatalf("lead sync stored %d new leads, want %d", fresh, n)
		}
		res.flow += took
		res.inActivities += ran
	}

	// Both paths run once before the clock starts (connections, the
	// worker's pollers, PostgreSQL's caches), so that neither pays for
	// warming up what the other then uses.
	viaLoop(warmLoop)
	viaWorkflow(warmFlow)

	b.ResetTimer()
	for round, pair := range sites {
		for i, id := range pair {
			if (round == 0) == (i == 0) {
				viaLoop(id)
			} else {
				viaWorkflow(id)
			}
		}
	}
	b.StopTimer()
	for _, pair := range sites {
		for _, id := range pair {
			if got, err := pg.CountLeads(context.Background(), id); err != nil || got != n {
				b.Fatalf("site %s: %d leads in the store (%v), want %d", id, got, err, n)
			}
		}
	}
	return res
}

// plainLeadLoop is the baseline: what the SyncLeads activity does, without
// Temporal — read every page, upsert it, read the next. It returns how many
// leads were new.
func plainLeadLoop(ctx context.Context, b *testing.B, api activities.API, st activities.Store, siteID string) int {
	b.Helper()
	fresh := 0
	for page, err := range api.LeadPages(ctx, siteID, agentsite.ListLeadsOptions{Limit: workflows.DefaultPageLimit}) {
		if err != nil {
			b.Fatal(err)
		}
		k, err := st.UpsertLeads(ctx, siteID, page.Leads)
		if err != nil {
			b.Fatal(err)
		}
		fresh += k
	}
	return fresh
}

// benchSize is def, or the count in the environment variable env (at most
// def) for a quick check.
func benchSize(b *testing.B, env string, def int) int {
	b.Helper()
	v := os.Getenv(env)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > def {
		b.Fatalf("%s=%q: want a count from 1 to %d", env, v, def)
	}
	return n
}

// followSyncHistory follows a lead sync's history (a long poll: no query
// tasks competing with the sync it times) until an attempt of SyncLeads
// returns caught up. It returns the time the activities ran and the new
// leads they stored.
func followSyncHistory(b *testing.B, c client.Client, id string) (ran time.Duration, fresh int) {
	b.Helper()
	it := c.GetWorkflowHistory(b.Context(), id, "", true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	at := map[int64]time.Time{}
	dc := converter.GetDefaultDataConverter()
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		at[ev.GetEventId()] = ev.GetEventTime().AsTime()
		a := ev.GetActivityTaskCompletedEventAttributes()
		if a == nil {
			continue
		}
		ran += ev.GetEventTime().AsTime().Sub(at[a.GetStartedEventId()])
		var res activities.SyncLeadsResult
		if err := dc.FromPayloads(a.GetResult(), &res); err != nil {
			b.Fatal(err)
		}
		fresh += res.New
		if res.CaughtUp {
			return ran, fresh
		}
	}
	b.Fatalf("%s ended before it caught up", id)
	return ran, fresh
}

// timedAPI adds up the time spent fetching pages of leads.
type timedAPI struct {
	activities.API
	spent *atomic.Int64
}

func (t timedAPI) LeadPages(ctx context.Context, siteID string, opts agentsite.ListLeadsOptions) iter.Seq2[*agentsite.LeadPage, error] {
	return func(yield func(*agentsite.LeadPage, error) bool) {
		asked := time.Now()
		for p, err := range t.API.LeadPages(ctx, siteID, opts) {
			t.spent.Add(int64(time.Since(asked)))
			if !yield(p, err) {
				return
			}
			asked = time.Now()
		}
	}
}

// timedStore adds up the time spent upserting leads.
type timedStore struct {
	activities.Store
	spent *atomic.Int64
}

func (t timedStore) UpsertLeads(ctx context.Context, siteID string, leads []agentsite.Lead) (int, error) {
	start := time.Now()
	defer func() { t.spent.Add(int64(time.Since(start))) }()
	return t.Store.UpsertLeads(ctx, siteID, leads)
}

// UpsertLeadsAt is how the workflow's syncs store a page, with their
// position in the same transaction.
func (t timedStore) UpsertLeadsAt(ctx context.Context, siteID, syncKey string, leads []agentsite.Lead, pos store.LeadSyncPosition) (int, error) {
	start := time.Now()
	defer func() { t.spent.Add(int64(time.Since(start))) }()
	return t.Store.UpsertLeadsAt(ctx, siteID, syncKey, leads, pos)
}
