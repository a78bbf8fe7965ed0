package webhookingress

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/telemetry/telemetrytest"
)

// untouchable is a body that fails the test if anything reads it.
type untouchable struct{ read atomic.Bool }

func (u *untouchable) Read([]byte) (int, error) {
	u.read.Store(true)
	return 0, io.ErrUnexpectedEOF
}

// TestRefusedBeforeTheBodyIsRead checks that what can be refused on the
// request line and the headers is refused without reading a byte of the
// body: a junk signature header, a stale timestamp, an unknown receiver, a
// declared length over the cap.
func TestRefusedBeforeTheBodyIsRead(t *testing.T) {
	f := newFixture(t, nil)
	good := webhook.Sign(envSecret, now, []byte("{}"))
	tests := []struct {
		name, path, sig string
		length          int64
		want            int
	}{
		{"junk header", "/webhooks", "t=1,v1=x", 100, 400},
		{"no header", "/webhooks", "", 100, 400},
		{"stale timestamp", "/webhooks", webhook.Sign(envSecret, now.Add(-time.Hour), []byte("{}")), 100, 401},
		{"unknown receiver", "/webhooks/nobody", good, 100, 404},
		{"declared length over the cap", "/webhooks", good, 1 << 30, 413},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := &untouchable{}
			req := httptest.NewRequest(http.MethodPost, tc.path, body)
			req.ContentLength = tc.length
			req.Header.Set("svc-signature", tc.sig)
			rec := httptest.NewRecorder()
			f.h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("status %d, want %d", rec.Code, tc.want)
			}
			if body.read.Load() {
				t.Errorf("the body was read before the request was refused")
			}
			if rec.Header().Get("Connection") != "close" {
				t.Errorf("a refused request keeps its connection (Connection: %q)", rec.Header().Get("Connection"))
			}
		})
	}
}

// TestConcurrentDeliveriesAreBounded checks MaxConcurrent: with its slots
// taken by deliveries whose bodies are slow to come, another is answered
// 503 after SlotWait, and accepted once a slot is free.
func TestConcurrentDeliveriesAreBounded(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	h := NewHandler(Options{Inbox: st, EnvSecrets: []string{envSecret}, MaxConcurrent: 2, SlotWait: 50 * time.Millisecond})
	var wg sync.WaitGroup
	var writers []*io.PipeWriter
	for i := range 2 {
		pr, pw := io.Pipe()
		writers = append(writers, pw)
		body := envelope("evt_slow"+string(rune('a'+i)), "lead.created")
		req := httptest.NewRequest(http.MethodPost, "/webhooks", pr)
		req.Header.Set("svc-signature", webhook.Sign(envSecret, time.Now(), []byte(body)))
		req.Header.Set("svc-event-id", "evt_slow"+string(rune('a'+i)))
		req.Header.Set("svc-event-type", "lead.created")
		wg.Go(func() { h.ServeHTTP(httptest.NewRecorder(), req) })
		t.Cleanup(func() { _ = pw.Close() })
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(h.slots) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d slots taken, want 2", len(h.slots))
		}
		time.Sleep(5 * time.Millisecond)
	}
	f := &fixture{h: h, st: st}
	if rec := f.send(t, delivery{id: "evt_third", at: time.Now()}); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "busy") {
		t.Errorf("a delivery with every slot taken = %d %s, want 503 busy", rec.Code, rec.Body)
	}
	for _, pw := range writers {
		_ = pw.CloseWithError(io.ErrUnexpectedEOF)
	}
	wg.Wait()
	if rec := f.send(t, delivery{id: "evt_fourth", at: time.Now()}); rec.Code != 200 {
		t.Errorf("a delivery once the slots are free = %d", rec.Code)
	}
}

// countingInbox counts the store reads a request may cause.
type countingInbox struct {
	*store.Store
	expectations atomic.Int64
	secrets      atomic.Int64
}

func (c *countingInbox) SecretExpectation(ctx context.Context, receiver string) (store.Expectation, error) {
	c.expectations.Add(1)
	return c.Store.SecretExpectation(ctx, receiver)
}

func (c *countingInbox) ActiveSecrets(ctx context.Context, receiver string) (store.ActiveSet, error) {
	c.secrets.Add(1)
	return c.Store.ActiveSecrets(ctx, receiver)
}

