package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/webhookingress"
	"github.com/siteops/siteops/workflows"
)

// BenchmarkRelayDispatch measures, in one run and against the same dev
// server, how fast the relay as it runs in the ingress (the bulk lane's
// pipelines: two on PostgreSQL, one on SQLite; 16 signals in flight,
// batches of 500) turns b.N
// lead.created events — each for a site of its own, so that none share a
// signal — into SignalWithStart calls, and how fast 16 goroutines make the
// same number of SignalWithStart calls with no store in between (the
// ceiling). It reports both rates and the relay's share of the ceiling.
func BenchmarkRelayDispatch(b *testing.B) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		b.Run("store="+string(d), func(b *testing.B) {
			st := storetest.Open(b, d)
			c := dial(b)
			run := time.Now().UnixNano()
			for i := range b.N {
				id := fmt.Sprintf("evt_r%d_%08d", run, i)
				body := fmt.Sprintf(`{"id":%q,"type":"lead.created","created_at":"2026-11-21T09:00:00.000Z","data":{"site_id":"site_r%d_%06d","lead_id":"lead_%d"}}`, id, run, i, i)
				if _, err := st.RecordEvent(b.Context(), store.InboxEvent{EventID: id, EventType: "lead.created", Lane: store.LaneBulk, EndpointID: "env", ReceivedAt: time.Now().Add(-time.Second), Body: []byte(body)}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			raw := signalWithStartRate(b, c, b.N, 16)
			relay := &webhookingress.Relay{Store: st, Temporal: c, TaskQueue: taskQueue, Idle: 10 * time.Millisecond}
			if d == store.Postgres {
				relay.Pipelines = 2 // as the ingress runs it there
			}
			ctx, cancel := context.WithCancel(b.Context())
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- relay.Run(ctx) }()
			for {
				s, err := st.InboxStatus(b.Context())
				if err != nil {
					b.Fatal(err)
				}
				if s.Undispatched == 0 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			elapsed := time.Since(start)
			cancel()
			<-done
			b.StopTimer()
			rate := float64(b.N) / elapsed.Seconds()
			b.ReportMetric(rate, "events/s")
			b.ReportMetric(raw, "raw-calls/s")
			b.ReportMetric(rate/raw, "of-raw")
		})
	}
}

// signalWithStartRate makes n SignalWithStart calls of lead syncs from
// workers goroutines and returns the calls per second.
func signalWithStartRate(b *testing.B, c client.Client, n, workers int) float64 {
	run := time.Now().UnixNano()
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
				site := fmt.Sprintf("site_w%d_%06d", run, i)
				id := workflows.LeadSyncID(site)
				_, err := c.SignalWithStartWorkflow(b.Context(), id, workflows.SignalLeadsCreated, workflows.LeadsCreatedSignal{EventIDs: []string{fmt.Sprint(i)}},
					client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: site})
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}
