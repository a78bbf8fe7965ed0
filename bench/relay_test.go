package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/relay"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/workflows"
)

// BenchmarkRelayDispatch measures, in one run and against the same
// Temporal server, how fast the relay as the ingress runs it (the bulk
// lane: 16 signals in flight, claims ramping up to 500; two pipelines on
// PostgreSQL, one on SQLite; its client dialed as siteops dials) turns
// lead.created events into signals, and how fast the same calls go without
// it: plain signals (SignalWorkflow, the call the relay makes to a lead
// sync that runs) of the same lead syncs from 16 goroutines with no store
// in between, on a client dialed as siteops dials too (the same gRPC
// compression: none for requests under 1 KiB). That is the ceiling at the
// same concurrency; the relay's share of it (of-raw) is what the inbox,
// the claims and the bookkeeping cost. The events are for b.N/2 sites
// whose lead syncs are started before the clock starts, as they are once
// a site is onboarded, each site once per round, so that no two events
// share a signal and none is held back by the relay's per-site
// coalescing: every event is one call to a running workflow on both
// sides. The rounds run raw, relay, relay, raw (b.N/2 calls or events
// each), so that a load that drifts weighs on both alike; a relay round is
// timed from the relay's start until its last batch is marked dispatched.
// It reports both rates and the relay's share of the ceiling (goal ≥
// 0.95), and the CPU time per event or call of the Temporal server, of
// the store's own PostgreSQL backends and of this process.
//
// SITEOPS_BENCH_RELAYS=2 runs two relays (each with a client of its own,
// as two ingress replicas would) against a ceiling of 32 goroutines;
// SITEOPS_BENCH_RAW=signalwithstart makes the raw calls SignalWithStart,
// the baseline of the runs before 903279f.
func BenchmarkRelayDispatch(b *testing.B) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		b.Run("store="+string(d), func(b *testing.B) {
			relays := benchCount(b, "SITEOPS_BENCH_RELAYS", 1)
			var pg *pgSessions
			st := &dispatchCounter{}
			if d == store.Postgres {
				s, p := openPostgres(b, store.Options{})
				st.Store, pg = s, &p
			} else {
				st.Store = storetest.Open(b, d)
			}
			c := dialAsSiteops(b) // the raw calls' client: as the relay's, so the same calls cost the same
			var clients []client.Client
			for range relays {
				clients = append(clients, dialAsSiteops(b)) // the relay's: as the ingress dials
			}
			const parallel = 16 // the relay's default per lane
			run := time.Now().UnixNano()
			sites := max(b.N/2, 1)
			site := func(i int) string { return fmt.Sprintf("site_r%d_%06d", run, i) }
			b.StopTimer()
			// The lead syncs, started: half by the raw calls' client and
			// half by each relay's, so that every client has made calls
			// (its connection warmed up) before the clock starts.
			for k, cl := range append([]client.Client{c}, clients...) {
				n := len(clients) + 1
				_ = signalWithStartTime(b, cl, (sites+n-1-k)/n, 2*parallel, func(i int) string { return site(i*n + k) })
			}
			b.StartTimer()
			var rawTime, relayTime time.Duration
			var rawCalls, relayed int
			var rawCPU, relayCPU roundCPU
			for round, relayFirst := range []bool{false, true} {
				for _, relayRound := range []bool{relayFirst, !relayFirst} {
					if !relayRound {
						before := readRoundCPU(b, pg)
						// Labelled, so that a -cpuprofile tells the rounds
						// apart (go tool pprof -tagfocus round=raw).
						pprof.Do(b.Context(), pprof.Labels("round", "raw"), func(context.Context) {
							rawTime += rawCallTime(b, c, sites, parallel*relays, site)
						})
						rawCPU = rawCPU.add(readRoundCPU(b, pg).sub(before))
						rawCalls += sites
						continue
					}
					b.StopTimer()
					fillInbox(b, st.Store, fmt.Sprintf("%d_%d", run, round), sites, site)
					b.StartTimer()
					before := readRoundCPU(b, pg)
					pprof.Do(b.Context(), pprof.Labels("round", "relay"), func(context.Context) {
						relayTime += relayTimeFor(b, st, clients, d, sites)
					})
					relayCPU = relayCPU.add(readRoundCPU(b, pg).sub(before))
					relayed += sites
				}
			}
			b.StopTimer()
			rate := float64(relayed) / relayTime.Seconds()
			raw := float64(rawCalls) / rawTime.Seconds()
			b.ReportMetric(rate, "events/s")
			b.ReportMetric(raw, "raw-calls/s")
			b.ReportMetric(rate/raw, "of-raw")
			// Where the CPU went, per call or event: the Temporal server,
			// the store's PostgreSQL backends, this process.
			rawCPU.report(b, "raw", rawCalls)
			relayCPU.report(b, "relay", relayed)
		})
	}
}

