package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/examples"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

// The saturation of BenchmarkEmbedOffUnderSaturation: the API key served
// at a fixed rate, onboardings with large FAQ sets and lead syncs catching
// up on a backlog, all started at once.
const (
	satRate        = 20 // requests per second the simulator serves the key
	satBurst       = 5
	satOnboardings = 20 // SITEOPS_BENCH_SAT_ONBOARDINGS
	satFAQs        = 80 // FAQs per onboarding
	satLeadSites   = 8
	satLeads       = 1_000 // per lead site, read 50 a page
	satPageLimit   = 50
	satIncidents   = 5               // `siteops embed off` runs per measured run
	satFirstAfter  = 8 * time.Second // from the start of the bulk work to the first incident
	satEvery       = 8 * time.Second // between two incidents
)

// satShard is the lead event shard that syncs the lead sites with
// SITEOPS_BENCH_SAT_SHARDS=1.
var satShard = workflows.LeadEventsKind.ID("0")

// BenchmarkEmbedOffUnderSaturation runs on-call's `siteops embed off` as a
// whole process (the built binary, timed from exec to exit, which is once
// the service acknowledged the PATCH) while bulk work saturates the
// Agent-Site API: a simulator that serves the key at 20 requests per
// second (burst 5) and answers the rest 429 with Retry-After, 20
// onboardings of 80 FAQs each and 8 lead syncs catching up on 1,000 leads
// each (pages of 50), against the worker as `siteops worker` runs it. Each
// iteration makes two runs of the same bulk work: one with five incidents
// (one every 8 s, from 8 s after the bulk work began) and one without. It
// reports the incidents' slowest and median time (goal: the slowest within
// 1.5 s), the 429s the incidents' PATCHes got (goal: none), the bulk
// calls the service accepted per second over the incidents' window in each
// run and their ratio (goal: within 10 %), and the time until all the bulk
// work was done in each run. With SITEOPS_BENCH_SAT_SHARDS=1 the leads are
// read by one lead event shard (SITEOPS_LEAD_SHARDS) instead of a lead
// sync per site. Use -benchtime 1x.
func BenchmarkEmbedOffUnderSaturation(b *testing.B) {
	scenario(b)
	bin, err := siteopstest.Build(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	onboardings := benchSize(b, "SITEOPS_BENCH_SAT_ONBOARDINGS", satOnboardings)
	shards := os.Getenv("SITEOPS_BENCH_SAT_SHARDS") == "1"
	for range b.N {
		with := saturationRun(b, bin, onboardings, satIncidents, shards)
		without := saturationRun(b, bin, onboardings, 0, shards)
		b.ReportMetric(ms(slices.Max(with.incidents)), "embed-off-max-ms")
		b.ReportMetric(ms(p50(with.incidents)), "embed-off-p50-ms")
		b.ReportMetric(float64(with.patch429), "incident-429s")
		b.ReportMetric(with.bulkRate, "bulk/s-with")
		b.ReportMetric(without.bulkRate, "bulk/s-without")
		b.ReportMetric(with.bulkRate/without.bulkRate, "bulk-ratio")
		b.ReportMetric(with.done.Seconds(), "s-bulk-with")
		b.ReportMetric(without.done.Seconds(), "s-bulk-without")
		b.ReportMetric(float64(with.throttled), "429s-with")
		b.ReportMetric(float64(without.throttled), "429s-without")
		b.Logf("embed off under saturation: %v", with.incidents)
	}
}

type saturation struct {
	incidents []time.Duration
	patch429  int
	// bulkRate is the bulk calls (FAQs, knowledge, lead pages) the
	// service accepted per second from satFirstAfter to the last
	// incident's end (the same span of the run without incidents).
	bulkRate  float64
	done      time.Duration // until every onboarding ended and every sync caught up
	throttled int           // 429s of the run
}

func saturationRun(b *testing.B, bin string, onboardings, incidents int, shards bool) saturation {
	b.Helper()
	const apiKey = "svc_live_bench"
	run := time.Now().UnixNano()
	queue := fmt.Sprintf("bench-saturation-%d", run)
	e := testenv.New(b, testenv.Options{Address: temporalAddress, TaskQueue: queue, APIKey: apiKey, Sim: simulator.Config{
		TimeScale: 100, KnowledgeDelay: time.Hour, Seed: 7,
	}})
	defer e.Close()
	ctx := b.Context()

	// The sites and leads exist before the clock starts, unthrottled.
	setup, err := agentsite.NewClient(e.SimURL, apiKey)
	if err != nil {
		b.Fatal(err)
	}
	newSite := func(slug string) string {
		cs, err := setup.CreateSite(ctx, "setup-"+slug, agentsite.NewSite{Title: slug, Slug: slug, Type: "business", Template: "minimal"})
		if err != nil {
			b.Fatal(err)
		}
		return cs.Site.ID
	}
	var incidentSites, leadSites []string
	for i := range max(incidents, 1) {
		incidentSites = append(incidentSites, newSite(fmt.Sprintf("incident-%d", i)))
	}
	for i := range satLeadSites {
		id := newSite(fmt.Sprintf("leads-%d", i))
		if _, err := e.Sim.CreateLeads(id, satLeads); err != nil {
			b.Fatal(err)
		}
		leadSites = append(leadSites, id)
	}
	var onboardingPlans []starter.Prepared
	spec, err := starter.LoadSpecFS(examples.FS, "bayside-dental.json")
	if err != nil {
		b.Fatal(err)
	}
	for i := range onboardings {
		sp := spec
		sp.Site.Slug = fmt.Sprintf("sat-%d-%02d", run, i)
		sp.WaitForKnowledge = false
		sp.Knowledge = nil
		sp.FAQs = nil
		for j := range satFAQs {
			sp.FAQs = append(sp.FAQs, agentsite.FAQ{Question: fmt.Sprintf("Question %d of %d?", j, i), Answer: "An answer long enough to be one.", Approved: true})
		}
		p, problems := starter.Prepare(sp)
		if len(problems) > 0 {
			b.Fatal(problems)
		}
		onboardingPlans = append(onboardingPlans, p)
	}
	if err := e.Sim.SetFaults(simulator.Faults{RateLimitRPS: satRate, RateLimitBurst: satBurst}); err != nil {
		b.Fatal(err)
	}
	e.StartWorker(b, testenv.WorkerOptions{})
	before := e.Sim.RequestStats()

	// The bulk work, all at once.
	start := time.Now()
	var wg sync.WaitGroup
	for _, p := range onboardingPlans {
		wg.Go(func() {
			o, err := e.Starter.Onboard(ctx, p)
			if err != nil {
				b.Error(err)
				return
			}
			var res workflows.OnboardingResult
			if err := e.Starter.Wait(ctx, o.Run, &res); err != nil || res.Status != "published" {
				b.Errorf("%s did not publish (status %q): %v", o.WorkflowID, res.Status, err)
			}
		})
	}
	if shards {
		// With lead event shards: one shard asked to sync every lead
		// site, as the relay's signal would (its own page size, up to 10
		// pages a site per sync, 8 sites at once).
		var sig workflows.SiteLeadsSignal
		for _, site := range leadSites {
			sig.Sites = append(sig.Sites, workflows.SiteEvents{SiteID: site})
		}
		if _, err := e.Client.SignalWithStartWorkflow(ctx, satShard, workflows.SignalSiteLeads, sig,
			e.Starter.StartOptions(workflows.LeadEventsKind, satShard), workflows.LeadEventsWorkflowName, workflows.LeadEventsInput{Shard: "0"}); err != nil {
			b.Fatal(err)
		}
	}
	for _, site := range leadSites {
		id := workflows.LeadSyncID(site)
		if !shards {
			if _, err := e.Client.ExecuteWorkflow(ctx, e.Starter.StartOptions(workflows.LeadSyncKind, id), workflows.LeadSyncWorkflowName,
				workflows.LeadSyncInput{SiteID: site, PageLimit: satPageLimit}); err != nil {
				b.Fatal(err)
			}
		}
		wg.Go(func() {
			siteopstest.EventuallyNil(b, 15*time.Minute, "the leads of "+site+" caught up", func() error {
				p, err := e.Starter.LeadProgress(ctx, site)
				if err != nil || !p.CaughtUp || p.Leads != satLeads {
					return fmt.Errorf("progress %+v: %w", p, err)
				}
				return nil
			})
		})
	}

	// The incidents, on-call's command as a whole process.
	var out saturation
	env := append(os.Environ(), "TEMPORAL_ADDRESS="+temporalAddress, "TEMPORAL_NAMESPACE="+e.Namespace,
		"SITEOPS_TASK_QUEUE="+queue, "SITEOPS_OPERATOR=bench")
	window := satFirstAfter + time.Duration(max(incidents, satIncidents)-1)*satEvery + 2*time.Second
	for i := range incidents {
		time.Sleep(time.Until(start.Add(satFirstAfter + time.Duration(i)*satEvery)))
		cmd := exec.CommandContext(ctx, bin, "embed", "off", "--site", incidentSites[i], "--reason", "bench: found on an unknown site")
		cmd.Env = env
		var text strings.Builder
		cmd.Stdout, cmd.Stderr = &text, &text
		t0 := time.Now()
		err := cmd.Run()
		took := time.Since(t0)
		if err != nil || !strings.Contains(text.String(), "is off") {
			b.Fatalf("siteops embed off --site %s: %v\n%s", incidentSites[i], err, text.String())
		}
		out.incidents = append(out.incidents, took)
		b.Logf("embed off %d took %s: %s", i, took.Round(time.Millisecond), incidentBreakdown(b, e, incidentSites[i], t0))
	}
	time.Sleep(time.Until(start.Add(window)))
	bulk := 0
	for _, r := range e.Sim.Requests() {
		if r.At.Before(start.Add(satFirstAfter)) || r.At.After(start.Add(window)) || r.Status/100 != 2 {
			continue
		}
		if r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/leads") ||
			r.Method == http.MethodPost && (strings.HasSuffix(r.Path, "/faqs") || strings.HasSuffix(r.Path, "/knowledge")) {
			bulk++
		}
	}
	out.bulkRate = float64(bulk) / (window - satFirstAfter).Seconds()
	for _, r := range e.Sim.Requests() {
		for _, site := range incidentSites[:incidents] {
			if r.Method == http.MethodPatch && r.Path == "/api/v1/sites/"+site+"/agent" && r.Status == http.StatusTooManyRequests {
				out.patch429++
			}
		}
	}
	wg.Wait()
	out.done = time.Since(start)
	out.throttled = e.Sim.RequestStats().ByStatus[http.StatusTooManyRequests] - before.ByStatus[http.StatusTooManyRequests]
	// The runs end with the bulk work: nothing of this run is left in
	// the dev server's task queues for the next.
	for _, site := range leadSites {
		_ = e.Client.TerminateWorkflow(context.WithoutCancel(ctx), workflows.LeadSyncID(site), "", "benchmark over")
	}
	if shards {
		_ = e.Client.TerminateWorkflow(context.WithoutCancel(ctx), satShard, "", "benchmark over")
	}
	for _, site := range incidentSites[:incidents] {
		_ = e.Client.TerminateWorkflow(context.WithoutCancel(ctx), workflows.EmbedIncidentID(site), "", "benchmark over")
	}
	return out
}

// incidentBreakdown says where an incident's time went, from the command's
// start t0: until Temporal started the run, until a worker took its first
// workflow task, until the simulator answered the PATCH (the limiter's
// wait and the call), with the answers the PATCH got.
func incidentBreakdown(b *testing.B, e *testenv.Env, site string, t0 time.Time) string {
	b.Helper()
	var started, taken time.Time
	it := e.Client.GetWorkflowHistory(b.Context(), workflows.EmbedIncidentID(site), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			started = ev.GetEventTime().AsTime()
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			if taken.IsZero() {
				taken = ev.GetEventTime().AsTime()
			}
		}
	}
	var answers []string
	for _, r := range e.Sim.Requests() {
		if r.Method == http.MethodPatch && r.Path == "/api/v1/sites/"+site+"/agent" {
			answers = append(answers, fmt.Sprintf("%d at +%s", r.Status, r.At.Sub(t0).Round(time.Millisecond)))
		}
	}
	return fmt.Sprintf("started +%s, first workflow task +%s, PATCH %v", started.Sub(t0).Round(time.Millisecond), taken.Sub(t0).Round(time.Millisecond), answers)
}
