package bench

import (
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

// BenchmarkRelayDispatch fills the inbox with b.N lead.created events for
// 100 sites and measures how fast the relay (batches of 100, 16 signals in
// flight) turns them into SignalWithStart calls on the dev server.
func BenchmarkRelayDispatch(b *testing.B) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		b.Run("store="+string(d), func(b *testing.B) {
			st := storetest.Open(b, d)
			c := dial(b)
			run := time.Now().UnixNano()
			for i := range b.N {
				id := fmt.Sprintf("evt_r%d_%08d", run, i)
				body := fmt.Sprintf(`{"id":%q,"type":"lead.created","created_at":"2026-11-21T09:00:00.000Z","data":{"site_id":"site_r%d_%02d","lead_id":"lead_%d"}}`, id, run, i%100, i)
				if _, err := st.RecordEvent(b.Context(), store.InboxEvent{EventID: id, EventType: "lead.created", EndpointID: "env", ReceivedAt: time.Now().Add(-time.Second), Body: []byte(body)}); err != nil {
					b.Fatal(err)
				}
			}
			relay := &webhookingress.Relay{Store: st, Temporal: c, TaskQueue: taskQueue}
			b.ResetTimer()
			start := time.Now()
			for {
				n, err := relay.DispatchOnce(b.Context())
				if err != nil {
					b.Fatal(err)
				}
				if n == 0 {
					break
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			s, _ := st.InboxStatus(b.Context())
			if s.Undispatched != 0 {
				b.Fatalf("%d events left undispatched", s.Undispatched)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
		})
	}
}

// BenchmarkSignalWithStartRaw is the ceiling: b.N SignalWithStart calls
// from 16 goroutines, no store in between.
func BenchmarkSignalWithStartRaw(b *testing.B) {
	c := dial(b)
	run := time.Now().UnixNano()
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				site := fmt.Sprintf("site_w%d_%02d", run, i%100)
				id := workflows.LeadSyncID(site)
				_, err := c.SignalWithStartWorkflow(b.Context(), id, workflows.SignalLeadCreated, workflows.LeadCreatedSignal{EventID: fmt.Sprint(i)},
					client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: site})
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
}
