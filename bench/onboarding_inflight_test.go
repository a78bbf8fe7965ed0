package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// inFlightSegment is how many workflows one segment of
// BenchmarkOnboardingInFlight runs; SITEOPS_BENCH_SEGMENT lowers it.
const inFlightSegment = 60

// onboardingsInFlight is how many workflows BenchmarkOnboardingInFlight
// keeps in flight, as the issue measured (issue 22, item 2).
const onboardingsInFlight = 12

// BenchmarkOnboardingInFlight measures onboarding throughput against the
// no-op workflow of the same shape (BenchmarkOnboarding's: as many no-op
// activities, in the same order, with the same activity options) with 12
// workflows in flight at all times: a closed loop that starts the next
// workflow as one ends, through starter.Onboard on the siteops worker
// (simulator over HTTP, PostgreSQL store), and through ExecuteWorkflow on
// the no-op's worker, on one dev server. Segments of 60 workflows of each
// kind alternate (onboardings, no-ops, no-ops, onboardings, ... for
// SITEOPS_BENCH_ROUNDS pairs, default 4), and a segment's rate counts only
// the completions while 12 were in flight (from the first completion to
// the one after which fewer were left), so that neither ramp weighs. It
// reports the median rate of each kind, the median of the paired segments'
// ratios (goal: ≥ 0.9), the CPU time per workflow of the server, of this
// process (worker, starter, simulator) and of PostgreSQL, the median time
// a start took (starter.Onboard: validation, the texts stored, the start)
// and the time spent storing texts per onboarding. Use -benchtime 1x.
func BenchmarkOnboardingInFlight(b *testing.B) {
	scenario(b)
	n, rounds := inFlightSegments(b)
	for range b.N {
		r := newOnboardingRig(b)
		b.ResetTimer()
		pr := alternate(b, rounds, n, "onboardings", func(ctx context.Context, i int, round string) error { return r.onboard(ctx, i, "onb-"+round) },
			func(ctx context.Context, i int, round string) error { return r.noop(ctx, i, round) })
		b.StopTimer()
		pr.report(b, n, "onboardings/s", "throughput-ratio")
		b.ReportMetric(ms(time.Duration(r.storingTexts.Load()))/float64(pr.pairs*n), "storing-texts-ms/wf")
		// Where a workflow's time went, from the histories of the last
		// round: its span on the server, the time its tasks waited in the
		// task queues, the time its activities ran, its events.
		var onbSteps, noopSteps []steps
		last := fmt.Sprintf("f%d", rounds-1)
		for i := range n {
			onbSteps = append(onbSteps, historySteps(b, r.c, r.onboardingID(i, "onb-"+last)))
			noopSteps = append(noopSteps, historySteps(b, r.c, r.noopID(i, last)))
		}
		o, p := medianSteps(onbSteps), medianSteps(noopSteps)
		b.ReportMetric(ms(o.span), "server-span-ms")
		b.ReportMetric(ms(p.span), "noop-server-span-ms")
		b.ReportMetric(ms(o.queued), "queued-ms")
		b.ReportMetric(ms(p.queued), "noop-queued-ms")
		b.ReportMetric(ms(o.ran), "activities-ms")
		b.ReportMetric(ms(p.ran), "noop-activities-ms")
		b.ReportMetric(float64(o.events), "events")
		b.ReportMetric(float64(p.events), "noop-events")
		// The mean, not the median: each workflow task is work for the
		// server and the worker, and a tail of workflows whose activities
		// completed one by one costs more tasks than the median shows.
		b.ReportMetric(meanTasks(onbSteps), "workflow-tasks-mean")
		b.ReportMetric(meanTasks(noopSteps), "noop-workflow-tasks-mean")
		b.ReportMetric(ms(p50(r.onbStarts)), "start-p50-ms")
		b.ReportMetric(ms(p50(r.noopStarts)), "noop-start-p50-ms")
	}
}

// pairs is what alternate measured: each pair's rates and ratio, and the
// CPU time of each kind's segments.
type pairs struct {
	rates, baseRates, ratios []float64
	cpu, baseCPU             segmentCPU
	pairs                    int
}

