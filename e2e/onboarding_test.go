package e2e

import (
	"errors"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

func prepare(t *testing.T, path, slug string) starter.Prepared {
	t.Helper()
	spec, err := starter.LoadSpec(path)
	if err != nil {
		t.Fatal(err)
	}
	spec.Site.Slug = slug
	spec.WaitForKnowledge = false // knowledge.ready arrives through the relay, not yet here
	p, problems := starter.Prepare(spec)
	if len(problems) > 0 {
		t.Fatalf("spec problems: %v", problems)
	}
	return p
}

func TestOnboardingReachesPublished(t *testing.T) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			e := newEnv(t, d, simulator.Config{})
			e.startWorker(t)
			p := prepare(t, "../examples/acme-anvils.yaml", "acme-anvils")
			res := e.onboard(t, p, time.Minute)
			if res.Status != "published" || len(res.KnowledgeIDs) != 2 || len(res.FAQIDs) != 3 {
				t.Errorf("result = %+v", res)
			}
			sites := e.Sim.Sites()
			if len(sites) != 1 || sites[0].Status != "published" || sites[0].Knowledge != 2 || sites[0].FAQs != 3 ||
				!sites[0].EmbedEnabled || strings.Join(sites[0].AllowedOrigins, ",") != "https://acme-anvils.example,https://www.acme-anvils.example" {
				t.Errorf("simulator holds %+v", sites)
			}
			if wf, err := e.Store.SiteWorkflow(t.Context(), res.SiteID); err != nil || wf != "onboarding/acme-anvils" {
				t.Errorf("site → workflow = %q, %v", wf, err)
			}
			// Started directly: the onboarding class, and no fairness key
			// of its own, so that its parallel uploads are dispatched
			// together (direct starts take their turns as one caller).
			info, err := e.Client.DescribeWorkflow(t.Context(), "onboarding/acme-anvils", "")
			if err != nil {
				t.Fatal(err)
			}
			if pr := info.RawResponse.GetWorkflowExecutionInfo().GetPriority(); pr.GetPriorityKey() != int32(agentsite.ClassOnboarding) || pr.GetFairnessKey() != "" {
				t.Errorf("the onboarding's priority = %v; want priority key %d and no fairness key", pr, agentsite.ClassOnboarding)
			}
			if d == store.SQLite {
				recordHistory(t, e, "onboarding/acme-anvils", "onboarding")
			}
			// The same spec again reports the finished onboarding; a
			// different spec for the slug is refused, naming the field.
			again, err := e.Starter.Onboard(t.Context(), p)
			if err != nil || again.Started || again.Done == nil || again.Done.SiteID != res.SiteID {
				t.Errorf("second onboarding of the same spec: %+v, %v", again, err)
			}
			p.Input.Site.Title = "Acme Anvils & Sons"
			var conflict *starter.SpecConflictError
			if _, err := e.Starter.Onboard(t.Context(), p); !errors.As(err, &conflict) || !slices.Contains(conflict.Differences, "site.title") {
				t.Errorf("a different spec for the slug: %v", err)
			}
		})
	}
}

func TestOnboardingSurvivesFaults(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{Seed: 42, Faults: simulator.Faults{
		ErrorRate: 0.2, RateLimitRate: 0.1, RetryAfter: simulator.Duration(time.Second), DropRate: 0.25,
	}})
	e.startWorker(t)
	o, err := e.Starter.Onboard(t.Context(), prepare(t, "../examples/bayside-dental.json", "bayside"))
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.OnboardingResult
	if err := e.Starter.Wait(ctxWithin(t, 3*time.Minute), o.Run, &res); err != nil {
		t.Fatal(err)
	}
	sites := e.Sim.Sites()
	if len(sites) != 1 || sites[0].Status != "published" || sites[0].Knowledge != 2 || sites[0].FAQs != 2 {
		t.Fatalf("simulator holds %+v, want exactly one published site with 2 sources and 2 FAQs", sites)
	}
	faults := map[string]int{}
	replayed := 0
	for _, r := range e.Sim.Requests() {
		faults[r.Fault]++
		if r.Replayed {
			replayed++
		}
	}
	t.Logf("faults injected: %v; replayed answers: %d", faults, replayed)
	recordHistory(t, e, "onboarding/bayside", "onboarding_with_faults")
	if faults["error"]+faults["rate_limit"]+faults["drop_after_apply"] == 0 {
		t.Errorf("no fault was injected; the test proves nothing")
	}
}