// fillInbox records n lead.created events in the bulk lane, the i-th for
// site(i).
func fillInbox(b *testing.B, st *store.Store, run string, n int, site func(int) string) {
	b.Helper()
	for i := range n {
		id := fmt.Sprintf("evt_r%s_%08d", run, i)
		body := fmt.Sprintf(`{"id":%q,"type":"lead.created","created_at":"2026-11-21T09:00:00.000Z","data":{"site_id":%q,"lead_id":"lead_%d"}}`, id, site(i), i)
		if _, err := st.RecordEvent(b.Context(), store.InboxEvent{EventID: id, EventType: "lead.created", Lane: store.LaneBulk, EndpointID: "env", ReceivedAt: time.Now().Add(-time.Second), Body: []byte(body)}); err != nil {
			b.Fatal(err)
		}
	}
}

// relayTimeFor runs one relay per client over st until n more events are
// marked dispatched and returns the time that took.
func relayTimeFor(b *testing.B, st *dispatchCounter, clients []client.Client, d store.Dialect, n int) time.Duration {
	b.Helper()
	want := st.dispatched.Load() + int64(n)
	ctx, cancel := context.WithCancel(b.Context())
	var wg sync.WaitGroup
	start := time.Now()
	for _, c := range clients {
		// Idle as in production (1 s): the relay claims at once when it
		// starts and goes on while claims come back full; a shorter Idle
		// would also refresh its gauges (three queries, one counting the
		// whole inbox) that often, work the ingress does not do.
		o := relay.Options{Store: st, Temporal: c, TaskQueue: taskQueue}
		if d == store.Postgres {
			o.Pipelines = 2 // as the ingress runs it there
		}
		rl := relay.New(o)
		wg.Go(func() { _ = rl.Run(ctx) })
	}
	deadline := time.Now().Add(5 * time.Minute)
	for st.dispatched.Load() < want {
		if time.Now().After(deadline) {
			cancel()
			wg.Wait()
			b.Fatalf("the relay dispatched %d of %d events in 5 minutes", st.dispatched.Load()-want+int64(n), n)
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	return elapsed
}

// dispatchCounter is the relay's store, counting the events it marks
// dispatched (with an outcome; failed attempts do not count).
type dispatchCounter struct {
	*store.Store
	dispatched atomic.Int64
}

func (s *dispatchCounter) RecordDispatches(ctx context.Context, ds []store.Dispatch) error {
	if err := s.Store.RecordDispatches(ctx, ds); err != nil {
		return err
	}
	n := 0
	for _, d := range ds {
		if d.Outcome != "" {
			n++
		}
	}
	s.dispatched.Add(int64(n))
	return nil
}

// signalWithStartTime makes n SignalWithStart calls of lead syncs, the
// i-th for site(i), from workers goroutines and returns the time they
// took.
func signalWithStartTime(b *testing.B, c client.Client, n, workers int, site func(int) string) time.Duration {
	return callTime(b, n, workers, func(i int) error {
		id := workflows.LeadSyncID(site(i))
		_, err := c.SignalWithStartWorkflow(b.Context(), id, workflows.SignalLeadsCreated, workflows.LeadsCreatedSignal{EventIDs: []string{fmt.Sprintf("evt_w%d", i)}},
			client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue, WorkflowIDReusePolicy: workflows.LeadSyncKind.Policy.Reuse},
			workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: site(i)})
		return err
	})
}