// TestUnknownReceiverAnswersAreCached checks that a flood of deliveries to
// a receiver nobody registered costs the store one read of its secrets and
// one of its expectation per cache period, not two queries per request.
func TestUnknownReceiverAnswersAreCached(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	c := &countingInbox{Store: st}
	clock := now
	h := NewHandler(Options{Inbox: c, Secrets: c, Now: func() time.Time { return clock }})
	f := &fixture{h: h, st: st}
	for i := range 200 {
		if rec := f.send(t, delivery{path: "/webhooks/nobody", id: "evt_" + string(rune('a'+i%26)), at: clock}); rec.Code != 404 {
			t.Fatalf("delivery %d to an unknown receiver = %d", i, rec.Code)
		}
	}
	if s, e := c.secrets.Load(), c.expectations.Load(); s != 1 || e != 1 {
		t.Errorf("200 deliveries to an unknown receiver read its secrets %d times and its expectation %d times; want 1 and 1", s, e)
	}
	clock = clock.Add(3 * time.Second) // past SecretRefresh and UnknownTTL
	f.send(t, delivery{path: "/webhooks/nobody", at: clock})
	if s, e := c.secrets.Load(), c.expectations.Load(); s != 2 || e != 2 {
		t.Errorf("after the cache periods: %d and %d reads; want 2 and 2", s, e)
	}
}

