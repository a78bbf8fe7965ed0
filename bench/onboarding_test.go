package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/examples"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// onboardings is how many onboardings BenchmarkOnboarding runs at once;
// SITEOPS_BENCH_ONBOARDINGS lowers it for a quick check.
const onboardings = 50

// BenchmarkOnboarding runs batches of 50 onboardings at once, alternating
// the specs in examples/, through starter.Onboard to a published site on an
// in-process worker (PostgreSQL store, simulator over HTTP), and batches of
// 50 no-op workflows at once on the same Temporal server and a worker of
// their own, each with as many no-op activities as the onboarding of the same
// spec and in the same shape: two in sequence (create the site, configure
// the agent), the knowledge and FAQs eight at a time, then one (publish).
// The batches run in the order onboardings, no-ops, no-ops, onboardings.
// The specs' wait_for_knowledge is turned off: there is no ingress here to
// relay knowledge.ready. It reports throughput and p50 latency (start to
// result) of both and their ratios (goal: ≥ 0.8 for both), and, from the
// histories of the second round, the median time a workflow's tasks waited
// in the task queue, the time its activities ran, and its history length.
// SITEOPS_BENCH_WORKERS=2 runs two workers on each task queue. Use
// -benchtime 1x.
func BenchmarkOnboarding(b *testing.B) {
	scenario(b)
	for range b.N {
		onb, noop := onboardingRun(b, benchSize(b, "SITEOPS_BENCH_ONBOARDINGS", onboardings))
		b.ReportMetric(onb.rate(), "onboardings/s")
		b.ReportMetric(noop.rate(), "noop-workflows/s")
		b.ReportMetric(onb.p50().Seconds()*1000, "p50-ms")
		b.ReportMetric(noop.p50().Seconds()*1000, "noop-p50-ms")
		b.ReportMetric(onb.rate()/noop.rate(), "throughput-ratio")
		b.ReportMetric(noop.p50().Seconds()/onb.p50().Seconds(), "p50-ratio")
		onbSteps, noopSteps := medianSteps(onb.steps), medianSteps(noop.steps)
		b.ReportMetric(ms(p50(onb.starts)), "start-p50-ms")
		b.ReportMetric(ms(p50(noop.starts)), "noop-start-p50-ms")
		b.ReportMetric(onb.perWorkflow(onb.storingTexts), "storing-texts-ms/wf")
		b.ReportMetric(ms(onbSteps.span), "server-span-ms")
		b.ReportMetric(ms(noopSteps.span), "noop-server-span-ms")
		b.ReportMetric(ms(onbSteps.queued), "queued-ms")
		b.ReportMetric(ms(noopSteps.queued), "noop-queued-ms")
		b.ReportMetric(ms(onbSteps.ran), "activities-ms")
		b.ReportMetric(ms(noopSteps.ran), "noop-activities-ms")
		b.ReportMetric(float64(onbSteps.events), "events")
		b.ReportMetric(float64(noopSteps.events), "noop-events")
		b.ReportMetric(onb.perWorkflow(onb.serverCPU), "server-cpu-ms/wf")
		b.ReportMetric(noop.perWorkflow(noop.serverCPU), "noop-server-cpu-ms/wf")
		b.ReportMetric(onb.perWorkflow(onb.selfCPU), "process-cpu-ms/wf")
		b.ReportMetric(noop.perWorkflow(noop.selfCPU), "noop-process-cpu-ms/wf")
	}
}

// batchTimes are the latencies of a batch of workflows started at once and
// the time until the last one ended.
type batchTimes struct {
	lat     []time.Duration
	elapsed time.Duration
	steps   []steps
	// starts are the times until each workflow was started: for an
	// onboarding, starter.Onboard (validation, the texts stored, the
	// start); for a no-op, the start.
	starts []time.Duration
	// storingTexts is the time starter.Onboard spent storing knowledge
	// texts, all onboardings together.
	storingTexts time.Duration
	// serverCPU is the CPU time the Temporal server (the dev server, or
	// the cluster's four services) used during the batches, selfCPU this
	// process's (starter, workers, simulator).
	serverCPU, selfCPU time.Duration
}

