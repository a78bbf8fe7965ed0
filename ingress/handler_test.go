package ingress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
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

var now = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

const (
	envSecret    = "whsec_env_secret"
	storedSecret = "whsec_stored_secret_v2"
)

// downInbox fails every write, as a store that is down does.
type downInbox struct{}

func (downInbox) RecordEvent(context.Context, store.InboxEvent) (bool, error) {
	return false, errors.New("connection refused")
}
func (downInbox) RecordHandled(context.Context, store.InboxEvent, string, string) (bool, error) {
	return false, errors.New("connection refused")
}
func (downInbox) Ping(context.Context) error { return errors.New("connection refused") }
func (downInbox) MarkEndpointVerified(context.Context, string, string, store.Lane) (bool, error) {
	return false, errors.New("connection refused")
}

type fixture struct {
	h   *Handler
	st  *store.Store
	reg *prometheus.Registry
}

func newFixture(t *testing.T, inbox Inbox) *fixture {
	t.Helper()
	st := storetest.Open(t, store.SQLite)
	if err := st.PutSecret(t.Context(), "we_2", "v2", agentsite.NewSigningSecret(storedSecret)); err != nil {
		t.Fatal(err)
	}
	if inbox == nil {
		inbox = st
	}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	h := NewHandler(Options{Inbox: inbox, Secrets: st, EnvSecrets: []string{envSecret}, Now: func() time.Time { return now }, Metrics: m, Registry: reg, MaxBody: 4096})
	return &fixture{h: h, st: st, reg: reg}
}

type delivery struct {
	path    string
	id      string
	typ     string
	body    string
	secret  string
	at      time.Time
	sigOver string // a header value that replaces the signature
	headers map[string]string
}

func envelope(id, typ string) string {
	return `{"id":"` + id + `","type":"` + typ + `","created_at":"2026-11-21T08:59:59.123Z","data":{"site_id":"site_1","lead_id":"lead_1"}}`
}

