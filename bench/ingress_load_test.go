package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/ingress"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// BenchmarkIngressOfferedLoad offers deliveries to the ingress on
// PostgreSQL at a fixed rate (open loop: a delivery is sent on schedule
// whether or not the earlier ones were answered) and reports the latency
// percentiles at each rate: the curve of the p99 goal (under 25 ms
// at 500 deliveries/s), on past 2,000/s to where the inbox's accept rate
// (BenchmarkIngressAccept) is reached. b.N deliveries per rate.
func BenchmarkIngressOfferedLoad(b *testing.B) {
	for _, rate := range []int{100, 250, 500, 1000, 2000, 5000, 10000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			lat, elapsed, failed := send(b, ingressServer(b, storetest.Open(b, store.Postgres)), b.N, 256, rate)
			if failed > 0 {
				b.Fatalf("%d of %d deliveries were not accepted", failed, b.N)
			}
			_ = report(b, lat, elapsed)
		})
	}
}

// ingressServer serves the ingress's handler on inbox, signed with the
// benchmarks' secret, over loopback HTTP until b ends, and returns its URL.
func ingressServer(b *testing.B, inbox ingress.Inbox) string {
	return ingressServerWith(b, ingress.Options{Inbox: inbox, EnvSecrets: []string{secret}})
}

// ingressServerWith serves the ingress's handler with o over loopback
// HTTP until b ends, and returns its URL.
func ingressServerWith(b *testing.B, o ingress.Options) string {
	srv := httptest.NewServer(ingress.NewHandler(o))
	b.Cleanup(srv.Close)
	return srv.URL
}

// noStore is the ingress without its store: every verified delivery is
// "recorded" at once (the rest of the Inbox, secrets and readiness, is a
// real store's). The handler is the same, so the rate it reaches is what
// HTTP, verification and parsing allow on this machine: the ceiling the
// inbox variants of BenchmarkIngressAccept are measured against.
type noStore struct{ *store.Store }

func (noStore) RecordEvent(context.Context, store.InboxEvent) (bool, error) { return true, nil }

// CommitWaitEnv, set to a duration (e.g. 1.5ms), adds a variant to
// BenchmarkIngressAccept between the ceiling and the inboxes: commitWait,
// a store that writes nothing but answers each delivery only at the end of
// a shared "commit" that takes that long, one at a time, as the group
// commit's do. It measures what waiting for a commit costs the handler and
// the senders apart from the database.
const CommitWaitEnv = "SITEOPS_BENCH_COMMIT_WAIT"

// commitWait is noStore whose RecordEvent returns at the end of the next
// commit: the first caller starts one, and every caller that queues while
// it lasts waits for the one after it.
type commitWait struct {
	noStore
	d time.Duration

	mu      sync.Mutex
	queued  []chan struct{}
	running bool
}

func (w *commitWait) RecordEvent(context.Context, store.InboxEvent) (bool, error) {
	done := make(chan struct{})
	w.mu.Lock()
	w.queued = append(w.queued, done)
	if !w.running {
		w.running = true
		go w.commits()
	}
	w.mu.Unlock()
	<-done
	return true, nil
}

// commits runs one commit after another while callers are queued.
func (w *commitWait) commits() {
	for {
		w.mu.Lock()
		batch := w.queued
		w.queued = nil
		if len(batch) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		time.Sleep(w.d)
		for _, done := range batch {
			close(done)
		}
	}
}

// send posts n distinct signed lead.created deliveries to url+"/webhooks"
// from at most workers concurrent senders; with rate > 0 the i-th is sent
// at start + i/rate (open loop), otherwise as fast as the senders go. It
// returns each delivery's latency (from its scheduled time, so queueing in
// the sender counts), the elapsed time and the number not answered 200.
func send(b *testing.B, url string, n, workers, rate int) ([]time.Duration, time.Duration, int64) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var failed atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				due := time.Now()
				if rate > 0 {
					due = start.Add(time.Duration(i) * time.Second / time.Duration(rate))
					time.Sleep(time.Until(due))
				}
				id := fmt.Sprintf("evt_%s_%08d", run, i)
				body := `{"id":"` + id + `","type":"lead.created","created_at":"2026-11-21T09:00:00.000Z","data":{"site_id":"site_` + id[len(id)-2:] + `","lead_id":"lead_1"}}`
				resp, err := hc.Do(signedDelivery(url, secret, id, webhook.LeadCreated, body))
				lat[i] = time.Since(due)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	return lat, elapsed, failed.Load()
}

// report reports the accept rate and the latency percentiles, and returns
// the rate.
func report(b *testing.B, lat []time.Duration, elapsed time.Duration) float64 {
	slices.Sort(lat)
	rate := float64(len(lat)) / elapsed.Seconds()
	b.ReportMetric(rate, "accepted/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	return rate
}

// signedDelivery is a POST of body to the ingress at url, with the
// headers of a delivery of the event id of type typ, signed with secret
// now.
func signedDelivery(url, secret, id string, typ webhook.EventType, body string) *http.Request {
	req, _ := http.NewRequest("POST", url+"/webhooks", strings.NewReader(body))
	req.Header.Set("svc-event-id", id)
	req.Header.Set("svc-event-type", string(typ))
	req.Header.Set("svc-signature", webhook.Sign(secret, time.Now(), []byte(body)))
	return req
}
