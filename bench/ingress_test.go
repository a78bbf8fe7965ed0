package bench

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/ingress"
	"github.com/siteops/siteops/relay"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/wiring"
	"github.com/siteops/siteops/workflows"
)

const (
	secret      = "whsec_bench_secret"
	concurrency = 32
	taskQueue   = "siteops-bench"
)

// NoGzipEnv, set to 1, dials the benchmarks' clients with the SDK's
// defaults (dial: the capacity rig's, BenchmarkEndToEndLatency's relay,
// the memory benchmark's starter) without the SDK's default gzip of every
// request. The baselines that stand for siteops' own calls (the relay's
// raw calls, the in-request design, the no-op onboarding's worker) are
// dialed as siteops dials (dialAsSiteops) whatever it says.
const NoGzipEnv = "SITEOPS_BENCH_NO_GZIP"

// dialAsSiteops is a Temporal client of the benchmarks' server, namespace
// default, with the options a siteops process dials with
// (wiring.TemporalOptions).
func dialAsSiteops(b *testing.B) client.Client {
	b.Helper()
	o, _, err := wiring.TemporalOptions(config.Temporal{TaskQueue: taskQueue, Address: temporalAddress, Namespace: "default"}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		b.Fatal(err)
	}
	c, err := client.Dial(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c
}

// dial is a Temporal client of the benchmarks' server, namespace default,
// with the SDK's default options.
func dial(b *testing.B) client.Client {
	b.Helper()
	o := client.Options{HostPort: temporalAddress, Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
	if os.Getenv(NoGzipEnv) == "1" {
		o.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	c, err := client.Dial(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c
}

// signalInRequest is the design the ingress avoids: an Inbox whose
// "record" is the relay's call to Temporal made inside the request. It
// makes the call the relay makes (relay's signalOrStart): a plain
// signal to the site's lead sync, and SignalWithStart only when none runs,
// on a client dialed as siteops dials.
type signalInRequest struct{ c client.Client }

func (s signalInRequest) RecordEvent(ctx context.Context, ev store.InboxEvent) (bool, error) {
	site := "site_" + ev.EventID[len(ev.EventID)-2:]
	id := workflows.LeadSyncID(site)
	sig := workflows.LeadsCreatedSignal{EventIDs: []string{ev.EventID}}
	err := s.c.SignalWorkflow(ctx, id, "", workflows.SignalLeadsCreated, sig)
	var gone *serviceerror.NotFound
	if errors.As(err, &gone) {
		_, err = s.c.SignalWithStartWorkflow(ctx, id, workflows.SignalLeadsCreated, sig,
			client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue, WorkflowIDReusePolicy: workflows.LeadSyncKind.Policy.Reuse}, workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: site})
	}
	return err == nil, err
}
func (signalInRequest) MarkEndpointVerified(context.Context, string, string, store.Lane) (bool, error) {
	return false, nil
}
func (signalInRequest) SecretExpectation(context.Context, string) (store.Expectation, error) {
	return store.Expectation{}, nil
}
func (signalInRequest) RecordHandled(context.Context, store.InboxEvent, string, string) (bool, error) {
	return true, nil
}
func (signalInRequest) Ping(context.Context) error { return nil }

// SendersEnv sets how many concurrent senders BenchmarkIngressAccept runs
// (default 32).
const SendersEnv = "SITEOPS_BENCH_SENDERS"

// BenchmarkIngressAccept sends b.N signed, distinct lead.created deliveries
// over loopback HTTP from 32 concurrent senders (SendersEnv) and reports the accept rate
// and the latency percentiles, in one run, for:
//
//   - no-store: the same handler with no store (it verifies and answers):
//     the ceiling, which does no durable work;
//   - inbox=sqlite, inbox=postgres: the ingress as built (record in the
//     inbox, answer), with their share of the ceiling (of-ceiling; goal
//     for PostgreSQL ≥ 0.8);
//   - insert-per-request: the same durable work as inbox=postgres (the
//     same row in the same table of the same PostgreSQL, durable before
//     the answer) without the group commit: one INSERT, one commit per
//     delivery. inbox=postgres over it is group-commit-x;
//   - inbox=postgres+relay: inbox=postgres with the relay running beside
//     it as the ingress runs it, timed until the last event is signalled to
//     its lead sync: end-to-end throughput (e2e-events/s), the same work
//     the next variant does in its requests;
//   - signal-in-request: the design the ingress avoids, which makes the
//     relay's call to Temporal inside the request: its accept rate is its
//     end-to-end rate. It reports the inbox's end-to-end rate over its own
//     (postgres-e2e-x, the like-for-like ratio) and, apart, the inboxes'
//     accept rates over its own (postgres-x, sqlite-x: accept only; goal
//     for PostgreSQL ≥ 10).
//
// Every variant reports this process's CPU time per delivery (self-cpu-us:
// senders and ingress). The PostgreSQL variants also report what their
// deliveries cost the server, per delivery: the CPU time of the store's own
// backends (pg-cpu-us) and of the server's background processes
// (pg-bg-cpu-us: WAL writer, checkpointer, background writer, autovacuum;
// other sessions share them), the WAL written (wal-B; other sessions
// writing meanwhile add to it), and the deliveries per commit of the group
// commit. Its of-ceiling-cpu is the ceiling's self-cpu-us over its own: the
// share of the ceiling it would reach with PostgreSQL's CPU on cores of its
// own, both CPU-bound, which is the database's share separated from the
// ingress's. busy-cores is how many of the machine's cores this process
// and PostgreSQL kept busy (their CPU time over the run's): a variant that
// leaves cores idle is bound by its latency (32 senders, each waiting for
// its answer), not by CPU. With CommitWaitEnv set, a commit-wait variant
// runs after the ceiling.
func BenchmarkIngressAccept(b *testing.B) {
	rates := map[string]float64{}
	var ceilingCPU float64
	senders := capSize(b, SendersEnv, 1024, concurrency)
	type variant struct {
		name  string
		inbox func(b *testing.B) (ingress.Inbox, *pgSessions)
	}
	variants := []variant{
		{"no-store", func(b *testing.B) (ingress.Inbox, *pgSessions) {
			return noStore{storetest.Open(b, store.SQLite)}, nil
		}},
		{"inbox=sqlite", func(b *testing.B) (ingress.Inbox, *pgSessions) { return storetest.Open(b, store.SQLite), nil }},
		{"inbox=postgres", func(b *testing.B) (ingress.Inbox, *pgSessions) {
			st, pg := openPostgres(b, store.Options{})
			return st, &pg
		}},
		{"insert-per-request", func(b *testing.B) (ingress.Inbox, *pgSessions) {
			st, pg := openPostgres(b, store.Options{NoGroupCommit: true})
			return st, &pg
		}},
		{"inbox=postgres+relay", func(b *testing.B) (ingress.Inbox, *pgSessions) {
			st, pg := openPostgres(b, store.Options{})
			return &dispatchCounter{Store: st}, &pg
		}},
		{"signal-in-request", func(b *testing.B) (ingress.Inbox, *pgSessions) { return signalInRequest{dialAsSiteops(b)}, nil }},
	}
	if v := os.Getenv(CommitWaitEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("%s=%q: want a positive duration such as 1.5ms", CommitWaitEnv, v)
		}
		variants = slices.Insert(variants, 1, variant{"commit-wait", func(b *testing.B) (ingress.Inbox, *pgSessions) {
			return &commitWait{noStore: noStore{storetest.Open(b, store.SQLite)}, d: d}, nil
		}})
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			inbox, pg := v.inbox(b)
			var r acceptRun
			if dc, ok := inbox.(*dispatchCounter); ok {
				r = runAcceptRelayed(b, dc, pg, b.N, senders)
			} else {
				r = runAccept(b, ingressServer(b, inbox), inbox, pg, b.N, senders)
			}
			rates[v.name] = report(b, r.lat, r.elapsed)
			self := r.self
			b.ReportMetric(self, "self-cpu-us")
			if pg != nil {
				b.ReportMetric(r.pgCPU, "pg-cpu-us")
				b.ReportMetric(r.pgBG, "pg-bg-cpu-us")
				b.ReportMetric(r.wal, "wal-B")
				b.ReportMetric(r.perCommit, "per-commit")
			}
			b.ReportMetric(r.busyCores(), "busy-cores")
			switch v.name {
			case "no-store":
				ceilingCPU = self
			case "commit-wait", "inbox=sqlite", "inbox=postgres":
				if c := rates["no-store"]; c > 0 {
					b.ReportMetric(rates[v.name]/c, "of-ceiling")
					b.ReportMetric(ceilingCPU/self, "of-ceiling-cpu")
				}
			case "insert-per-request":
				b.ReportMetric(rates["inbox=postgres"]/rates[v.name], "group-commit-x")
			case "inbox=postgres+relay":
				rates["e2e"] = float64(b.N) / r.e2e.Seconds()
				b.ReportMetric(rates["e2e"], "e2e-events/s")
				b.ReportMetric(r.calls, "relay-calls/event")
			case "signal-in-request":
				b.ReportMetric(rates["e2e"]/rates[v.name], "postgres-e2e-x")
				b.ReportMetric(rates["inbox=postgres"]/rates[v.name], "postgres-x")
				b.ReportMetric(rates["inbox=sqlite"]/rates[v.name], "sqlite-x")
			}
		})
	}
}