func (t batchTimes) add(u batchTimes) batchTimes {
	return batchTimes{lat: append(t.lat, u.lat...), elapsed: t.elapsed + u.elapsed, serverCPU: t.serverCPU + u.serverCPU, selfCPU: t.selfCPU + u.selfCPU}
}

// perWorkflow is d divided among the batches' workflows, in milliseconds.
func (t batchTimes) perWorkflow(d time.Duration) float64 { return ms(d) / float64(len(t.lat)) }

// steps sums the time a workflow's tasks waited in their task queue
// (scheduled to started, workflow and activity tasks) and the time its
// activities ran (started to completed), and counts its history events
// and its workflow tasks; span is from its start to its end as the server
// recorded them.
type steps struct {
	queued, ran, span time.Duration
	events, tasks     int
}

// medianSteps is the median of each field over ss.
func medianSteps(ss []steps) steps {
	var q, r, sp []time.Duration
	var e []int
	for _, s := range ss {
		q, r, sp, e = append(q, s.queued), append(r, s.ran), append(sp, s.span), append(e, s.events)
	}
	slices.Sort(e)
	return steps{queued: p50(q), ran: p50(r), span: p50(sp), events: e[len(e)/2]}
}

func (t batchTimes) rate() float64 { return float64(len(t.lat)) / t.elapsed.Seconds() }

func (t batchTimes) p50() time.Duration { return p50(t.lat) }

// noopShape is the shape of an onboarding's activities: Content of them
// run at most eight at a time between two first and one last.
type noopShape struct {
	Content int `json:"content"`
}

const (
	noopOnboardingName = "BenchNoopOnboarding"
	noopActivityName   = "BenchNoopActivity"
)

// noopOnboarding runs 3 + Content no-op activities in an onboarding's
// shape, with the onboarding's activity options. It is started without a
// priority; an onboarding started directly carries its class and no
// fairness key, so on a queue of one class both are dispatched in order.
func noopOnboarding(ctx workflow.Context, in noopShape) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 20 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 12},
	})
	for range 2 {
		if err := workflow.ExecuteActivity(ctx, noopActivityName).Get(ctx, nil); err != nil {
			return err
		}
	}
	const inFlight = 8
	var fs []workflow.Future
	for range in.Content {
		if len(fs) == inFlight {
			if err := fs[0].Get(ctx, nil); err != nil {
				return err
			}
			fs = fs[1:]
		}
		fs = append(fs, workflow.ExecuteActivity(ctx, noopActivityName))
	}
	for _, f := range fs {
		if err := f.Get(ctx, nil); err != nil {
			return err
		}
	}
	return workflow.ExecuteActivity(ctx, noopActivityName).Get(ctx, nil)
}

func noopActivity(context.Context) error { return nil }

// onboardingRig is what the onboarding benchmarks run on: a simulator
// over HTTP, a PostgreSQL store, the siteops worker on one task queue and
// the no-op workflow's worker on another, on one dev server, warmed up.
type onboardingRig struct {
	b            *testing.B
	c            client.Client
	s            *starter.Starter
	run          int64
	specs        []starter.Spec
	queue        string
	noopQueue    string
	storingTexts atomic.Int64
	// texts is the store the siteops worker reads the texts from.
	texts starter.TextStore
	mu    sync.Mutex
	// onbStarts and noopStarts are how long each start took: until the
	// workflow was started.
	onbStarts, noopStarts []time.Duration
}