func (f *fixture) send(t *testing.T, d delivery) *httptest.ResponseRecorder {
	t.Helper()
	if d.path == "" {
		d.path = "/webhooks"
	}
	if d.id == "" {
		d.id = "evt_1"
	}
	if d.typ == "" {
		d.typ = "lead.created"
	}
	if d.body == "" {
		d.body = envelope(d.id, d.typ)
	}
	if d.secret == "" {
		d.secret = envSecret
	}
	if d.at.IsZero() {
		d.at = now
	}
	req := httptest.NewRequest(http.MethodPost, d.path, strings.NewReader(d.body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("svc-event-id", d.id)
	req.Header.Set("svc-event-type", d.typ)
	sig := webhook.Sign(d.secret, d.at, []byte(d.body))
	if d.sigOver != "" {
		sig = d.sigOver
	}
	req.Header.Set("svc-signature", sig)
	for k, v := range d.headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	return rec
}

func TestAnswers(t *testing.T) {
	tests := []struct {
		name       string
		inbox      Inbox
		d          delivery
		first      *delivery // sent before, e.g. for duplicates
		wantStatus int
		wantStored bool
		reason     string
	}{
		{name: "new event on /webhooks", d: delivery{}, wantStatus: 200, wantStored: true},
		{name: "new event on a named receiver", d: delivery{path: "/webhooks/v2", secret: storedSecret}, wantStatus: 200, wantStored: true},
		{name: "duplicate event id", first: &delivery{}, d: delivery{}, wantStatus: 204, wantStored: true},
		{name: "duplicate with a newer signature", first: &delivery{}, d: delivery{at: now.Add(time.Minute)}, wantStatus: 204, wantStored: true},
		{name: "malformed signature header", d: delivery{sigOver: "t=1,v1=nothex"}, wantStatus: 400, reason: "malformed_signature_header"},
		{name: "missing signature header", d: delivery{sigOver: " "}, wantStatus: 400, reason: "malformed_signature_header"},
		{name: "wrong secret", d: delivery{secret: "whsec_wrong"}, wantStatus: 401, reason: "invalid_signature"},
		{name: "another receiver's secret", d: delivery{path: "/webhooks/v2", secret: envSecret}, wantStatus: 401, reason: "invalid_signature"},
		{name: "signed 301 s ago", d: delivery{at: now.Add(-301 * time.Second)}, wantStatus: 401, reason: "timestamp_outside_window"},
		{name: "signed 301 s ahead", d: delivery{at: now.Add(301 * time.Second)}, wantStatus: 401, reason: "timestamp_outside_window"},
		{name: "signed 299 s ago", d: delivery{at: now.Add(-299 * time.Second)}, wantStatus: 200, wantStored: true},
		{name: "signature t with leading zeros", d: delivery{sigOver: "t=0" + strconv.FormatInt(now.Unix(), 10) + ",v1=" + strings.Repeat("a", 64)}, wantStatus: 400, reason: "malformed_signature_header"},
		{name: "verified body not JSON is recorded", d: delivery{body: "not json"}, wantStatus: 200, wantStored: true},
		{name: "verified id without evt_ is recorded", d: delivery{id: "1", body: envelope("1", "lead.created")}, wantStatus: 200, wantStored: true},
		{name: "verified body with id and ID is recorded", d: delivery{body: `{"id":"evt_1","ID":"evt_2","type":"lead.created","created_at":"2026-11-21T08:59:59.123Z","data":{}}`}, wantStatus: 200, wantStored: true},
		{name: "header id differs from body id is recorded", d: delivery{id: "evt_other", body: envelope("evt_1", "lead.created")}, wantStatus: 200, wantStored: true},
		{name: "header type differs from body type is recorded", d: delivery{typ: "site.published", body: envelope("evt_1", "lead.created")}, wantStatus: 200, wantStored: true},
		{name: "unknown receiver", d: delivery{path: "/webhooks/nope"}, wantStatus: 401, reason: "unknown_receiver"},
		{name: "receiver name out of form", d: delivery{path: "/webhooks/..%2F"}, wantStatus: 401, reason: "unknown_receiver"},
		{name: "body over the cap", d: delivery{body: `{"id":"evt_1","pad":"` + strings.Repeat("x", 5000) + `"}`}, wantStatus: 413, reason: "body_too_large"},
		{name: "store unavailable", inbox: downInbox{}, d: delivery{}, wantStatus: 503, reason: "store_unavailable"},
		{name: "unknown future type is accepted", d: delivery{typ: "lead.scored", body: envelope("evt_1", "lead.scored")}, wantStatus: 200, wantStored: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.inbox)
			if tc.first != nil {
				if rec := f.send(t, *tc.first); rec.Code != 200 {
					t.Fatalf("first delivery: %d", rec.Code)
				}
			}
			rec := f.send(t, tc.d)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d; body %s", rec.Code, tc.wantStatus, rec.Body)
			}
			body := rec.Body.String()
			if strings.Contains(body, "whsec_") || strings.Contains(body, "connection refused") || strings.Contains(body, "sqlite") {
				t.Errorf("the answer echoes internals: %s", body)
			}
			st, err := f.st.InboxStatus(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if stored := st.Total > 0; stored != tc.wantStored {
				t.Errorf("inbox holds %d events; want stored=%v", st.Total, tc.wantStored)
			}
			if tc.reason != "" {
				if want := publicReason(tc.reason); !strings.Contains(body, want) {
					t.Errorf("body %q does not give the reason %q", body, want)
				}
				if ra := rec.Header().Get("Retry-After"); (rec.Code == http.StatusServiceUnavailable) != (ra != "") {
					t.Errorf("a %d answer with Retry-After %q; want one on every 503 and only there", rec.Code, ra)
				}
				if n := telemetrytest.Value(t, f.reg, "siteops_webhook_deliveries_total", "outcome", "rejected", "reason", tc.reason); n != 1 {
					t.Errorf("rejected{%s} = %v, want 1", tc.reason, n)
				}
			}
		})
	}
}

func TestRecordedEventKeepsWhatTheRelayNeeds(t *testing.T) {
	f := newFixture(t, nil)
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	rec := f.send(t, delivery{path: "/webhooks/v2", secret: storedSecret, id: "evt_keep", headers: map[string]string{"traceparent": tp}})
	if rec.Code != 200 {
		t.Fatal(rec.Code)
	}
	pri, err := f.st.ClaimEvents(t.Context(), store.LanePriority, 10, time.Minute)
	if err != nil || len(pri) != 1 {
		t.Fatalf("claimed %d priority records, %v; want the endpoint's first verification", len(pri), err)
	}
	if v := pri[0]; v.Kind != store.KindEndpointVerified || v.EndpointID != "we_2" || v.SubjectEventID != "evt_keep" {
		t.Errorf("verification record = %+v", v)
	}
	bulk, err := f.st.ClaimEvents(t.Context(), store.LaneBulk, 10, time.Minute)
	if err != nil || len(bulk) != 1 {
		t.Fatalf("claimed %d bulk events, %v; want the lead.created", len(bulk), err)
	}
	ev := bulk[0]
	if ev.EventID != "evt_keep" || ev.EventType != "lead.created" || ev.Kind != store.KindWebhook || ev.Receiver != "v2" || ev.EndpointID != "we_2" || ev.TraceContext != tp ||
		string(ev.Body) != envelope("evt_keep", "lead.created") {
		t.Errorf("recorded %+v", ev)
	}
}