// alternate runs rounds pairs of segments of n workflows each, kept
// onboardingsInFlight in flight (inFlightRate): f's and the baseline's,
// in the order f, baseline, baseline, f, ... so that a drift of the
// machine weighs on both alike. f and baseline are given the workflow's
// number and the round's name, fN. name says what f runs, in the log.
func alternate(b *testing.B, rounds, n int, name string, f, baseline func(ctx context.Context, i int, round string) error) pairs {
	b.Helper()
	var p pairs
	for round := range rounds {
		tag := fmt.Sprintf("f%d", round)
		run := func(g func(ctx context.Context, i int, round string) error, cpu *segmentCPU) float64 {
			rate, used := inFlightRate(b, n, func(ctx context.Context, i int) error { return g(ctx, i, tag) })
			*cpu = cpu.add(used)
			return rate
		}
		var o, q float64
		if round%2 == 0 {
			o, q = run(f, &p.cpu), run(baseline, &p.baseCPU)
		} else {
			q, o = run(baseline, &p.baseCPU), run(f, &p.cpu)
		}
		p.rates, p.baseRates, p.ratios = append(p.rates, o), append(p.baseRates, q), append(p.ratios, o/q)
		p.pairs++
		b.Logf("round %d: %.2f %s/s, %.2f no-ops/s, ratio %.2f", round, o, name, q, o/q)
	}
	return p
}

// report reports the median rate of each kind (f's as unit), the median
// of the pairs' ratios (as ratio) and the worst pair's (ratio-min): the
// goal holds for every run, not for a median that hides one. And the CPU
// time per workflow of each kind, the server's, this process's and
// PostgreSQL's, for segments of n workflows.
func (p pairs) report(b *testing.B, n int, unit, ratio string) {
	b.ReportMetric(medianOf(p.rates), unit)
	b.ReportMetric(medianOf(p.baseRates), "noop-workflows/s")
	b.ReportMetric(medianOf(p.ratios), ratio)
	b.ReportMetric(slices.Min(p.ratios), ratio+"-min")
	per := func(d time.Duration) float64 { return ms(d) / float64(p.pairs*n) }
	b.ReportMetric(per(p.cpu.server), "server-cpu-ms/wf")
	b.ReportMetric(per(p.baseCPU.server), "noop-server-cpu-ms/wf")
	b.ReportMetric(per(p.cpu.self), "process-cpu-ms/wf")
	b.ReportMetric(per(p.baseCPU.self), "noop-process-cpu-ms/wf")
	b.ReportMetric(per(p.cpu.postgres), "pg-cpu-ms/wf")
	b.ReportMetric(per(p.baseCPU.postgres), "noop-pg-cpu-ms/wf")
}

// inFlightSegments is the size of a segment (SITEOPS_BENCH_SEGMENT, at most
// and by default inFlightSegment) and the number of pairs of segments
// (SITEOPS_BENCH_ROUNDS, default 4) of the in-flight benchmarks.
func inFlightSegments(b *testing.B) (n, rounds int) {
	b.Helper()
	n = benchSize(b, "SITEOPS_BENCH_SEGMENT", inFlightSegment)
	if n <= onboardingsInFlight+1 {
		b.Fatalf("SITEOPS_BENCH_SEGMENT=%d: want more than %d, the workflows in flight", n, onboardingsInFlight+1)
	}
	return n, benchCount(b, "SITEOPS_BENCH_ROUNDS", 4)
}

// segmentCPU is the CPU time the Temporal server (the dev server, or the
// cluster's services), this process (worker, starter, simulator) and
// PostgreSQL (postgresCPU: the store's work; on the cluster, Temporal's
// persistence too) used.
type segmentCPU struct{ server, self, postgres time.Duration }

func (c segmentCPU) add(u segmentCPU) segmentCPU {
	return segmentCPU{server: c.server + u.server, self: c.self + u.self, postgres: c.postgres + u.postgres}
}

// inFlightRate runs f for 0..n-1 keeping onboardingsInFlight calls in
// flight, and returns the rate of completions while that many were (from
// the first completion to the one that left fewer to start) and the CPU
// time the server and this process used over the whole segment.
func inFlightRate(b *testing.B, n int, f func(ctx context.Context, i int) error) (float64, segmentCPU) {
	b.Helper()
	pids := serverPIDs
	server0, self0, pg0 := procsCPU(b, pids), procCPU(b, os.Getpid()), postgresCPU()
	var (
		next atomic.Int64
		mu   sync.Mutex
		done []time.Time
		wg   sync.WaitGroup
	)
	for range onboardingsInFlight {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || b.Failed() {
					return
				}
				if err := f(b.Context(), i); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				done = append(done, time.Now())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	cpu := segmentCPU{server: procsCPU(b, pids) - server0, self: procCPU(b, os.Getpid()) - self0, postgres: postgresCPU() - pg0}
	slices.SortFunc(done, func(a, b time.Time) int { return a.Compare(b) })
	// After completion n-inFlight, no workflow was left to start: the
	// loop ran down.
	last := n - onboardingsInFlight
	return float64(last) / done[last].Sub(done[0]).Seconds(), cpu
}

// meanTasks is the mean number of workflow tasks of ss.
func meanTasks(ss []steps) float64 {
	n := 0
	for _, s := range ss {
		n += s.tasks
	}
	return float64(n) / float64(len(ss))
}
