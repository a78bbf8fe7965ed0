package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/siteops/siteops/agentsite/webhook"
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
	c, err := client.Dial(client.Options{HostPort: server.Address, Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
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
// and the latency percentiles, for the ingress as built (record in the
// inbox, answer) on SQLite and PostgreSQL, and for the variant that calls
// SignalWithStart inside the request.
func BenchmarkIngressAccept(b *testing.B) {
	variants := []struct {
		name  string
		inbox func(b *testing.B) webhookingress.Inbox
	}{
		{"inbox=sqlite", func(b *testing.B) webhookingress.Inbox { return storetest.Open(b, store.SQLite) }},
		{"inbox=postgres", func(b *testing.B) webhookingress.Inbox { return storetest.Open(b, store.Postgres) }},
		{"signal-in-request", func(b *testing.B) webhookingress.Inbox { return signalInRequest{dial(b)} }},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			h := webhookingress.NewHandler(webhookingress.Options{Inbox: v.inbox(b), EnvSecrets: []string{secret}})
			srv := httptest.NewServer(h)
			defer srv.Close()
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency}}
			run := fmt.Sprintf("%d", time.Now().UnixNano())
			lat := make([]time.Duration, b.N)
			var next atomic.Int64
			var failures atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range concurrency {
				wg.Go(func() {
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						id := fmt.Sprintf("evt_%s_%08d", run, i)
						body := `{"id":"` + id + `","type":"lead.created","created_at":"2026-11-21T09:00:00.000Z","data":{"site_id":"site_` + id[len(id)-2:] + `","lead_id":"lead_1"}}`
						req, _ := http.NewRequest("POST", srv.URL+"/webhooks", strings.NewReader(body))
						req.Header.Set("svc-event-id", id)
						req.Header.Set("svc-event-type", "lead.created")
						req.Header.Set("svc-signature", webhook.Sign(secret, time.Now(), []byte(body)))
						t0 := time.Now()
						resp, err := hc.Do(req)
						lat[i] = time.Since(t0)
						if err != nil {
							failures.Add(1)
							continue
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
						if resp.StatusCode != 200 {
							failures.Add(1)
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if n := failures.Load(); n > 0 {
				b.Fatalf("%d of %d deliveries were not accepted", n, b.N)
			}
			slices.Sort(lat)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "accepted/s")
			b.ReportMetric(float64(lat[b.N/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[b.N*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
