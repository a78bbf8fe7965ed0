package bench

import (
	"context"
	"io"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/webhookingress"
	"github.com/siteops/siteops/wiring"
	"github.com/siteops/siteops/workflows"
)

const (
	secret      = "whsec_bench_secret"
	concurrency = 32
	taskQueue   = "siteops-bench"
)

// NoGzipEnv, set to 1, dials the benchmarks' own Temporal clients (dial:
// BenchmarkRelayDispatch's raw callers, the in-request design of
// BenchmarkIngressAccept) without the SDK's default gzip of every request.
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
// "record" is a SignalWithStart to Temporal inside the request.
type signalInRequest struct{ c client.Client }

func (s signalInRequest) RecordEvent(ctx context.Context, ev store.InboxEvent) (bool, error) {
	site := "site_" + ev.EventID[len(ev.EventID)-2:]
	id := workflows.LeadSyncID(site)
	_, err := s.c.SignalWithStartWorkflow(ctx, id, workflows.SignalLeadCreated, workflows.LeadCreatedSignal{EventID: ev.EventID},
		client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: site})
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
// and the latency percentiles, in one run: for the same handler with no
// store (it verifies and answers: the ceiling), for the ingress as built
// (record in the inbox, answer) on SQLite and PostgreSQL, and for the
// design it avoids, which calls SignalWithStart inside the request. The
// inbox variants also report their share of the ceiling (of-ceiling; goal
// for PostgreSQL ≥ 0.8), and the last the inboxes' rates as multiples of
// its own (postgres-x, sqlite-x; goal for PostgreSQL ≥ 10).
//
// Every variant reports this process's CPU time per delivery (self-cpu-us:
// senders and ingress). The PostgreSQL variant also reports what its
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
		inbox func(b *testing.B) (webhookingress.Inbox, *pgSessions)
	}
	variants := []variant{
		{"no-store", func(b *testing.B) (webhookingress.Inbox, *pgSessions) {
			return noStore{storetest.Open(b, store.SQLite)}, nil
		}},
		{"inbox=sqlite", func(b *testing.B) (webhookingress.Inbox, *pgSessions) { return storetest.Open(b, store.SQLite), nil }},
		{"inbox=postgres", func(b *testing.B) (webhookingress.Inbox, *pgSessions) {
			st, pg := openPostgres(b)
			return st, &pg
		}},
		{"signal-in-request", func(b *testing.B) (webhookingress.Inbox, *pgSessions) { return signalInRequest{dial(b)}, nil }},
	}
	if v := os.Getenv(CommitWaitEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("%s=%q: want a positive duration such as 1.5ms", CommitWaitEnv, v)
		}
		variants = slices.Insert(variants, 1, variant{"commit-wait", func(b *testing.B) (webhookingress.Inbox, *pgSessions) {
			return &commitWait{noStore: noStore{storetest.Open(b, store.SQLite)}, d: d}, nil
		}})
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			inbox, pg := v.inbox(b)
			r := runAccept(b, ingressServer(b, inbox), inbox, pg, b.N, senders)
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
			case "signal-in-request":
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
}

// busyCores is how many cores this process and PostgreSQL kept busy.
func (r acceptRun) busyCores() float64 { return (r.self + r.pgCPU + r.pgBG) * r.rate / 1e6 }

// runAccept sends n deliveries from senders concurrent senders to the
// handler at url, whose inbox is inbox (pg measures its PostgreSQL, when it
// has one), and fails b unless every one is accepted.
func runAccept(b *testing.B, url string, inbox webhookingress.Inbox, pg *pgSessions, n, senders int) acceptRun {
	b.Helper()
	var before pgUse
	var commits0, events0 int64
	if pg != nil {
		before = pg.read(b)
		commits0, events0 = inbox.(*store.Store).GroupCommits()
	}
	self0 := selfCPU()
	lat, elapsed, failed := send(b, url, n, senders, 0)
	r := acceptRun{lat: lat, elapsed: elapsed, rate: float64(n) / elapsed.Seconds(), self: float64((selfCPU() - self0).Microseconds()) / float64(n)}
	if failed > 0 {
		b.Fatalf("%d of %d deliveries were not accepted", failed, n)
	}
	if pg != nil {
		used := pg.read(b).sub(before)
		commits, events := inbox.(*store.Store).GroupCommits()
		per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
		r.pgCPU, r.pgBG = per(used.backends), per(used.background)
		r.wal = float64(used.wal) / float64(n)
		r.perCommit = float64(events-events0) / float64(max(commits-commits0, 1))
	}
	return r
}