func newOnboardingRig(b *testing.B) *onboardingRig {
	b.Helper()
	run := time.Now().UnixNano()
	e := testenv.New(b, testenv.Options{Address: temporalAddress, TaskQueue: fmt.Sprintf("bench-onboarding-%d", run),
		APIKey: "svc_live_bench", Dialect: store.Postgres, Sim: simulator.Config{Seed: 11}})
	r := &onboardingRig{b: b, c: e.Client, run: run, queue: e.TaskQueue, noopQueue: fmt.Sprintf("bench-noop-%d", run)}

	// SITEOPS_BENCH_WORKERS workers poll each task queue, each on a
	// connection of its own as separate worker processes would (issue 13,
	// item 7: one worker against two): the siteops worker as `siteops
	// worker` runs it (testenv.StartWorker), the no-op's an SDK worker on
	// a client dialed as siteops dials (the same gRPC compression: a
	// worker's small completions go uncompressed on both sides).
	for range benchCount(b, "SITEOPS_BENCH_WORKERS", 1) {
		e.StartWorker(b, testenv.WorkerOptions{})
		nw := sdkworker.New(dialAsSiteops(b), r.noopQueue, sdkworker.Options{})
		nw.RegisterWorkflowWithOptions(noopOnboarding, workflow.RegisterOptions{Name: noopOnboardingName})
		nw.RegisterActivityWithOptions(noopActivity, activity.RegisterOptions{Name: noopActivityName})
		if err := nw.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nw.Stop)
	}
	r.texts = e.Store
	r.s = starter.New(starter.Options{Client: r.c, Texts: timedTexts{TextStore: e.Store, spent: &r.storingTexts}, TaskQueue: r.queue})

	r.specs = make([]starter.Spec, len(examples.Specs))
	for i, name := range examples.Specs {
		var err error
		if r.specs[i], err = starter.LoadSpecFS(examples.FS, name); err != nil {
			b.Fatal(err)
		}
		r.specs[i].WaitForKnowledge = false
	}

	// One of each before the clock starts: connections, pollers, caches.
	for i := range len(r.specs) {
		if err := r.onboard(b.Context(), i, "warm"); err != nil {
			b.Fatal(err)
		}
		if err := r.noop(b.Context(), i, "warm"); err != nil {
			b.Fatal(err)
		}
	}
	// The no-op has as many activities as the onboarding it stands for:
	// count them in the history of each spec's warm-up onboarding.
	for i := range len(r.specs) {
		p := r.prepare(i, "warm")
		want := 3 + len(p.Input.Knowledge) + len(p.Input.FAQs)
		if got := countActivities(b, r.c, r.onboardingID(i, "warm")); got != want {
			b.Fatalf("the onboarding of %s scheduled %d activities; the no-op stands for %d", examples.Specs[i], got, want)
		}
	}
	r.onbStarts, r.noopStarts = nil, nil
	r.storingTexts.Store(0)
	return r
}

// prepare is the i-th onboarding of a batch, the specs in turn, under a
// slug of its own.
func (r *onboardingRig) prepare(i int, prefix string) starter.Prepared {
	sp := r.specs[i%len(r.specs)]
	sp.Site.Slug = fmt.Sprintf("%s-%d-%03d", prefix, r.run, i)
	p, problems := starter.Prepare(sp)
	if len(problems) > 0 {
		r.b.Fatal(problems)
	}
	return p
}

func (r *onboardingRig) onboardingID(i int, prefix string) string {
	return workflows.OnboardingID(r.prepare(i, prefix).Input.Site.Slug)
}

func (r *onboardingRig) noopID(i int, prefix string) string {
	return fmt.Sprintf("bench-noop-%s-%d-%03d", prefix, r.run, i)
}

// started records how long a start took.
func (r *onboardingRig) started(t *[]time.Duration, since time.Time) {
	r.mu.Lock()
	*t = append(*t, time.Since(since))
	r.mu.Unlock()
}

// onboard runs the i-th onboarding through starter.Onboard to a published
// site.
func (r *onboardingRig) onboard(ctx context.Context, i int, prefix string) error {
	p := r.prepare(i, prefix)
	began := time.Now()
	return onboardPublished(ctx, r.s, p, func() { r.started(&r.onbStarts, began) })
}

// onboardPublished starts the onboarding p, calls started once the start
// has answered (whether or not it failed), and waits for the site to be
// published.
func onboardPublished(ctx context.Context, s *starter.Starter, p starter.Prepared, started func()) error {
	o, err := s.Onboard(ctx, p)
	started()
	if err != nil {
		return err
	}
	var res workflows.OnboardingResult
	if err := s.Wait(ctx, o.Run, &res); err != nil {
		return err
	}
	if res.Status != "published" {
		return fmt.Errorf("%s ended %q, want published", o.WorkflowID, res.Status)
	}
	return nil
}

// noop runs the no-op workflow that stands for the i-th onboarding.
func (r *onboardingRig) noop(ctx context.Context, i int, prefix string) error {
	p := r.prepare(i, prefix)
	shape := noopShape{Content: len(p.Input.Knowledge) + len(p.Input.FAQs)}
	began := time.Now()
	run, err := r.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: r.noopID(i, prefix), TaskQueue: r.noopQueue}, noopOnboardingName, shape)
	r.started(&r.noopStarts, began)
	if err != nil {
		return err
	}
	return run.Get(ctx, nil)
}

