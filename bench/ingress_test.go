package bench

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
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

// BenchmarkIngressAccept sends b.N signed, distinct lead.created deliveries
// over loopback HTTP from 32 concurrent senders and reports the accept rate
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
// ingress's.
func BenchmarkIngressAccept(b *testing.B) {
	rates := map[string]float64{}
	var ceilingCPU float64
	variants := []struct {
		name  string
		inbox func(b *testing.B) (webhookingress.Inbox, *pgSessions)
	}{
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
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			inbox, pg := v.inbox(b)
			srv := httptest.NewServer(webhookingress.NewHandler(webhookingress.Options{Inbox: inbox, EnvSecrets: []string{secret}}))
			defer srv.Close()
			var before pgUse
			var commits0, events0 int64
			if pg != nil {
				before = pg.read(b)
				commits0, events0 = inbox.(*store.Store).GroupCommits()
			}
			self0 := selfCPU()
			lat, elapsed, failed := send(b, srv.URL, b.N, concurrency, 0)
			self := float64((selfCPU() - self0).Microseconds()) / float64(b.N)
			if failed > 0 {
				b.Fatalf("%d of %d deliveries were not accepted", failed, b.N)
			}
			rates[v.name] = report(b, lat, elapsed)
			b.ReportMetric(self, "self-cpu-us")
			if pg != nil {
				used := pg.read(b).sub(before)
				commits, events := inbox.(*store.Store).GroupCommits()
				per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
				b.ReportMetric(per(used.backends), "pg-cpu-us")
				b.ReportMetric(per(used.background), "pg-bg-cpu-us")
				b.ReportMetric(float64(used.wal)/float64(b.N), "wal-B")
				b.ReportMetric(float64(events-events0)/float64(max(commits-commits0, 1)), "per-commit")
			}
			switch v.name {
			case "no-store":
				ceilingCPU = self
			case "inbox=sqlite", "inbox=postgres":
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