// RawCallEnv, set to "signalwithstart", makes BenchmarkRelayDispatch's
// raw calls SignalWithStart instead of the plain signals (SignalWorkflow)
// the relay makes to a lead sync that runs.
const RawCallEnv = "SITEOPS_BENCH_RAW"

// rawCallTime makes the raw round's n calls, the i-th for site(i): plain
// signals, or as signalWithStartTime when RawCallEnv says so.
func rawCallTime(b *testing.B, c client.Client, n, workers int, site func(int) string) time.Duration {
	if os.Getenv(RawCallEnv) == "signalwithstart" {
		return signalWithStartTime(b, c, n, workers, site)
	}
	return callTime(b, n, workers, func(i int) error {
		return c.SignalWorkflow(b.Context(), workflows.LeadSyncID(site(i)), "", workflows.SignalLeadsCreated, workflows.LeadsCreatedSignal{EventIDs: []string{fmt.Sprintf("evt_w%d", i)}})
	})
}

// callTime makes call(0) … call(n-1) from workers goroutines and returns
// the time they took.
func callTime(b *testing.B, n, workers int, call func(i int) error) time.Duration {
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := call(int(i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// cpuTimes is CPU time used by the Temporal server, the local PostgreSQL
// server and this process.
type cpuTimes struct{ server, postgres, self time.Duration }

func readCPU(b *testing.B) cpuTimes {
	b.Helper()
	return cpuTimes{server: procsCPU(b, serverPIDs), postgres: postgresCPU(), self: procCPU(b, os.Getpid())}
}

func (t cpuTimes) sub(u cpuTimes) cpuTimes {
	return cpuTimes{t.server - u.server, t.postgres - u.postgres, t.self - u.self}
}

// roundCPU is the CPU time a round of BenchmarkRelayDispatch took of the
// Temporal server, of the store's own PostgreSQL backends (zero on SQLite)
// and of this process; pg is the reading it was taken from.
type roundCPU struct {
	server, postgres, self time.Duration
	pg                     pgUse
}

func readRoundCPU(b *testing.B, pg *pgSessions) roundCPU {
	b.Helper()
	r := roundCPU{server: procsCPU(b, serverPIDs), self: selfCPU()}
	if pg != nil {
		r.pg = pg.read(b)
	}
	return r
}

// sub is t since u: of PostgreSQL, the CPU time of the backends read both
// times (a relay that stops closes the connections whose queries it
// cancels, and their backends exit).
func (t roundCPU) sub(u roundCPU) roundCPU {
	return roundCPU{server: t.server - u.server, postgres: t.pg.sub(u.pg).backends, self: t.self - u.self}
}

func (t roundCPU) add(u roundCPU) roundCPU {
	return roundCPU{server: t.server + u.server, postgres: t.postgres + u.postgres, self: t.self + u.self}
}

// report reports the CPU time per unit of n in microseconds, as
// NAME-server-cpu-us, NAME-pg-cpu-us and NAME-self-cpu-us.
func (t roundCPU) report(b *testing.B, name string, n int) {
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	b.ReportMetric(per(t.server), name+"-server-cpu-us")
	b.ReportMetric(per(t.postgres), name+"-pg-cpu-us")
	b.ReportMetric(per(t.self), name+"-self-cpu-us")
}

// postgresCPU is the CPU time of every postgres process on this machine,
// with that of the backends that have exited (counted in their parent's
// children times); zero where PostgreSQL runs elsewhere.
func postgresCPU() time.Duration {
	comms, _ := filepath.Glob("/proc/[0-9]*/comm")
	var ticks int64
	for _, c := range comms {
		name, err := os.ReadFile(c)
		if err != nil || strings.TrimSpace(string(name)) != "postgres" {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(filepath.Dir(c), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
		for _, k := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime
			v, _ := strconv.ParseInt(f[k], 10, 64)
			ticks += v
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