// TestWorkerKilledMidOnboarding kills the siteops worker process while an
// activity is in flight and starts another: the onboarding still ends with
// exactly one site.
func TestWorkerKilledMidOnboarding(t *testing.T) {
	t.Parallel() // it mostly waits (main_test.go)
	e := newEnv(t, store.SQLite, simulator.Config{Faults: simulator.Faults{Latency: simulator.Duration(1500 * time.Millisecond)}})
	// No metrics endpoint: the default :9090 may be taken on the machine
	// running the tests, and the worker refuses a busy address.
	workerEnv := append(os.Environ(),
		"TEMPORAL_ADDRESS="+e.Address, "TEMPORAL_NAMESPACE="+e.Namespace, "SITEOPS_TASK_QUEUE="+taskQueue,
		"AGENTSITE_BASE_URL="+e.SimURL, "AGENTSITE_API_KEY="+apiKey, "SITEOPS_DATABASE_URL="+e.DBURL, "SITEOPS_METRICS_ADDR=")
	startWorker := func() *exec.Cmd {
		cmd := exec.Command(binary, "worker")
		cmd.Env = workerEnv
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	first := startWorker()
	t.Cleanup(func() { _ = first.Process.Kill(); _, _ = first.Process.Wait() })
	// The worker checks the API key (two reads) before it polls.
	siteopstest.Eventually(t, 30*time.Second, "the worker's start-up checks", func() bool { return len(e.Sim.Requests()) >= 2 })
	checks := len(e.Sim.Requests())

	// Start through the CLI, as other systems and on-call do.
	cli := exec.Command(binary, "onboard", "-f", "../examples/bayside-dental.json")
	cli.Env = workerEnv
	if out, err := cli.CombinedOutput(); err != nil || !strings.Contains(string(out), "started onboarding/bayside-dental") {
		t.Fatalf("siteops onboard: %v\n%s", err, out)
	}
	// Kill the worker while the create-site request is in flight: the
	// simulator applies it, the answer is lost with the process.
	siteopstest.Eventually(t, 30*time.Second, "the create-site request in flight", func() bool { return e.Sim.InFlight() > 0 })
	if rs := e.Sim.Requests(); len(rs) != checks {
		t.Fatalf("a request was already answered before the kill: %+v", rs[checks:])
	}
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = first.Process.Wait()

	second := startWorker()
	t.Cleanup(func() { _ = second.Process.Signal(syscall.SIGTERM); _, _ = second.Process.Wait() })
	run := e.Client.GetWorkflow(t.Context(), "onboarding/bayside-dental", "")
	var res workflows.OnboardingResult
	if err := run.Get(ctxWithin(t, 2*time.Minute), &res); err != nil {
		t.Fatal(err)
	}
	sites := e.Sim.Sites()
	if len(sites) != 1 || sites[0].Status != "published" || sites[0].Knowledge != 2 || sites[0].FAQs != 2 {
		t.Fatalf("simulator holds %+v, want exactly one complete site", sites)
	}
	creates := 0
	for _, r := range e.Sim.Requests() {
		if r.Method == "POST" && r.Path == "/api/v1/sites" {
			creates++
		}
	}
	// The lost attempt and its retry under the same key: one site.
	if creates != 2 {
		t.Errorf("%d create-site requests, want the killed one and its retry", creates)
	}
}

// TestOnboardingStartedAgainWithSDKDefaults starts a finished onboarding's
// ID again as a caller with a Temporal SDK's default ID reuse policy would
// (not the catalogue's): the new run gets no knowledge-ready signal, since
// every event went to the first run, yet finds the events in the inbox,
// never waits, and ends at once with the first run's result; every API
// call it makes is answered from the stored response, so the simulator
// applies nothing twice.
func TestOnboardingStartedAgainWithSDKDefaults(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{KnowledgeDelay: 2 * time.Second}) // 20 ms at the test's time scale
	e.startWorker(t)
	in := e.startIngress(t)
	e.register(t, in, "/webhooks/main", "knowledge.ready", "site.published")
	p := prepare(t, "../examples/acme-anvils.yaml", "acme-anvils")
	p.Input.WaitForKnowledge = true
	p.Input.KnowledgeTimeout = workflows.Duration(time.Minute)
	id := workflows.OnboardingID("acme-anvils")
	first := e.onboard(t, p, time.Minute)
	if first.Status != "published" || first.KnowledgeReady != 2 {
		t.Fatalf("first run: %+v; want published with both sources ready", first)
	}
	firstRun, err := e.Client.DescribeWorkflow(t.Context(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	// Every event the first run caused is in the inbox and dispatched
	// (to it while it ran, to nobody after: target-gone).
	var emitted []string
	for _, ev := range e.Sim.Events() {
		if ev.Type == webhook.KnowledgeReady || ev.Type == webhook.SitePublished {
			emitted = append(emitted, ev.ID)
		}
	}
	if len(emitted) != 3 {
		t.Fatalf("the simulator emitted %v as knowledge.ready and site.published; want 3 events", emitted)
	}
	siteopstest.Eventually(t, 30*time.Second, "every event in the inbox and dispatched", func() bool {
		for _, ev := range emitted {
			if out, _, err := e.Store.InboxOutcome(t.Context(), ev); err != nil || out == "" {
				return false
			}
		}
		return true
	})
	applied := func() (mutations, replayed int) {
		for _, r := range e.Sim.Requests() {
			switch {
			case r.Method == "GET" || r.Status >= 300:
			case r.Replayed:
				replayed++
			default:
				mutations++
			}
		}
		return mutations, replayed
	}
	mutationsBefore, replayedBefore := applied()
	eventsBefore := len(e.Sim.Events())

	// No ID reuse or conflict policy: the SDK's defaults.
	run, err := e.Client.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, workflows.OnboardingWorkflowName, p.Input)
	if err != nil {
		t.Fatalf("a second start with the SDK's default policy: %v", err)
	}
	if run.GetRunID() == firstRun.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId() {
		t.Fatal("the second start joined the first run; want a new run")
	}
	var second workflows.OnboardingResult
	if err := run.Get(ctxWithin(t, 30*time.Second), &second); err != nil {
		t.Fatalf("the second run: %v", err)
	}
	if !reflect.DeepEqual(second, first) {
		t.Errorf("second run's result %+v; want the first's %+v", second, first)
	}
	mutations, replayed := applied()
	if mutations != mutationsBefore {
		t.Errorf("the simulator applied %d mutations during the second run; want none", mutations-mutationsBefore)
	}
	// Create, agent, two sources, three FAQs, publish: each sent again
	// under its key and answered with the stored response.
	if got := replayed - replayedBefore; got != 8 {
		t.Errorf("%d answers replayed to the second run; want 8, one per step", got)
	}
	if n := len(e.Sim.Events()); n != eventsBefore {
		t.Errorf("the simulator emitted %d events during the second run; want none", n-eventsBefore)
	}
	if sites := e.Sim.Sites(); len(sites) != 1 || sites[0].Knowledge != 2 || sites[0].FAQs != 3 || sites[0].Status != "published" {
		t.Errorf("simulator holds %+v; want the one site the first run made", sites)
	}
	// It never waited: no timer in its history.
	it := e.Client.GetWorkflowHistory(t.Context(), id, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_TIMER_STARTED {
			t.Errorf("the second run started a timer (event %d): it waited; want it to find every event in the inbox", ev.GetEventId())
		}
	}
	v, err := e.Client.QueryWorkflow(t.Context(), id, run.GetRunID(), workflows.QueryStatus)
	if err != nil {
		t.Fatal(err)
	}
	var st workflows.OnboardingStatus
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	if st.Step != workflows.StepDone || st.LastSiteEvent != "site.published" || st.KnowledgeReady != 2 {
		t.Errorf("second run's status %+v; want done, both sources ready, and the inbox's site.published", st)
	}
	recordRunHistory(t, e, id, firstRun.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "onboarding_waits_for_knowledge")
	recordRunHistory(t, e, id, run.GetRunID(), "onboarding_started_again")
}
