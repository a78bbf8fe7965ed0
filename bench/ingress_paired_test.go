package bench

import (
	"slices"
	"testing"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// saturatingSenders is BenchmarkIngressPaired's default sender count: enough
// deliveries in flight that, while 32 or 64 of them wait for a commit, the
// rest keep both cores busy (bench/README.md: with 32, the PostgreSQL
// variant leaves a fifth to a third of the cores idle, and so does a store
// that only waits 2 ms).
const saturatingSenders = 128

// BenchmarkIngressPaired measures the ingress on PostgreSQL against the
// same handler with no store (BenchmarkIngressAccept's ceiling) in pairs
// whose two runs are back to back: SITEOPS_BENCH_ROUNDS rounds (default 4)
// of ceiling, PostgreSQL, PostgreSQL, ceiling, b.N deliveries per run, from
// SITEOPS_BENCH_SENDERS senders (default 128). On a machine whose speed
// drifts between runs, a ratio against a ceiling measured a minute before
// says as much about the drift as about the store; a pair's two runs share
// the machine's state.
//
// It reports the medians over the pairs of: the accept rate's ratio
// (of-ceiling); the CPU ratio with PostgreSQL's own CPU left out
// (of-ceiling-cpu: the ceiling's CPU per delivery over the ingress's, what
// the rate's ratio would be with the database on cores of its own); the
// lowest of each (min-of-ceiling, min-of-ceiling-cpu); and, per variant,
// the rate, this process's CPU per delivery, PostgreSQL's, and the cores
// both kept busy (near 2 on two cores: CPU-bound, so CPU per delivery is
// the work's, not an idle scheduler's).
func BenchmarkIngressPaired(b *testing.B) {
	if b.N < 100 {
		return // the testing package's first, one-delivery run: nothing to pair
	}
	senders := capSize(b, SendersEnv, 1024, saturatingSenders)
	rounds := benchCount(b, "SITEOPS_BENCH_ROUNDS", 4)
	bare := noStore{storetest.Open(b, store.SQLite)}
	st, pg := openPostgres(b, store.Options{})
	ceiling, inbox := ingressServer(b, bare), ingressServer(b, st)
	// A first run of each, not counted: connections, statements, pages.
	runAccept(b, ceiling, bare, nil, min(b.N, 2000), senders)
	runAccept(b, inbox, st, &pg, min(b.N, 2000), senders)

	var ceil, post []acceptRun
	var rate, cpu []float64
	pair := func(c, p acceptRun) {
		ceil, post = append(ceil, c), append(post, p)
		rate, cpu = append(rate, p.rate/c.rate), append(cpu, c.self/p.self)
	}
	for range rounds {
		c1 := runAccept(b, ceiling, bare, nil, b.N, senders)
		p1 := runAccept(b, inbox, st, &pg, b.N, senders)
		p2 := runAccept(b, inbox, st, &pg, b.N, senders)
		c2 := runAccept(b, ceiling, bare, nil, b.N, senders)
		pair(c1, p1)
		pair(c2, p2)
	}
	med := func(rs []acceptRun, f func(acceptRun) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		return medianOf(v)
	}
	b.ReportMetric(medianOf(rate), "of-ceiling")
	b.ReportMetric(medianOf(cpu), "of-ceiling-cpu")
	b.ReportMetric(slices.Min(rate), "min-of-ceiling")
	b.ReportMetric(slices.Min(cpu), "min-of-ceiling-cpu")
	b.ReportMetric(med(ceil, func(r acceptRun) float64 { return r.rate }), "ceiling-accepted/s")
	b.ReportMetric(med(post, func(r acceptRun) float64 { return r.rate }), "postgres-accepted/s")
	b.ReportMetric(med(ceil, func(r acceptRun) float64 { return r.self }), "ceiling-cpu-us")
	b.ReportMetric(med(post, func(r acceptRun) float64 { return r.self }), "postgres-self-cpu-us")
	b.ReportMetric(med(post, func(r acceptRun) float64 { return r.pgCPU }), "postgres-pg-cpu-us")
	b.ReportMetric(med(post, func(r acceptRun) float64 { return r.perCommit }), "postgres-per-commit")
	b.ReportMetric(med(ceil, acceptRun.busyCores), "ceiling-busy-cores")
	b.ReportMetric(med(post, acceptRun.busyCores), "postgres-busy-cores")
	for i := range rate {
		b.Logf("pair %d: ceiling %.0f/s at %.1f µs, postgres %.0f/s at %.1f µs (+%.1f µs in PostgreSQL), %.1f per commit: of-ceiling %.2f, of-ceiling-cpu %.2f",
			i+1, ceil[i].rate, ceil[i].self, post[i].rate, post[i].self, post[i].pgCPU, post[i].perCommit, rate[i], cpu[i])
	}
}