// TestHeldDeliveriesShareOnePoll checks that deliveries held while a
// receiver expects its secret poll the store together: one read per poll
// interval for the receiver, not one per held delivery.
func TestHeldDeliveriesShareOnePoll(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	c := &countingInbox{Store: st}
	const held, wait = 20, 500 * time.Millisecond
	h := NewHandler(Options{Inbox: c, Secrets: c, PendingWait: wait, MaxHeld: held})
	f := &fixture{h: h, st: st}
	if err := st.ExpectSecret(t.Context(), "v6", "create-v6", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	start := time.Now()
	for i := range held {
		wg.Go(func() {
			if rec := f.send(t, delivery{path: "/webhooks/v6", secret: "whsec_forged", id: "evt_h" + string(rune('a'+i)), at: time.Now()}); rec.Code != 404 {
				t.Errorf("forged held delivery = %d, want 404 after the hold", rec.Code)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	// One read per half poll interval at most, plus the first of each.
	limit := int64(took/(holdPoll/2)) + 2
	if e := c.expectations.Load(); e > limit {
		t.Errorf("%d held deliveries read the expectation %d times in %s; want at most %d (one poll for the receiver)", held, e, took.Round(time.Millisecond), limit)
	}
	if s := c.secrets.Load(); s > 2 {
		t.Errorf("%d held deliveries read the secrets %d times; want one shared read", held, s)
	}
	t.Logf("%d deliveries held for %s: %d expectation reads, %d secret reads", held, took.Round(time.Millisecond), c.expectations.Load(), c.secrets.Load())
}

// TestRejectionLogsAreClippedAndSampled checks that the sender's header
// values are clipped in the log, that at most LogsPerSecond rejections are
// logged each second, and that the metrics count every one.
func TestRejectionLogsAreClippedAndSampled(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	clock := now
	reg := prometheus.NewRegistry()
	h := NewHandler(Options{Inbox: st, EnvSecrets: []string{envSecret}, Now: func() time.Time { return clock }, Logger: logger, Metrics: NewMetrics(reg), LogsPerSecond: 5})
	f := &fixture{h: h, st: st}
	huge := "evt_" + strings.Repeat("A", 900_000)
	const n = 1000
	for range n {
		f.send(t, delivery{sigOver: "t=1,v1=x", headers: map[string]string{"svc-event-id": huge, "svc-event-type": huge}})
	}
	mu.Lock()
	text := logs.String()
	mu.Unlock()
	if lines := strings.Count(text, "\n"); lines != 5 {
		t.Errorf("%d rejections in one second logged %d lines; want 5", n, lines)
	}
	if len(text) > 5*1024 {
		t.Errorf("5 log lines take %d bytes; the sender's values are not clipped", len(text))
	}
	if got := telemetrytest.Value(t, reg, "siteops_webhook_deliveries_total", "outcome", "rejected", "reason", "malformed_signature_header"); got != n {
		t.Errorf("rejected = %v, want %d", got, n)
	}
	if got := telemetrytest.Value(t, reg, "siteops_webhook_rejection_logs_suppressed_total"); got != n-5 {
		t.Errorf("suppressed = %v, want %d", got, n-5)
	}
	clock = clock.Add(time.Second)
	f.send(t, delivery{sigOver: "t=1,v1=x"})
	mu.Lock()
	text = logs.String()
	mu.Unlock()
	if !strings.Contains(text, "rejections_not_logged=995") {
		t.Errorf("the next second's first line does not say how many were left out:\n%s", text[max(0, len(text)-400):])
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestVerifiedMalformedBodyIsRecorded checks item 10 of the hardening: a
// delivery that verifies but whose body is not an envelope siteops can
// read is kept as it came with the outcome malformed, answered 200 (a retry
// cannot help), never dispatched, and a retry of it is a duplicate. It
// does not claim the id in its svc-event-id header.
func TestVerifiedMalformedBodyIsRecorded(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	bodies := []string{
		`{"id":"evt_m1","type":"lead.created","created_at":"2026-21-11T09:00:00Z","data":{"site_id":"s","lead_id":"l"}}`,
		`{"id":"evt_m2","id":"evt_m3","type":"lead.created","created_at":"2026-11-21T09:00:00.000Z","data":{}}`,
	}
	for i, body := range bodies {
		d := delivery{id: "evt_m" + string(rune('1'+i)), body: body}
		if rec := f.send(t, d); rec.Code != http.StatusOK {
			t.Fatalf("verified malformed body %d = %d %s, want 200", i, rec.Code, rec.Body)
		}
		d.at = now.Add(time.Minute) // the sender's retry, signed anew
		if rec := f.send(t, d); rec.Code != http.StatusNoContent {
			t.Errorf("retry of malformed body %d = %d, want 204", i, rec.Code)
		}
	}
	page, err := f.st.ListEvents(ctx, store.EventFilter{Status: OutcomeMalformed})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 2 {
		t.Fatalf("events with the outcome malformed: %d, want 2", len(page.Events))
	}
	for _, ev := range page.Events {
		if !strings.HasPrefix(ev.EventID, MalformedEventIDPrefix) || ev.EventType != "lead.created" || ev.EndpointID != EnvEndpoint || !strings.Contains(ev.LastError, "svc-event-id evt_m") {
			t.Errorf("recorded %+v", ev)
		}
	}
	for _, lane := range []store.Lane{store.LanePriority, store.LaneBulk} {
		if evs, err := f.st.ClaimEvents(ctx, lane, 10, time.Minute); err != nil || len(evs) != 0 {
			t.Errorf("the relay could claim %d malformed records (%v)", len(evs), err)
		}
	}
	// The header's id was not taken: the real event is still new.
	if rec := f.send(t, delivery{id: "evt_m1"}); rec.Code != http.StatusOK {
		t.Errorf("the real evt_m1 after a malformed body named it = %d, want 200", rec.Code)
	}
	if n := telemetrytest.Value(t, f.reg, "siteops_webhook_deliveries_total", "outcome", "malformed", "reason", ""); n != 2 {
		t.Errorf("deliveries{malformed} = %v, want 2", n)
	}
}

// TestEventIDsAreUniqueAcrossReceivers records the decision of item 9: the
// contract makes the event id the deduplication key of the service's
// events, and has a receiver in a rotation "accept and deduplicate events
// from both endpoints" — the old and the new endpoint, on two receiver
// paths. An event id is therefore recorded once per siteops deployment,
// whichever receiver it reaches first; the second answer is 204.
func TestEventIDsAreUniqueAcrossReceivers(t *testing.T) {
	f := newFixture(t, nil)
	if rec := f.send(t, delivery{path: "/webhooks/v2", secret: storedSecret, id: "evt_both"}); rec.Code != 200 {
		t.Fatalf("through the new endpoint = %d", rec.Code)
	}
	if rec := f.send(t, delivery{path: "/webhooks", secret: envSecret, id: "evt_both"}); rec.Code != 204 {
		t.Errorf("the same event through the old endpoint = %d, want 204 (one record per event id)", rec.Code)
	}
}
