package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/webhookingress"
	"github.com/siteops/siteops/workflows"
)

// signalClock is the relay's Temporal client with a stopwatch: it notes
// when each lead.created event's signal was accepted by Temporal. A
// SignalWithStart returns once the server has written the signal to the
// workflow's history, so that moment is when the event is in the history.
type signalClock struct {
	client.Client
	mu sync.Mutex
	at map[string]time.Time
}

func (s *signalClock) SignalWithStartWorkflow(ctx context.Context, workflowID, signalName string, signalArg any,
	options client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	run, err := s.Client.SignalWithStartWorkflow(ctx, workflowID, signalName, signalArg, options, wf, args...)
	if err == nil {
		if sig, ok := signalArg.(workflows.LeadsCreatedSignal); ok {
			now := time.Now()
			s.mu.Lock()
			for _, id := range sig.EventIDs {
				s.at[id] = now
			}
			s.mu.Unlock()
		}
	}
	return run, err
}

// BenchmarkEndToEndLatency offers signed lead.created deliveries at a fixed
// rate (open loop) to a real ingress (HTTP server, inbox on PostgreSQL,
// relay) and reports, over b.N deliveries, the time from each delivery's
// 2xx to its signal being in its lead sync's history: p50 and p99. Events
// go to 200 sites, so the relay's per-site coalescing is exercised.
func BenchmarkEndToEndLatency(b *testing.B) {
	for _, rate := range []int{100, 1000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			st := storetest.Open(b, store.Postgres)
			clock := &signalClock{Client: dial(b), at: map[string]time.Time{}}
			srv, err := webhookingress.New(webhookingress.ServerOptions{Store: st, Temporal: clock, TaskQueue: taskQueue,
				EnvSecrets: []string{secret}, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(b.Context())
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ctx, ln) }()
			defer func() { cancel(); <-served }()
			url := "http://" + ln.Addr().String()

			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
			run := time.Now().UnixNano()
			answered := make([]time.Time, b.N)
			ids := make([]string, b.N)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for i := range b.N {
				time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))))
				wg.Go(func() {
					ids[i] = fmt.Sprintf("evt_l%d_%07d", run, i)
					body := fmt.Sprintf(`{"id":%q,"type":"lead.created","created_at":"2026-11-21T09:00:00.000Z","data":{"site_id":"site_l%d_%03d","lead_id":"lead_%d"}}`, ids[i], run, i%200, i)
					req, _ := http.NewRequest("POST", url+"/webhooks", strings.NewReader(body))
					req.Header.Set("svc-event-id", ids[i])
					req.Header.Set("svc-event-type", "lead.created")
					req.Header.Set("svc-signature", webhook.Sign(secret, time.Now(), []byte(body)))
					resp, err := hc.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					answered[i] = time.Now()
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("delivery %d answered %d", i, resp.StatusCode)
					}
				})
			}
			wg.Wait()
			deadline := time.Now().Add(2 * time.Minute)
			for {
				clock.mu.Lock()
				n := len(clock.at)
				clock.mu.Unlock()
				if n >= b.N {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d events reached their lead sync within 2 minutes", n, b.N)
				}
				time.Sleep(10 * time.Millisecond)
			}
			b.StopTimer()
			lat := make([]time.Duration, b.N)
			clock.mu.Lock()
			for i, id := range ids {
				lat[i] = clock.at[id].Sub(answered[i])
			}
			clock.mu.Unlock()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[b.N/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[b.N*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