// acceptRun is what one run of deliveries to one handler measured.
type acceptRun struct {
	lat     []time.Duration
	elapsed time.Duration
	rate    float64 // deliveries accepted per second
	self    float64 // this process's CPU per delivery (senders and handler), µs
	// On PostgreSQL, per delivery: the store's backends' CPU and the
	// server's background processes' (µs), the WAL written (bytes); and the
	// deliveries per commit.
	pgCPU, pgBG, wal, perCommit float64
	// With the relay running (runAcceptRelayed): the time from the first
	// delivery until the last was signalled, and the relay's calls to
	// Temporal per event.
	e2e   time.Duration
	calls float64
}

// busyCores is how many cores this process and PostgreSQL kept busy.
func (r acceptRun) busyCores() float64 { return (r.self + r.pgCPU + r.pgBG) * r.rate / 1e6 }

// runAccept sends n deliveries from senders concurrent senders to the
// handler at url, whose inbox is inbox (pg measures its PostgreSQL, when it
// has one), and fails b unless every one is accepted.
func runAccept(b *testing.B, url string, inbox ingress.Inbox, pg *pgSessions, n, senders int) acceptRun {
	b.Helper()
	var before pgUse
	var commits0, events0 int64
	if pg != nil {
		before = pg.read(b)
		commits0, events0 = storeOf(inbox).GroupCommits()
	}
	self0 := selfCPU()
	lat, elapsed, failed := send(b, url, n, senders, 0)
	r := acceptRun{lat: lat, elapsed: elapsed, rate: float64(n) / elapsed.Seconds(), self: float64((selfCPU() - self0).Microseconds()) / float64(n)}
	if failed > 0 {
		b.Fatalf("%d of %d deliveries were not accepted", failed, n)
	}
	if pg != nil {
		used := pg.read(b).sub(before)
		commits, events := storeOf(inbox).GroupCommits()
		per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
		r.pgCPU, r.pgBG = per(used.backends), per(used.background)
		r.wal = float64(used.wal) / float64(n)
		r.perCommit = float64(events-events0) / float64(max(commits-commits0, 1))
	}
	return r
}

