package webhookingress

import (
	"bytes"
	"context"
	"fmt"
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

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/telemetry/telemetrytest"
	"github.com/siteops/siteops/webhookingress/ingresstest"
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

// undeclared hides a body's length from httptest.NewRequest, as a chunked
// upload does.
type undeclared struct{ io.Reader }

// TestConcurrentDeliveriesAreBounded checks MaxConcurrent: with its slots
// taken by deliveries whose bodies are slow to come (of undeclared length,
// as a chunked upload), another such delivery is answered 503 after
// SlotWait, and accepted once a slot is free; a delivery of a declared
// small body meanwhile is accepted at once, in its own lane.
func TestConcurrentDeliveriesAreBounded(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	h := NewHandler(Options{Inbox: st, EnvSecrets: []string{envSecret}, MaxConcurrent: 2, MaxConcurrentSmall: 2, SlotWait: 50 * time.Millisecond})
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
	sendUndeclared := func(id string) *httptest.ResponseRecorder {
		t.Helper()
		body := envelope(id, "lead.created")
		req := httptest.NewRequest(http.MethodPost, "/webhooks", undeclared{strings.NewReader(body)})
		req.Header.Set("svc-signature", webhook.Sign(envSecret, time.Now(), []byte(body)))
		req.Header.Set("svc-event-id", id)
		req.Header.Set("svc-event-type", "lead.created")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := sendUndeclared("evt_third"); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "busy") {
		t.Errorf("a delivery with every slot of its lane taken = %d %s, want 503 busy", rec.Code, rec.Body)
	}
	f := &fixture{h: h, st: st}
	if rec := f.send(t, delivery{id: "evt_small", at: time.Now()}); rec.Code != http.StatusOK {
		t.Errorf("a small declared delivery while the other lane is full = %d %s, want 200", rec.Code, rec.Body)
	}
	for _, pw := range writers {
		_ = pw.CloseWithError(io.ErrUnexpectedEOF)
	}
	wg.Wait()
	if rec := sendUndeclared("evt_fourth"); rec.Code != 200 {
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
	deadline := time.Now().Add(5 * time.Second)
	for len(h.slots) < DefaultMaxConcurrent {
		if time.Now().After(deadline) {
			t.Fatalf("the forged uploads took %d of %d slots, want all", len(h.slots), DefaultMaxConcurrent)
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
		if resp.StatusCode != http.StatusOK || took > time.Second {
			t.Errorf("valid delivery %d during the slow forged uploads = %d after %s; want 200 within 1 s", i, resp.StatusCode, took.Round(time.Millisecond))
		}
	}
	// By now (4 s and more into the attack) slow bodies have been cut. A
	// connection's time includes its wait for a slot (16 clients at the cap
	// wait for one); the shortest is a body that had a slot at once.
	nl, sl, ll := ingresstest.Drain(heldLarge)
	ns, ss, ls := ingresstest.Drain(heldSmall)
	// Every slot's body is cut by now, but a loaded machine may not have
	// told every uploader yet: give them up to 5 s more.
	for wait := time.Now().Add(5 * time.Second); nl < DefaultMaxConcurrent && time.Now().Before(wait); {
		time.Sleep(50 * time.Millisecond)
		n, s, l := ingresstest.Drain(heldLarge)
		if n > 0 && (sl == 0 || s < sl) {
			sl = s
		}
		nl, ll = nl+n, max(ll, l)
	}
	t.Logf("valid deliveries: worst %s; slow bodies cut: %d at the cap (held %s to %s), %d small (held %s to %s)",
		worst.Round(time.Millisecond), nl, sl.Round(time.Millisecond), ll.Round(time.Millisecond), ns, ss.Round(time.Millisecond), ls.Round(time.Millisecond))
	if nl < DefaultMaxConcurrent || sl < 2500*time.Millisecond || sl > 4*time.Second {
		t.Errorf("slow bodies at the cap: %d cut, the shortest held %s; want every slot's body cut after about 3 s", nl, sl)
	}
	if ns == 0 || ss < DefaultBodyTimeout-200*time.Millisecond || ls > DefaultBodyTimeout+time.Second {
		t.Errorf("slow small bodies: %d cut, held %s to %s; want them cut after about %s", ns, ss, ls, DefaultBodyTimeout)
	}
}

// namedStore holds one receiver's secret, in memory, answers every other
// receiver with none and no expectation, and counts the reads of each.
type namedStore struct {
	*store.Store // the inbox
	receiver     string
	secret       string

	mu                    sync.Mutex
	secretReads, expReads map[string]int
}

func (n *namedStore) ActiveSecrets(_ context.Context, receiver string) (store.ActiveSet, error) {
	n.mu.Lock()
	n.secretReads[receiver]++
	n.mu.Unlock()
	if receiver != n.receiver {
		return store.ActiveSet{}, nil
	}
	return store.ActiveSet{Infos: []store.SecretInfo{{EndpointID: "we_known", Receiver: receiver}},
		Secrets: []agentsite.SigningSecret{agentsite.NewSigningSecret(n.secret)}}, nil
}

func (n *namedStore) SecretExpectation(_ context.Context, receiver string) (store.Expectation, error) {
	n.mu.Lock()
	n.expReads[receiver]++
	n.mu.Unlock()
	return store.Expectation{}, nil
}

func (n *namedStore) reads(receiver string) (secrets, exps int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.secretReads[receiver], n.expReads[receiver]
}

// TestUnknownReceiversNeitherGrowNorEvictTheCache sends deliveries to more
// than twice as many made-up receiver names as the cache of unknown ones
// holds: what is cached stays bounded, and the receiver that exists keeps
// its cached secrets and expectation (no read of the store for it), where
// a full cache used to be emptied for everyone.
func TestUnknownReceiversNeitherGrowNorEvictTheCache(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	n := &namedStore{Store: st, receiver: "v2", secret: storedSecret, secretReads: map[string]int{}, expReads: map[string]int{}}
	h := NewHandler(Options{Inbox: n, Secrets: n, Now: func() time.Time { return now }}) // the clock stands still: nothing expires
	f := &fixture{h: h, st: st}
	known := func(id string, secret string, want int) {
		t.Helper()
		if rec := f.send(t, delivery{path: "/webhooks/v2", secret: secret, id: id}); rec.Code != want {
			t.Fatalf("delivery %s to the known receiver = %d, want %d", id, rec.Code, want)
		}
	}
	known("evt_k1", storedSecret, http.StatusOK)
	known("evt_k2", "whsec_forged", http.StatusUnauthorized) // reads its expectation
	const names = 9000                                       // more than twice the 4,096 cached
	for i := range names {
		if rec := f.send(t, delivery{path: fmt.Sprintf("/webhooks/made-up-%d", i), id: "evt_x"}); rec.Code != http.StatusNotFound {
			t.Fatalf("delivery to made-up receiver %d = %d, want 404", i, rec.Code)
		}
	}
	known("evt_k3", storedSecret, http.StatusOK)
	known("evt_k4", "whsec_forged", http.StatusUnauthorized)
	if s, e := n.reads("v2"); s != 1 || e != 1 {
		t.Errorf("after %d made-up receivers the known one was read again: %d secret reads and %d expectation reads, want 1 and 1", names, s, e)
	}
	h.secrets.mu.Lock()
	unknown, known2, unread := h.secrets.unknown.len(), len(h.secrets.known)+len(h.secrets.knownExps), len(h.secrets.unreadSeen)
	h.secrets.mu.Unlock()
	if unknown > maxUnknown || known2 > 2 || unread != 0 {
		t.Errorf("after %d made-up receivers the caches hold %d unknown, %d known and %d unreadable-report entries; want at most %d, 2 and 0",
			names, unknown, known2, unread, maxUnknown)
	}
}

// TestUnknownReceiverAnswersAreCached checks that a flood of deliveries to
// a receiver nobody registered costs the store one read of its secrets and
// one of its expectation per cache period, not two queries per request.
func TestUnknownReceiverAnswersAreCached(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	c := &ingresstest.CountingStore{Store: st}
	clock := now
	h := NewHandler(Options{Inbox: c, Secrets: c, Now: func() time.Time { return clock }})
	f := &fixture{h: h, st: st}
	for i := range 200 {
		if rec := f.send(t, delivery{path: "/webhooks/nobody", id: "evt_" + string(rune('a'+i%26)), at: clock}); rec.Code != 404 {
			t.Fatalf("delivery %d to an unknown receiver = %d", i, rec.Code)
		}
	}
	if s, e := c.Secrets.Load(), c.Expectations.Load(); s != 1 || e != 1 {
		t.Errorf("200 deliveries to an unknown receiver read its secrets %d times and its expectation %d times; want 1 and 1", s, e)
	}
	clock = clock.Add(3 * time.Second) // past SecretRefresh and UnknownTTL
	f.send(t, delivery{path: "/webhooks/nobody", at: clock})
	if s, e := c.Secrets.Load(), c.Expectations.Load(); s != 2 || e != 2 {
		t.Errorf("after the cache periods: %d and %d reads; want 2 and 2", s, e)
	}
}

// TestHeldDeliveriesShareOnePoll checks that deliveries held while a
// receiver expects its secret poll the store together: one read per poll
// interval for the receiver, not one per held delivery.
func TestHeldDeliveriesShareOnePoll(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	c := &ingresstest.CountingStore{Store: st}
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
	if e := c.Expectations.Load(); e > limit {
		t.Errorf("%d held deliveries read the expectation %d times in %s; want at most %d (one poll for the receiver)", held, e, took.Round(time.Millisecond), limit)
	}
	if s := c.Secrets.Load(); s > 2 {
		t.Errorf("%d held deliveries read the secrets %d times; want one shared read", held, s)
	}
	t.Logf("%d deliveries held for %s: %d expectation reads, %d secret reads", held, took.Round(time.Millisecond), c.Expectations.Load(), c.Secrets.Load())
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