func onboardingRun(b *testing.B, n int) (onb, noop batchTimes) {
	b.Helper()
	r := newOnboardingRig(b)
	// ABBA: the onboardings, the no-ops, the no-ops again, the
	// onboardings again, so that a load that drifts during the run weighs
	// on both alike.
	b.ResetTimer()
	for round, first := range []bool{true, false} {
		batch := func(onboarding bool) {
			prefix := fmt.Sprintf("r%d", round)
			if onboarding {
				onb = onb.add(runBatch(b, n, func(ctx context.Context, i int) error { return r.onboard(ctx, i, "onb-"+prefix) }))
				return
			}
			noop = noop.add(runBatch(b, n, func(ctx context.Context, i int) error { return r.noop(ctx, i, prefix) }))
		}
		batch(first)
		batch(!first)
	}
	b.StopTimer()
	onb.starts, noop.starts = r.onbStarts, r.noopStarts
	onb.storingTexts = time.Duration(r.storingTexts.Load())
	// Where the time went, from the histories of the last round.
	for i := range n {
		onb.steps = append(onb.steps, historySteps(b, r.c, r.onboardingID(i, "onb-r1")))
		noop.steps = append(noop.steps, historySteps(b, r.c, r.noopID(i, "r1")))
	}
	return onb, noop
}

// runBatch runs f for 0..n-1 at once and times each call and the batch.
func runBatch(b *testing.B, n int, f func(ctx context.Context, i int) error) (t batchTimes) {
	b.Helper()
	t = batchTimes{lat: make([]time.Duration, n)}
	pids := serverPIDs
	server0, self0 := procsCPU(b, pids), procCPU(b, os.Getpid())
	defer func() {
		t.serverCPU, t.selfCPU = procsCPU(b, pids)-server0, procCPU(b, os.Getpid())-self0
	}()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			began := time.Now()
			if err := f(b.Context(), i); err != nil {
				b.Error(err)
			}
			t.lat[i] = time.Since(began)
		})
	}
	wg.Wait()
	t.elapsed = time.Since(start)
	if b.Failed() {
		b.FailNow()
	}
	return t
}

// timedTexts adds up the time spent storing knowledge texts.
type timedTexts struct {
	starter.TextStore
	spent *atomic.Int64
}

func (t timedTexts) PutKnowledgeTexts(ctx context.Context, texts []string) ([]string, error) {
	start := time.Now()
	defer func() { t.spent.Add(int64(time.Since(start))) }()
	return t.TextStore.PutKnowledgeTexts(ctx, texts)
}

// procsCPU is the CPU time the processes pids have used together.
func procsCPU(b *testing.B, pids []int) time.Duration {
	b.Helper()
	var d time.Duration
	for _, pid := range pids {
		d += procCPU(b, pid)
	}
	return d
}

// procCPU is the user and system CPU time a process has used, from
// /proc/PID/stat (in clock ticks of 10 ms).
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name (field 2) may hold spaces; fields count from the
	// last ')'.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// historySteps reads where a workflow's time went from its history.
func historySteps(b *testing.B, c client.Client, id string) steps {
	b.Helper()
	it := c.GetWorkflowHistory(b.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	at := map[int64]time.Time{}
	var s steps
	var first time.Time
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		s.events++
		t := ev.GetEventTime().AsTime()
		if first.IsZero() {
			first = t
		}
		s.span = t.Sub(first)
		at[ev.GetEventId()] = t
		if a := ev.GetWorkflowTaskStartedEventAttributes(); a != nil {
			s.queued += t.Sub(at[a.GetScheduledEventId()])
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			s.queued += t.Sub(at[a.GetScheduledEventId()])
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
			s.ran += t.Sub(at[a.GetStartedEventId()])
		}
		if ev.GetWorkflowTaskCompletedEventAttributes() != nil {
			s.tasks++
		}
	}
	return s
}

// countActivities counts the activities a workflow scheduled.
func countActivities(b *testing.B, c client.Client, id string) int {
	b.Helper()
	it := c.GetWorkflowHistory(b.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			n++
		}
	}
	return n
}
