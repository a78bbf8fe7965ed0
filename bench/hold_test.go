package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/ingress"
	"github.com/siteops/siteops/ingress/ingresstest"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// forged is a delivery whose header is well formed and current but whose
// MAC is not made with any secret of the receiver.
func forged(path, id string) *http.Request {
	body := `{"id":"` + id + `","type":"lead.created","created_at":"2026-11-21T08:59:59.123Z","data":{"site_id":"site_1","lead_id":"lead_1"}}`
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("svc-signature", webhook.Sign("whsec_forged_by_someone", time.Now(), []byte(body)))
	req.Header.Set("svc-event-id", id)
	req.Header.Set("svc-event-type", "lead.created")
	return req
}

// BenchmarkForgedRequestStoreCalls measures what forged deliveries cost
// the store (issue 16, item 3; review item 5), in store calls per request
// and per second: reads of the list of every receiver
// (store.Store.Receivers, two SELECTs) and reads of one receiver's secrets
// or expectation (which the ingress no
// longer makes, counted so that a regression shows). b.N of them are sent by
// 32 concurrent senders to a receiver that has a stored secret, to one
// receiver nobody registered, and to receivers nobody registered (a new
// name each); and 32 at once (the handler's MaxHeld) to a receiver whose
// endpoint creation is in flight, where each is held for PendingWait (5 s)
// waiting for the new secret. A delivery to a receiver the list does not
// name, or that no listed secret verifies, waits for a read of the list
// that started after it arrived, and reads start at least 50 ms apart
// (Recheck): such deliveries cost at most 20 reads a second, however many
// come (store-calls/s), so a count per request falls as they come faster.
func BenchmarkForgedRequestStoreCalls(b *testing.B) {
	setup := func(b *testing.B) (*ingress.Handler, *ingresstest.CountingStore) {
		b.Helper()
		st := storetest.Open(b, store.SQLite)
		if err := st.PutSecret(context.Background(), "we_2", "v2", agentsite.NewSigningSecret("whsec_stored_for_v2")); err != nil {
			b.Fatal(err)
		}
		c := &ingresstest.CountingStore{Store: st}
		return ingress.NewHandler(ingress.Options{Inbox: c, Secrets: c}), c
	}
	perRequest := func(b *testing.B, c *ingresstest.CountingStore, requests int) {
		b.ReportMetric(float64(c.Calls())/float64(requests), "store-calls/req")
		b.Logf("%d forged requests: %d store calls (%d of the list, %d per receiver)", requests, c.Calls(), c.Lists.Load(), c.Secrets.Load()+c.Expectations.Load())
	}
	// flood sends b.N forged deliveries from 32 concurrent senders to the
	// paths path(i) and reports the store calls per request and second.
	flood := func(b *testing.B, path func(i int) string) {
		h, c := setup(b)
		var next atomic.Int64
		var wg sync.WaitGroup
		b.ResetTimer()
		for range 32 {
			wg.Go(func() {
				for i := int(next.Add(1)); i <= b.N; i = int(next.Add(1)) {
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, forged(path(i), fmt.Sprintf("evt_f%d", i)))
					if rec.Code != http.StatusUnauthorized {
						b.Errorf("forged delivery = %d, want 401", rec.Code)
						return
					}
				}
			})
		}
		wg.Wait()
		b.ReportMetric(float64(c.Calls())/b.Elapsed().Seconds(), "store-calls/s")
		perRequest(b, c, b.N)
	}
	b.Run("known receiver", func(b *testing.B) { flood(b, func(int) string { return "/webhooks/v2" }) })
	b.Run("one unknown receiver", func(b *testing.B) { flood(b, func(int) string { return "/webhooks/nobody" }) })
	b.Run("unknown receivers", func(b *testing.B) { flood(b, func(i int) string { return fmt.Sprintf("/webhooks/nobody-%d", i) }) })
	b.Run("held during a creation", func(b *testing.B) {
		scenario(b)
		const held = 32
		total := 0
		var c *ingresstest.CountingStore
		for range b.N {
			var h *ingress.Handler
			h, c = setup(b)
			if err := c.ExpectSecret(context.Background(), "v6", "create-v6", time.Now().Add(time.Minute)); err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			for i := range held {
				wg.Go(func() {
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, forged("/webhooks/v6", fmt.Sprintf("evt_h%d", i)))
					if rec.Code != http.StatusUnauthorized {
						b.Errorf("held forged delivery = %d, want 401 after the hold", rec.Code)
					}
				})
			}
			wg.Wait()
			total += held
		}
		perRequest(b, c, total/b.N)
	})
}
