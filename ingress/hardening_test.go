package ingress

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/ingress/ingresstest"
	"github.com/siteops/siteops/internal/siteopstest"
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
// body: a junk signature header, a stale timestamp, a receiver name out of
// form (answered as a bad signature), a declared length over the cap. A
// receiver that does not exist is not among them: it is answered after its
// body, as a forged delivery to one that does
// (TestUnknownAndDamagedReceiversAnswerAlike).
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
		{"receiver name out of form", "/webhooks/-nobody", good, 100, 401},
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

// blockingInbox is an inbox whose RecordEvent waits until release is
// closed, as a slow store does, and counts the records under way.
type blockingInbox struct {
	*store.Store
	release chan struct{}
	waiting atomic.Int64
}

func (b *blockingInbox) RecordEvent(ctx context.Context, ev store.InboxEvent) (bool, error) {
	b.waiting.Add(1)
	defer b.waiting.Add(-1)
	<-b.release
	return b.Store.RecordEvent(ctx, ev)
}

// TestConcurrentDeliveriesAreBounded checks the slots: with a lane's slots
// taken by deliveries whose record is slow, another delivery of that lane
// is answered 503 (with Retry-After) after SlotWait, while a delivery of
// the other lane is accepted; once the slots are free, deliveries are
// accepted again. A body still arriving takes no slot at all.
func TestConcurrentDeliveriesAreBounded(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	in := &blockingInbox{Store: st, release: make(chan struct{})}
	h := NewHandler(Options{Inbox: in, EnvSecrets: []string{envSecret}, MaxConcurrent: 2, MaxConcurrentSmall: 2, SlotWait: 50 * time.Millisecond, MaxBody: 64 << 10, Now: func() time.Time { return now }})
	f := &fixture{h: h, st: st}

	// Two bodies still arriving take no slot.
	for range 2 {
		pr, pw := io.Pipe()
		t.Cleanup(func() { _ = pw.CloseWithError(io.ErrUnexpectedEOF) })
		req := httptest.NewRequest(http.MethodPost, "/webhooks", pr)
		req.ContentLength = 300
		req.Header.Set("svc-signature", webhook.Sign(envSecret, now, []byte("x")))
		go h.ServeHTTP(httptest.NewRecorder(), req)
	}
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			if rec := f.send(t, delivery{id: fmt.Sprintf("evt_slow_%d", i)}); rec.Code != http.StatusOK {
				t.Errorf("slow record %d = %d, want 200 once the store answers", i, rec.Code)
			}
		})
	}
	deadline := time.Now().Add(2 * time.Second)
	for in.waiting.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries reached the slow store, want 2 (the small lane's slots): bodies still arriving took slots", in.waiting.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if rec := f.send(t, delivery{id: "evt_third"}); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "busy") || rec.Header().Get("Retry-After") == "" {
		t.Errorf("a delivery with every slot of its lane taken = %d %s (Retry-After %q), want 503 busy with Retry-After", rec.Code, rec.Body, rec.Header().Get("Retry-After"))
	}
	large := `{"id":"evt_large","type":"lead.created","created_at":"2026-11-21T08:59:59.123Z","data":{"pad":"` + strings.Repeat("x", SmallBody) + `"}}`
	done := make(chan int, 1)
	go func() { done <- f.send(t, delivery{id: "evt_large", body: large}).Code }()
	deadline = time.Now().Add(2 * time.Second)
	for in.waiting.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("a large delivery while the small lane is full did not reach the store")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(in.release)
	wg.Wait()
	if code := <-done; code != http.StatusOK {
		t.Errorf("the large delivery = %d, want 200", code)
	}
	if rec := f.send(t, delivery{id: "evt_fourth"}); rec.Code != http.StatusOK {
		t.Errorf("a delivery once the slots are free = %d", rec.Code)
	}
}

