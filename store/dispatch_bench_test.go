package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// BenchmarkMarkBatch times the relay's bookkeeping of one claimed bulk
// batch of 500 signalled lead.created events, without Temporal: the marks
// alone (MarkDispatchedBatch, one UPDATE) against the marks and the
// history rows in one transaction (RecordDispatches).
//
//	go test -run '^$' -bench BenchmarkMarkBatch ./store/
func BenchmarkMarkBatch(b *testing.B) {
	const batch = 500
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		for _, how := range []string{"marks", "marks+history"} {
			b.Run(fmt.Sprintf("store=%s/%s", d, how), func(b *testing.B) {
				st := storetest.Open(b, d)
				n := 0
				for b.Loop() {
					b.StopTimer()
					ids := make([]string, batch)
					ds := make([]store.Dispatch, batch)
					for i := range batch {
						n++
						ids[i] = fmt.Sprintf("evt_%08d", n)
						ev := store.InboxEvent{EventID: ids[i], EventType: "lead.created", Lane: store.LaneBulk, EndpointID: "env", ReceivedAt: time.Now(),
							Body: []byte(`{"id":"` + ids[i] + `","type":"lead.created","data":{"site_id":"site_1","lead_id":"lead_1"}}`)}
						if _, err := st.RecordEvent(b.Context(), ev); err != nil {
							b.Fatal(err)
						}
						ds[i] = store.Dispatch{EventID: ids[i], Outcome: "signalled", WorkflowID: "lead-sync/site_1", RunID: "0193b2a4-5b7c-7d8e-9f01-23456789abcd"}
					}
					b.StartTimer()
					var err error
					if how == "marks" {
						err = st.MarkDispatchedBatch(b.Context(), map[string][]string{"signalled": ids})
					} else {
						err = st.RecordDispatches(b.Context(), ds)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}