// storeOf is the store an inbox of BenchmarkIngressAccept's PostgreSQL
// variants is.
func storeOf(inbox ingress.Inbox) *store.Store {
	if dc, ok := inbox.(*dispatchCounter); ok {
		return dc.Store
	}
	return inbox.(*store.Store)
}

// runAcceptRelayed is runAccept on the ingress with its relay running
// beside it on the same store, as the ingress runs them (two pipelines on
// PostgreSQL, a client dialed as siteops dials, lead syncs signalled
// first and started when none runs), and also measures the time from the
// first delivery until the relay had signalled the last (e2e) and the
// relay's calls per event.
func runAcceptRelayed(b *testing.B, st *dispatchCounter, pg *pgSessions, n, senders int) acceptRun {
	b.Helper()
	counted := &callCounter{Client: dialAsSiteops(b)}
	ctx, cancel := context.WithCancel(b.Context())
	rl := relay.New(relay.Options{Store: st, Temporal: counted, TaskQueue: taskQueue, Pipelines: 2})
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	url := ingressServerWith(b, ingress.Options{Inbox: st, EnvSecrets: []string{secret}, Recorded: rl.Wake})
	want := st.dispatched.Load() + int64(n)
	start := time.Now()
	wg.Go(func() { _ = rl.Run(ctx) })
	r := runAccept(b, url, st, pg, n, senders)
	deadline := time.Now().Add(5 * time.Minute)
	for st.dispatched.Load() < want {
		if time.Now().After(deadline) {
			b.Fatalf("the relay signalled %d of %d events in 5 minutes", st.dispatched.Load()-want+int64(n), n)
		}
		time.Sleep(time.Millisecond)
	}
	r.e2e = time.Since(start)
	r.calls = float64(counted.calls.Load()) / float64(n)
	return r
}

// callCounter counts a client's signals and SignalWithStarts.
type callCounter struct {
	client.Client
	calls atomic.Int64
}

func (c *callCounter) SignalWorkflow(ctx context.Context, id, run, name string, arg any) error {
	c.calls.Add(1)
	return c.Client.SignalWorkflow(ctx, id, run, name, arg)
}

func (c *callCounter) SignalWithStartWorkflow(ctx context.Context, id, name string, arg any, o client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	c.calls.Add(1)
	return c.Client.SignalWithStartWorkflow(ctx, id, name, arg, o, wf, args...)
}