// TestSlowForgedBodiesDoNotDelayValidDeliveries is the attack the checks
// before the body cannot stop: deliveries whose header is well formed and
// current, to a receiver that exists, whose bodies are then uploaded a byte
// at a time. More of them than there are slots, declaring bodies at the cap
// and small ones, run against a real server with the default limits. A slow
// body is cut after its deadline (about 1 s small, 3 s at the cap), and a
// valid delivery sent meanwhile is answered 200 within 1 s.
func TestSlowForgedBodiesDoNotDelayValidDeliveries(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	h := NewHandler(Options{Inbox: st, EnvSecrets: []string{envSecret}})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	const perLane = DefaultMaxConcurrent + 16
	heldLarge, heldSmall := make(chan time.Duration, 4*perLane), make(chan time.Duration, 4*perLane)
	for range perLane {
		wg.Go(func() { ingresstest.SlowForgedUpload(ctx, addr, DefaultMaxBody, heldLarge) })
		wg.Go(func() { ingresstest.SlowForgedUpload(ctx, addr, 400, heldSmall) })
	}
	// Each large body being read holds its first 1 KiB of the budget.
	deadline := time.Now().Add(5 * time.Second)
	for h.budget.inUse() < perLane*firstRead {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes of large bodies being read, want %d: the forged uploads did not all start", h.budget.inUse(), perLane*firstRead)
		}
		time.Sleep(10 * time.Millisecond)
	}

	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	var worst time.Duration
	pace := time.NewTicker(250 * time.Millisecond) // a valid delivery every quarter second
	defer pace.Stop()
	for i := range 16 {
		<-pace.C
		id := fmt.Sprintf("evt_valid_%d", i)
		body := envelope(id, "lead.created")
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/webhooks", strings.NewReader(body))
		req.Header.Set("svc-signature", webhook.Sign(envSecret, time.Now(), []byte(body)))
		req.Header.Set("svc-event-id", id)
		req.Header.Set("svc-event-type", "lead.created")
		t0 := time.Now()
		resp, err := hc.Do(req)
		took := time.Since(t0)
		if err != nil {
			t.Fatalf("valid delivery %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		worst = max(worst, took)
		if bound := siteopstest.Bound(time.Second); resp.StatusCode != http.StatusOK || took > bound {
			t.Errorf("valid delivery %d during the slow forged uploads = %d after %s; want 200 within %s", i, resp.StatusCode, took.Round(time.Millisecond), bound)
		}
	}
	// By now (4 s and more into the attack) every slow body has been cut
	// once: none waited for a slot.
	nl, sl, ll := ingresstest.Drain(heldLarge)
	ns, ss, ls := ingresstest.Drain(heldSmall)
	// A loaded machine may not have told every uploader yet: give them up
	// to 5 s more.
	for wait := time.Now().Add(5 * time.Second); nl < perLane && time.Now().Before(wait); {
		time.Sleep(50 * time.Millisecond)
		n, s, l := ingresstest.Drain(heldLarge)
		if n > 0 && (sl == 0 || s < sl) {
			sl = s
		}
		nl, ll = nl+n, max(ll, l)
	}
	t.Logf("valid deliveries: worst %s; slow bodies cut: %d at the cap (held %s to %s), %d small (held %s to %s)",
		worst.Round(time.Millisecond), nl, sl.Round(time.Millisecond), ll.Round(time.Millisecond), ns, ss.Round(time.Millisecond), ls.Round(time.Millisecond))
	if nl < perLane || sl < 2500*time.Millisecond || ll > siteopstest.Bound(4500*time.Millisecond) {
		t.Errorf("slow bodies at the cap: %d cut, held %s to %s; want all %d cut after about 3 s", nl, sl, ll, perLane)
	}
	if ns == 0 || ss < DefaultBodyTimeout-200*time.Millisecond || ls > DefaultBodyTimeout+siteopstest.Bound(time.Second) {
		t.Errorf("slow small bodies: %d cut, held %s to %s; want them cut after about %s", ns, ss, ls, DefaultBodyTimeout)
	}
}

// TestUnknownReceiversCostNoRead is item 5 of the review: 500 forged
// deliveries (a current, well-formed header; a MAC of no secret) to random
// receiver names, 25 at a time, are each refused 401 (after their body, as
// a forged delivery to a receiver that exists), from the list of
// receivers, at a cost to the store of at most one
// read of the list per Recheck in all — not a read per request (before:
// two per request, its secrets and its expectation) — and the handler
// keeps nothing of the names; the receiver that exists still verifies.
func TestUnknownReceiversCostNoRead(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	if err := st.PutSecret(t.Context(), "we_2", "v2", agentsite.NewSigningSecret(storedSecret)); err != nil {
		t.Fatal(err)
	}
	c := &ingresstest.CountingStore{Store: st}
	h := NewHandler(Options{Inbox: st, Secrets: c})
	f := &fixture{h: h, st: st}
	if rec := f.send(t, delivery{path: "/webhooks/v2", secret: storedSecret, id: "evt_k1", at: time.Now()}); rec.Code != http.StatusOK {
		t.Fatalf("the known receiver = %d, want 200", rec.Code)
	}
	const forged, senders = 500, 25
	var wg sync.WaitGroup
	start := time.Now()
	for range senders {
		wg.Go(func() {
			for range forged / senders {
				path := fmt.Sprintf("/webhooks/r%x", rand.Uint64())
				if rec := f.send(t, delivery{path: path, secret: "whsec_forged", id: "evt_x", at: time.Now()}); rec.Code != http.StatusUnauthorized {
					t.Errorf("forged delivery to %s = %d, want 401", path, rec.Code)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	limit := int64(took/DefaultRecheck) + 2
	lists, per := c.Lists.Load(), c.Secrets.Load()+c.Expectations.Load()
	t.Logf("%d forged deliveries to random receivers in %s: %d reads of the list", forged, took.Round(time.Millisecond), lists)
	if lists > limit || per != 0 {
		t.Errorf("%d forged deliveries to random receivers in %s cost %d reads of the list and %d per receiver; want at most %d (one per %s) and 0",
			forged, took.Round(time.Millisecond), lists, per, limit, DefaultRecheck)
	}
	if rec := f.send(t, delivery{path: "/webhooks/v2", secret: storedSecret, id: "evt_k2", at: time.Now()}); rec.Code != http.StatusOK {
		t.Errorf("the known receiver after them = %d, want 200", rec.Code)
	}
	h.secrets.mu.Lock()
	listed, reported := len(h.secrets.last.list), len(h.secrets.reported)
	h.secrets.mu.Unlock()
	if listed != 1 || reported != 0 {
		t.Errorf("after %d made-up receivers the handler lists %d receivers and remembers %d unreadable reports; want 1 and 0", forged, listed, reported)
	}
}

// TestReceiverListIsReadOncePerRefresh checks that deliveries to receivers
// the list names cost the store one read of the list per SecretRefresh,
// however many come.
func TestReceiverListIsReadOncePerRefresh(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	if err := st.PutSecret(t.Context(), "we_2", "v2", agentsite.NewSigningSecret(storedSecret)); err != nil {
		t.Fatal(err)
	}
	c := &ingresstest.CountingStore{Store: st}
	clock := now
	h := NewHandler(Options{Inbox: st, Secrets: c, EnvSecrets: []string{envSecret}, Now: func() time.Time { return clock }})
	f := &fixture{h: h, st: st}
	for i := range 200 {
		path, secret := "/webhooks", envSecret
		if i%2 == 1 {
			path, secret = "/webhooks/v2", storedSecret
		}
		if rec := f.send(t, delivery{path: path, secret: secret, id: fmt.Sprintf("evt_%d", i), at: clock}); rec.Code != http.StatusOK {
			t.Fatalf("delivery %d = %d", i, rec.Code)
		}
		clock = clock.Add(4 * time.Millisecond) // 800 ms in all: within the refresh
	}
	if n := c.Calls(); n != 1 {
		t.Errorf("200 deliveries within the refresh read the store %d times; want 1", n)
	}
	clock = clock.Add(DefaultSecretRefresh)
	f.send(t, delivery{id: "evt_next", at: clock})
	if n := c.Calls(); n != 2 {
		t.Errorf("after the refresh period: %d reads, want 2", n)
	}
}

// TestHeldDeliveriesShareOnePoll checks that deliveries held while a
// receiver expects its secret poll the store together: one read of the
// list per half poll interval, not one per held delivery.
func TestHeldDeliveriesShareOnePoll(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	c := &ingresstest.CountingStore{Store: st}
	const held, wait = 20, 500 * time.Millisecond
	h := NewHandler(Options{Inbox: st, Secrets: c, PendingWait: wait, MaxHeld: held})
	f := &fixture{h: h, st: st}
	if err := st.ExpectSecret(t.Context(), "v6", "create-v6", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	start := time.Now()
	for i := range held {
		wg.Go(func() {
			if rec := f.send(t, delivery{path: "/webhooks/v6", secret: "whsec_forged", id: "evt_h" + string(rune('a'+i)), at: time.Now()}); rec.Code != 401 {
				t.Errorf("forged held delivery = %d, want 401 after the hold", rec.Code)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	// One read per half poll interval at most, plus the first.
	limit := int64(took/(holdPoll/2)) + 2
	if n := c.Lists.Load(); n > limit {
		t.Errorf("%d held deliveries read the list %d times in %s; want at most %d (one poll for all)", held, n, took.Round(time.Millisecond), limit)
	}
	if n := c.Secrets.Load() + c.Expectations.Load(); n != 0 {
		t.Errorf("%d held deliveries made %d reads per receiver; want none", held, n)
	}
	t.Logf("%d deliveries held for %s: %d reads of the list", held, took.Round(time.Millisecond), c.Lists.Load())
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
	page, err := f.st.ListEvents(ctx, store.EventFilter{Status: store.OutcomeMalformed})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 2 {
		t.Fatalf("events with the outcome malformed: %d, want 2", len(page.Events))
	}
	for _, ev := range page.Events {
		if !strings.HasPrefix(ev.EventID, MalformedEventIDPrefix) || ev.EventType != "lead.created" || ev.EndpointID != store.EnvEndpoint || !strings.Contains(ev.LastError, "svc-event-id evt_m") {
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

// TestHeaderMismatchIsRecordedUnderTheBodyID is item 10 of the review: a
// verified delivery whose unsigned svc-event-id or svc-event-type header
// differs from its signed body is recorded under the body's id and type
// and answered as any new event (200, then 204 for the retry), never
// refused (the sender would retry it with the same headers until it
// dropped the event). The mismatch is counted per header and logged with
// the headers clipped, at the rejections' rate; the header's id is not
// claimed.
func TestHeaderMismatchIsRecordedUnderTheBodyID(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	var logs bytes.Buffer
	var mu sync.Mutex
	reg := prometheus.NewRegistry()
	h := NewHandler(Options{Inbox: st, EnvSecrets: []string{envSecret}, Now: func() time.Time { return now }, Metrics: NewMetrics(reg), Registry: reg,
		Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil)), LogsPerSecond: 2})
	f := &fixture{h: h, st: st, reg: reg}
	huge := "evt_" + strings.Repeat("H", 10_000)
	if rec := f.send(t, delivery{id: huge, body: envelope("evt_body_1", "lead.created")}); rec.Code != http.StatusOK {
		t.Fatalf("verified body with another header id = %d %s, want 200", rec.Code, rec.Body)
	}
	if rec := f.send(t, delivery{id: "evt_body_1", typ: "site.published", body: envelope("evt_body_1", "lead.created"), at: now.Add(time.Second)}); rec.Code != http.StatusNoContent {
		t.Errorf("its retry with another header type = %d, want 204 (a duplicate of the body's id)", rec.Code)
	}
	for i := range 3 {
		f.send(t, delivery{id: fmt.Sprintf("evt_h%d", i), body: envelope(fmt.Sprintf("evt_b%d", i), "lead.created")})
	}
	if _, _, err := st.InboxOutcome(t.Context(), "evt_body_1"); err != nil {
		t.Errorf("the body's id is not in the inbox: %v", err)
	}
	page, err := st.ListEvents(t.Context(), store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range page.Events {
		if !strings.HasPrefix(ev.EventID, "evt_b") || ev.EventType != "lead.created" {
			t.Errorf("recorded %s (%s); want only the bodies' ids and types", ev.EventID, ev.EventType)
		}
	}
	if len(page.Events) != 4 {
		t.Errorf("%d events recorded, want 4", len(page.Events))
	}
	if n := telemetrytest.Value(t, reg, "siteops_webhook_header_mismatches_total", "header", "svc-event-id"); n != 4 {
		t.Errorf("header_mismatches{svc-event-id} = %v, want 4", n)
	}
	if n := telemetrytest.Value(t, reg, "siteops_webhook_header_mismatches_total", "header", "svc-event-type"); n != 1 {
		t.Errorf("header_mismatches{svc-event-type} = %v, want 1", n)
	}
	if n := telemetrytest.Value(t, reg, "siteops_webhook_deliveries_total", "outcome", "accepted"); n != 4 {
		t.Errorf("accepted = %v, want 4", n)
	}
	mu.Lock()
	text := logs.String()
	mu.Unlock()
	if n := strings.Count(text, "webhook headers differ from the signed body"); n != 2 {
		t.Errorf("%d mismatch lines logged in one second, want 2 (LogsPerSecond)", n)
	}
	if strings.Contains(text, strings.Repeat("H", 100)) || !strings.Contains(text, "header_event_id=") {
		t.Errorf("the header's id is not logged clipped:\n%s", text[:min(len(text), 600)])
	}
}

// TestStoreFailureLogsAreSampled is item 12 of the review: store failures
// are logged at most LogsPerSecond times a second, apart from rejections,
// the next line logged says how many were left out, a metric counts them,
// and every one is answered 503 with Retry-After.
func TestStoreFailureLogsAreSampled(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	var logs bytes.Buffer
	var mu sync.Mutex
	clock := now
	reg := prometheus.NewRegistry()
	h := NewHandler(Options{Inbox: downInbox{}, EnvSecrets: []string{envSecret}, Now: func() time.Time { return clock }, Metrics: NewMetrics(reg), Registry: reg,
		Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil)), LogsPerSecond: 3})
	f := &fixture{h: h, st: st, reg: reg}
	const n = 50
	for i := range n {
		rec := f.send(t, delivery{id: fmt.Sprintf("evt_%d", i), at: clock})
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("delivery %d with the store down = %d (Retry-After %q), want 503 with Retry-After", i, rec.Code, rec.Header().Get("Retry-After"))
		}
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return strings.Count(logs.String(), "level=ERROR")
	}
	if got := count(); got != 3 {
		t.Errorf("%d store failures in one second logged %d error lines; want 3", n, got)
	}
	if got := telemetrytest.Value(t, reg, "siteops_webhook_error_logs_suppressed_total"); got != n-3 {
		t.Errorf("error_logs_suppressed = %v, want %d", got, n-3)
	}
	if got := telemetrytest.Value(t, reg, "siteops_webhook_deliveries_total", "outcome", "rejected", "reason", "store_unavailable"); got != n {
		t.Errorf("rejected{store_unavailable} = %v, want %d", got, n)
	}
	clock = clock.Add(time.Second)
	f.send(t, delivery{id: "evt_next", at: clock})
	mu.Lock()
	text := logs.String()
	mu.Unlock()
	if !strings.Contains(text, "errors_not_logged=47") {
		t.Errorf("the next second's first error line does not say how many were left out:\n%s", text[max(0, len(text)-400):])
	}
}

// TestUnknownReceiverAnswersAsABadSignature records the decision of item
// 12: a delivery to a receiver that does not exist gets the very answer of
// a delivery that no secret of an existing receiver verifies (401, the
// same body and headers), so that probing the answers does not list the
// receivers; the metric and the log keep unknown_receiver for operators.
func TestUnknownReceiverAnswersAsABadSignature(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	f := newFixture(t, nil)
	f.h.opts.Logger = slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	unknown := f.send(t, delivery{path: "/webhooks/nobody", secret: "whsec_forged"})
	forged := f.send(t, delivery{path: "/webhooks/v2", secret: "whsec_forged"})
	if unknown.Code != http.StatusUnauthorized || unknown.Code != forged.Code || unknown.Body.String() != forged.Body.String() {
		t.Errorf("unknown receiver = %d %q, forged to a known one = %d %q; want the same 401", unknown.Code, unknown.Body, forged.Code, forged.Body)
	}
	for _, k := range []string{"Content-Type", "Connection", "Retry-After"} {
		if unknown.Header().Get(k) != forged.Header().Get(k) {
			t.Errorf("%s: %q for an unknown receiver, %q for a forged delivery", k, unknown.Header().Get(k), forged.Header().Get(k))
		}
	}
	for _, reason := range []string{"unknown_receiver", "invalid_signature"} {
		if n := telemetrytest.Value(t, f.reg, "siteops_webhook_deliveries_total", "outcome", "rejected", "reason", reason); n != 1 {
			t.Errorf("rejected{%s} = %v, want 1", reason, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "reason=unknown_receiver") {
		t.Errorf("the log does not name the unknown receiver:\n%s", logs.String())
	}
}
