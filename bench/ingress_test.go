package bench

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/webhookingress"
	"github.com/siteops/siteops/workflows"
)

const (
	secret      = "whsec_bench_secret"
	concurrency = 32
	taskQueue   = "siteops-bench"
)

func dial(b *testing.B) client.Client {
	b.Helper()
	c, err := client.Dial(client.Options{HostPort: temporalAddress, Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
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
func BenchmarkIngressAccept(b *testing.B) {
	rates := map[string]float64{}
	variants := []struct {
		name  string
		inbox func(b *testing.B) webhookingress.Inbox
	}{
		{"no-store", func(b *testing.B) webhookingress.Inbox { return noStore{storetest.Open(b, store.SQLite)} }},
		{"inbox=sqlite", func(b *testing.B) webhookingress.Inbox { return storetest.Open(b, store.SQLite) }},
		{"inbox=postgres", func(b *testing.B) webhookingress.Inbox { return storetest.Open(b, store.Postgres) }},
		{"signal-in-request", func(b *testing.B) webhookingress.Inbox { return signalInRequest{dial(b)} }},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			srv := httptest.NewServer(webhookingress.NewHandler(webhookingress.Options{Inbox: v.inbox(b), EnvSecrets: []string{secret}}))
			defer srv.Close()
			lat, elapsed, failed := send(b, srv.URL, b.N, concurrency, 0)
			if failed > 0 {
				b.Fatalf("%d of %d deliveries were not accepted", failed, b.N)
			}
			rates[v.name] = report(b, lat, elapsed)
			switch v.name {
			case "inbox=sqlite", "inbox=postgres":
				if c := rates["no-store"]; c > 0 {
					b.ReportMetric(rates[v.name]/c, "of-ceiling")
				}
			case "signal-in-request":
				b.ReportMetric(rates["inbox=postgres"]/rates[v.name], "postgres-x")
				b.ReportMetric(rates["inbox=sqlite"]/rates[v.name], "sqlite-x")
			}
		})
	}
}