func TestNewSecretAcceptedWithinTheRefresh(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	clock := now
	h := NewHandler(Options{Inbox: st, Secrets: st, Now: func() time.Time { return clock }, SecretRefresh: 2 * time.Second})
	f := &fixture{h: h, st: st}
	if rec := f.send(t, delivery{path: "/webhooks/v3", secret: "whsec_v3", at: clock}); rec.Code != 401 {
		t.Fatalf("before the secret is stored: %d", rec.Code)
	}
	if err := st.PutSecret(t.Context(), "we_3", "v3", agentsite.NewSigningSecret("whsec_v3")); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(2 * time.Second)
	if rec := f.send(t, delivery{path: "/webhooks/v3", secret: "whsec_v3", at: clock}); rec.Code != 200 {
		t.Fatalf("2 s after the secret was stored: %d %s", rec.Code, rec.Body)
	}
	// A retired secret stops being accepted after the refresh too.
	if err := st.RetireSecret(t.Context(), "we_3", clock.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(3 * time.Second)
	if rec := f.send(t, delivery{path: "/webhooks/v3", secret: "whsec_v3", id: "evt_2", at: clock}); rec.Code != 401 {
		t.Fatalf("after retirement: %d", rec.Code)
	}
}

// TestHealthReadyAndMetrics checks the routes of the two handlers: the
// webhook port answers /healthz and nothing that tells the backlog or pings
// the store; the admin address serves /healthz, /readyz and /metrics.
func TestHealthReadyAndMetrics(t *testing.T) {
	f := newFixture(t, nil)
	f.send(t, delivery{})
	f.send(t, delivery{})
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 404, "/metrics": 404} {
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != want {
			t.Errorf("webhook port: GET %s = %d, want %d", path, rec.Code, want)
		}
	}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200} {
		rec := httptest.NewRecorder()
		f.h.Admin().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != want {
			t.Errorf("GET %s = %d", path, rec.Code)
		}
		if path == "/metrics" {
			b, _ := io.ReadAll(rec.Body)
			for _, want := range []string{`siteops_webhook_deliveries_total{outcome="accepted",reason=""} 1`, `siteops_webhook_deliveries_total{outcome="duplicate",reason=""} 1`} {
				if !strings.Contains(string(b), want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
		}
	}
	down := newFixture(t, downInbox{})
	rec := httptest.NewRecorder()
	down.h.Admin().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 503 {
		t.Errorf("readyz with the store down = %d", rec.Code)
	}
}

func FuzzHandler(f *testing.F) {
	st := storetest.Open(f, store.SQLite)
	h := NewHandler(Options{Inbox: st, EnvSecrets: []string{envSecret}, Now: func() time.Time { return now }, MaxBody: 1 << 16})
	good := envelope("evt_f", "lead.created")
	f.Add(good, webhook.Sign(envSecret, now, []byte(good)), "evt_f", "lead.created", "", false)
	f.Add("{}", "t=1,v1="+strings.Repeat("a", 64), "", "", "v2", false)
	f.Add("", "", "evt_x", "x", "..", false)
	// Signed inside the target: the fuzzer's bodies pass the signature and
	// reach the strict decoder and the inbox, duplicate and case-variant
	// keys among them.
	f.Add(good, "", "evt_f", "lead.created", "", true)
	f.Add("", "", "evt_x", "x", "", true) // an empty body, signed: once a NULL the store refused (503)
	f.Add(`{"id":"evt_d","id":"evt_e","type":"lead.created","created_at":"2026-11-21T08:59:59.123Z","data":{}}`, "", "evt_d", "lead.created", "", true)
	f.Add(`{"Id":"evt_c","TYPE":"lead.created","created_at":"2026-11-21T08:59:59.123Z","data":{"site_id":"s","Site_ID":"t"}}`, "", "evt_c", "lead.created", "", true)
	f.Fuzz(func(t *testing.T, body, sig, id, typ, receiver string, signed bool) {
		path := "/webhooks"
		if receiver != "" {
			path += "/" + receiver
		}
		if signed {
			sig = webhook.Sign(envSecret, now, []byte(body))
		}
		req, err := http.NewRequest(http.MethodPost, "http://ingress"+path, strings.NewReader(body))
		if err != nil {
			return // not a URL a client could send
		}
		req.Header.Set("svc-signature", sig)
		req.Header.Set("svc-event-id", id)
		req.Header.Set("svc-event-type", typ)
		before, _ := st.InboxStatus(context.Background())
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		after, _ := st.InboxStatus(context.Background())
		switch rec.Code {
		case 200:
			if after.Total != before.Total+1 {
				t.Fatalf("200 without a new inbox row")
			}
		case 204, 301, 307, 308, 400, 401, 404, 405, 413: // 3xx: the mux cleaning an unclean path; 404: a path no route matches
			if after.Total != before.Total {
				t.Fatalf("answer %d recorded an event", rec.Code)
			}
		default:
			t.Fatalf("unexpected status %d for body %q sig %q", rec.Code, body, sig)
		}
		// A body signed with the secret, sent to POST /webhooks within
		// the size limit, is never refused as unsigned.
		if signed && receiver == "" && len(body) <= 1<<16 && rec.Code == 401 {
			t.Fatalf("a body signed with the secret answered 401: %q", body)
		}
		if strings.Contains(rec.Body.String(), "whsec_") {
			t.Fatal("the answer carries a secret")
		}
	})
}

// TestDeliveryHeldWhileTheReceiverExpectsASecret times the holds during a
// rotation: a delivery signed with a secret being stored is held and
// released the moment the secret is stored; forged, malformed and stale
// deliveries are never held; once the secret is stored a bad signature is
// answered at once; and no more than MaxHeld deliveries wait at a time.
func TestDeliveryHeldWhileTheReceiverExpectsASecret(t *testing.T) {
	// An answer "at once" may wait for the next read of the list of
	// receivers (Recheck, 50 ms); a held one waits for the secret. The
	// bound stretches with the race detector and the machine's load, but
	// twice it stays well under PendingWait (2 s), so that a delivery held
	// to the end of its wait is never taken for one answered at once.
	fast := min(siteopstest.Bound(150*time.Millisecond), 600*time.Millisecond)
	st := storetest.Open(t, store.SQLite)
	reads := &ingresstest.CountingStore{Store: st}
	h := NewHandler(Options{Inbox: st, Secrets: reads, PendingWait: 2 * time.Second, MaxHeld: 2})
	f := &fixture{h: h, st: st}
	ctx := t.Context()
	timed := func(d delivery) (int, time.Duration) {
		d.at = time.Now()
		start := time.Now()
		rec := f.send(t, d)
		return rec.Code, time.Since(start)
	}

	// Nothing expected: an unknown receiver is answered at once.
	if code, took := timed(delivery{path: "/webhooks/v4", secret: "whsec_v4", id: "evt_0"}); code != 401 || took > fast {
		t.Errorf("unknown receiver = %d after %s", code, took)
	}
	if err := st.ExpectSecret(ctx, "v4", "create-v4", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	// While the endpoint is created, malformed and stale deliveries are
	// answered at once: they cannot be signed with the coming secret.
	if code, took := timed(delivery{path: "/webhooks/v4", sigOver: "t=1,v1=nothex", id: "evt_m"}); code != 400 || took > fast {
		t.Errorf("malformed while pending = %d after %s", code, took)
	}
	stale := delivery{path: "/webhooks/v4", secret: "whsec_v4", id: "evt_s"}
	stale.at = time.Now().Add(-time.Hour)
	start := time.Now()
	if rec := f.send(t, stale); rec.Code != 401 || time.Since(start) > fast {
		t.Errorf("stale while pending = %d after %s", rec.Code, time.Since(start))
	}

	// A forged delivery and one signed with the coming secret are held;
	// with MaxHeld (2) taken, a third is answered at once.
	forged := make(chan int, 1)
	go func() {
		code, _ := timed(delivery{path: "/webhooks/v4", secret: "whsec_forged", id: "evt_f"})
		forged <- code
	}()
	waitHeld(t, f.h, 1)
	type answer struct {
		code int
		took time.Duration
	}
	legit := make(chan answer, 1)
	legitStart := time.Now()
	go func() {
		code, took := timed(delivery{path: "/webhooks/v4", secret: "whsec_v4", id: "evt_1"})
		legit <- answer{code, took}
	}()
	waitHeld(t, f.h, 2)
	if code, took := timed(delivery{path: "/webhooks/v4", secret: "whsec_forged", id: "evt_f2"}); code != 401 || took > fast {
		t.Errorf("a delivery beyond MaxHeld = %d after %s; want an answer at once", code, took)
	}

	// The secret is stored once the held deliveries have read the list of
	// receivers again, twice, and found no secret that verifies them: the
	// legitimate one is accepted right then, and the forged one refused
	// right then.
	before := reads.Lists.Load()
	siteopstest.EventuallyNil(t, 2*time.Second, "the held deliveries to read the list again and stay held", func() error {
		if got, held := reads.Lists.Load()-before, len(h.held); got < 2 || held != 2 {
			return fmt.Errorf("%d reads of the list since, %d held; want 2 reads and 2 held", got, held)
		}
		return nil
	})
	stored := time.Now()
	if err := st.PutSecret(ctx, "we_4", "v4", agentsite.NewSigningSecret("whsec_v4")); err != nil {
		t.Fatal(err)
	}
	if err := st.EndExpectation(ctx, "v4", "create-v4"); err != nil {
		t.Fatal(err)
	}
	a := <-legit
	if released := legitStart.Add(a.took).Sub(stored); a.code != 200 || released > 2*fast {
		t.Errorf("held delivery = %d, released %s after the secret was stored", a.code, released)
	}
	if code := <-forged; code != 401 {
		t.Errorf("the forged held delivery = %d, want 401 once the secret is stored", code)
	}
	// Once stored, a bad signature is refused at once.
	if code, took := timed(delivery{path: "/webhooks/v4", secret: "whsec_wrong", id: "evt_2"}); code != 401 || took > fast {
		t.Errorf("wrong secret after the secret is stored = %d after %s", code, took)
	}
	if n := telemetrytest.Value(t, h.opts.Registry, "siteops_webhook_held_total", "outcome", "refused_full"); n != 1 {
		t.Errorf("held{refused_full} = %v, want 1", n)
	}
}

// TestNewSecretVerifiesAtOnceAfterItIsStored checks that a delivery signed
// with a secret stored a moment ago verifies although the list of receivers
// was read just before and is not due (SecretRefresh is an hour): a
// delivery that no listed secret verifies waits for a read of the list that
// started after it arrived (at most Recheck later), and verifies then.
func TestNewSecretVerifiesAtOnceAfterItIsStored(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	c := &ingresstest.CountingStore{Store: st}
	h := NewHandler(Options{Inbox: st, Secrets: c, SecretRefresh: time.Hour})
	f := &fixture{h: h, st: st}
	ctx := t.Context()
	if err := st.PutSecret(ctx, "we_1", "v5", agentsite.NewSigningSecret("whsec_v5_old")); err != nil {
		t.Fatal(err)
	}
	if rec := f.send(t, delivery{path: "/webhooks/v5", secret: "whsec_v5_old", id: "evt_1", at: time.Now()}); rec.Code != 200 {
		t.Fatalf("old secret = %d", rec.Code)
	}
	if err := st.ExpectSecret(ctx, "v5", "create-v5", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := st.PutSecret(ctx, "we_2", "v5", agentsite.NewSigningSecret("whsec_v5_new")); err != nil {
		t.Fatal(err)
	}
	if err := st.EndExpectation(ctx, "v5", "create-v5"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if rec := f.send(t, delivery{path: "/webhooks/v5", secret: "whsec_v5_new", id: "evt_2", at: time.Now()}); rec.Code != 200 || time.Since(start) > DefaultRecheck+siteopstest.Bound(time.Second) {
		t.Fatalf("new secret right after it was stored = %d after %s, want 200 within Recheck (%s) and a read", rec.Code, time.Since(start), DefaultRecheck)
	}
	if n := c.Lists.Load(); n != 2 {
		t.Errorf("the list was read %d times, want 2 (the first delivery's, and one the new secret's delivery waited for)", n)
	}
}

// waitHeld polls until n deliveries are held.
func waitHeld(t *testing.T, h *Handler, n int) {
	t.Helper()
	siteopstest.EventuallyNil(t, 2*time.Second, fmt.Sprintf("%d deliveries held", n), func() error {
		if got := len(h.held); got < n {
			return fmt.Errorf("%d held, want %d", got, n)
		}
		return nil
	})
}
