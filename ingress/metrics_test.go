package ingress

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/telemetry"
	"github.com/siteops/siteops/telemetry/telemetrytest"
)

// scrape answers GET /metrics of h's admin handler.
func scrape(t *testing.T, h *Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.Admin().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics = %d", rec.Code)
	}
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// TestMetricNames checks the names the Prometheus exporter gives the
// OpenTelemetry instruments: the ones docs/observability.md documents, with their
// types, and label values without spaces.
func TestMetricNames(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	// No Metrics, no Registry: the handler serves metrics of its own.
	h := NewHandler(Options{Inbox: st, EnvSecrets: []string{envSecret}, Now: func() time.Time { return now }})
	f := &fixture{h: h, st: st}
	if n, ok := telemetrytest.Families(t, scrape(t, h))["siteops_webhook_rejection_logs_suppressed_total"]; !ok || n.GetMetric()[0].GetCounter().GetValue() != 0 {
		t.Errorf("before any suppressed log line, siteops_webhook_rejection_logs_suppressed_total = %v, want a counter at 0", n)
	}
	f.send(t, delivery{})
	f.send(t, delivery{})
	f.send(t, delivery{secret: "whsec_wrong", id: "evt_2"})
	ctx := t.Context()
	m := h.opts.Metrics
	m.hold(ctx, "held")
	m.headerMismatch(ctx, "svc-event-id")
	m.errorLogSuppressed(ctx)
	m.connOpened(ctx, 3)
	m.connShed(ctx, "closed_idle")
	m.unreadableSecrets(ctx, "", 2)

	text := scrape(t, h)
	t.Logf("/metrics:\n%s", text)
	mfs := telemetrytest.Families(t, text)
	for _, w := range []struct {
		name, typ string
		labels    []string
		value     float64
	}{
		{"siteops_webhook_deliveries_total", "counter", []string{"outcome", "accepted", "reason", ""}, 1},
		{"siteops_webhook_deliveries_total", "counter", []string{"outcome", "duplicate", "reason", ""}, 1},
		{"siteops_webhook_deliveries_total", "counter", []string{"outcome", "rejected", "reason", "invalid_signature"}, 1},
		{"siteops_webhook_held_total", "counter", []string{"outcome", "held"}, 1},
		{"siteops_webhook_header_mismatches_total", "counter", []string{"header", "svc-event-id"}, 1},
		{"siteops_webhook_error_logs_suppressed_total", "counter", nil, 1},
		{"siteops_webhook_rejection_logs_suppressed_total", "counter", nil, 0},
		{"siteops_webhook_connections", "gauge", nil, 3},
		{"siteops_webhook_connections_shed_total", "counter", []string{"action", "closed_idle"}, 1},
		{"siteops_webhook_unreadable_secrets", "gauge", []string{"receiver", "default"}, 2},
	} {
		if got := telemetrytest.Type(mfs, w.name); got != w.typ {
			t.Errorf("TYPE %s = %q, want %s", w.name, got, w.typ)
		}
		if got := telemetrytest.ValueIn(t, mfs, w.name, w.labels...); got != w.value {
			t.Errorf("%s%q = %v, want %v", w.name, w.labels, got, w.value)
		}
	}
	for _, p := range telemetrytest.Problems(mfs) {
		t.Error(p)
	}
}

// TestServerRecordsOnTheProcessMeterProvider checks that an ingress given
// the process's meter provider records on it, its relay too, and serves
// the registry it exports into.
func TestServerRecordsOnTheProcessMeterProvider(t *testing.T) {
	reg := prometheus.NewRegistry()
	mp, err := telemetry.NewMeterProvider(reg)
	if err != nil {
		t.Fatal(err)
	}
	st := storetest.Open(t, store.SQLite)
	srv, err := New(ServerOptions{Store: st, EnvSecrets: []string{envSecret}, Registry: reg, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{h: srv.Handler, st: st}
	f.send(t, delivery{at: time.Now()})
	if n := telemetrytest.Value(t, reg, "siteops_webhook_deliveries_total", "outcome", "accepted"); n != 1 {
		t.Errorf("accepted on the process's registry = %v, want 1", n)
	}
	if n := telemetrytest.ValueIn(t, telemetrytest.Families(t, scrape(t, srv.Handler)), "siteops_webhook_deliveries_total", "outcome", "accepted"); n != 1 {
		t.Errorf("accepted on the ingress's /metrics = %v, want 1", n)
	}
	if _, ok := telemetrytest.Families(t, scrape(t, srv.Handler))["siteops_relay_retries_total"]; !ok {
		t.Error("the relay's metrics are not on the process's registry: siteops_relay_retries_total is missing from /metrics")
	}
	if _, err := New(ServerOptions{Store: st, EnvSecrets: []string{envSecret}, MeterProvider: mp}); err == nil {
		t.Error("New accepted a MeterProvider without its Registry")
	}
}

// TestUnknownReceiversAddNoSeries checks that deliveries to receiver paths
// nobody registered add no siteops_webhook_unreadable_secrets series:
// anyone can send them.
func TestUnknownReceiversAddNoSeries(t *testing.T) {
	f := newFixture(t, nil)
	for _, path := range []string{"/webhooks/nope", "/webhooks/Other.1", "/webhooks/v2"} {
		f.send(t, delivery{path: path})
	}
	mfs := telemetrytest.Families(t, scrape(t, f.h))
	if mf, ok := mfs["siteops_webhook_unreadable_secrets"]; ok {
		t.Errorf("unreadable secrets series without an unreadable secret: %v", mf.GetMetric())
	}
}

// TestUnreadableSecretsAnswer401UntilFixed is issue 21, item 2, on the
// handler's side, on SQLite and PostgreSQL: stored secrets that no longer
// decrypt (here damaged rows, as a bad restore or an edit leaves them) cost
// the other receivers nothing; a delivery to the damaged receivers that
// their readable secrets do not verify is answered as a bad signature (401
// invalid_signature, as issue 32 decided, so that the answer does not tell
// a prober the receiver exists), which the sender retries as any non-2xx,
// and counted secret_unreadable; the gauge stays raised until the rows are
// fixed, and falls to 0 then without a delivery; and the retried delivery
// then succeeds.
func TestUnreadableSecretsAnswer401UntilFixed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		for _, s := range []struct{ id, receiver string }{{"we_ok", "main"}, {"we_bad", "main"}, {"we_lone", "lonely"}, {"we_other", "other"}} {
			if err := st.PutSecret(ctx, s.id, s.receiver, agentsite.NewSigningSecret("whsec_"+s.id)); err != nil {
				t.Fatal(err)
			}
		}
		saved := map[string][]byte{}
		for _, id := range []string{"we_bad", "we_lone"} {
			var sealed []byte
			if err := st.DB().QueryRowContext(ctx, `SELECT ciphertext FROM webhook_secrets WHERE endpoint_id = $1`, id).Scan(&sealed); err != nil {
				t.Fatal(err)
			}
			saved[id] = sealed
			damaged := append([]byte(nil), sealed...)
			damaged[len(damaged)-1] ^= 0xff
			if _, err := st.DB().ExecContext(ctx, `UPDATE webhook_secrets SET ciphertext = $1 WHERE endpoint_id = $2`, damaged, id); err != nil {
				t.Fatal(err)
			}
		}
		clock := time.Now()
		reg := prometheus.NewRegistry()
		h := NewHandler(Options{Inbox: st, Secrets: st, Metrics: NewMetrics(reg), Registry: reg, Now: func() time.Time { return clock }})
		f := &fixture{h: h, st: st, reg: reg}
		send := func(path, secret, id string) *httptest.ResponseRecorder {
			t.Helper()
			return f.send(t, delivery{path: path, secret: secret, id: id, at: clock})
		}
		for _, c := range []struct {
			name, path, secret string
			want               int
		}{
			{"another receiver", "/webhooks/other", "whsec_we_other", 200},
			{"the damaged receiver's readable secret", "/webhooks/main", "whsec_we_ok", 200},
			{"the damaged secret", "/webhooks/main", "whsec_we_bad", 401},
			{"a forged one beside a damaged secret", "/webhooks/main", "whsec_forged", 401},
			{"a receiver whose only secret is damaged", "/webhooks/lonely", "whsec_we_lone", 401},
		} {
			rec := send(c.path, c.secret, "evt_"+strings.ReplaceAll(c.name, " ", "_"))
			if rec.Code != c.want {
				t.Errorf("%s = %d %s, want %d", c.name, rec.Code, rec.Body, c.want)
			}
			if c.want == 401 && (rec.Header().Get("Retry-After") != "" || !strings.Contains(rec.Body.String(), "invalid_signature")) {
				t.Errorf("%s: Retry-After %q, body %s; want invalid_signature without Retry-After, as any bad signature", c.name, rec.Header().Get("Retry-After"), rec.Body)
			}
		}
		for _, r := range []string{"main", "lonely"} {
			if n := telemetrytest.Value(t, reg, "siteops_webhook_unreadable_secrets", "receiver", r); n != 1 {
				t.Errorf(`siteops_webhook_unreadable_secrets{receiver=%q} = %v, want 1`, r, n)
			}
		}
		if n := telemetrytest.Value(t, reg, "siteops_webhook_deliveries_total", "outcome", "rejected", "reason", "secret_unreadable"); n != 3 {
			t.Errorf("rejected{secret_unreadable} = %v, want 3", n)
		}
		// Still raised a refresh later, without a delivery.
		clock = clock.Add(DefaultSecretRefresh)
		if err := h.secrets.readNow(ctx); err != nil {
			t.Fatal(err)
		}
		if n := telemetrytest.Value(t, reg, "siteops_webhook_unreadable_secrets", "receiver", "lonely"); n != 1 {
			t.Errorf("before the fix the gauge fell to %v", n)
		}
		// The fix: the rows restored.
		for id, sealed := range saved {
			if _, err := st.DB().ExecContext(ctx, `UPDATE webhook_secrets SET ciphertext = $1 WHERE endpoint_id = $2`, sealed, id); err != nil {
				t.Fatal(err)
			}
		}
		clock = clock.Add(DefaultSecretRefresh)
		if err := h.secrets.readNow(ctx); err != nil {
			t.Fatal(err)
		}
		for _, r := range []string{"main", "lonely"} {
			if n := telemetrytest.Value(t, reg, "siteops_webhook_unreadable_secrets", "receiver", r); n != 0 {
				t.Errorf(`after the fix siteops_webhook_unreadable_secrets{receiver=%q} = %v, want 0`, r, n)
			}
		}
		if rec := send("/webhooks/main", "whsec_we_bad", "evt_the_damaged_secret"); rec.Code != 200 {
			t.Errorf("the sender's retry after the fix = %d %s, want 200", rec.Code, rec.Body)
		}
		if rec := send("/webhooks/lonely", "whsec_we_lone", "evt_a_receiver_whose_only_secret_is_damaged"); rec.Code != 200 {
			t.Errorf("the sender's retry to the lone receiver after the fix = %d %s, want 200", rec.Code, rec.Body)
		}
	})
}

// TestUnreadableSecretsUnderAnotherKey is the other way a secret stops
// decrypting: the ingress runs with another SITEOPS_SECRET_KEY than the
// one the secret was stored under. Deliveries signed with it are answered
// as a bad signature (401), counted secret_unreadable, and the gauge
// counts the secret.
func TestUnreadableSecretsUnderAnotherKey(t *testing.T) {
	ctx := t.Context()
	u := storetest.SQLiteURL(t)
	a, err := store.Open(ctx, u, store.Options{SecretKey: storetest.TestKey})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.PutSecret(ctx, "we_1", "main", agentsite.NewSigningSecret("whsec_under_old_key")); err != nil {
		t.Fatal(err)
	}
	_ = a.Close()
	b, err := store.Open(ctx, u, store.Options{SecretKey: []byte("ffffffffffffffffffffffffffffffff")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	f := &fixture{h: NewHandler(Options{Inbox: b, Secrets: b}), st: b}
	if rec := f.send(t, delivery{path: "/webhooks/main", secret: "whsec_under_old_key", at: time.Now()}); rec.Code != 401 {
		t.Errorf("a delivery signed with the unreadable secret = %d, want 401", rec.Code)
	}
	if n := telemetrytest.Value(t, f.h.opts.Registry, "siteops_webhook_deliveries_total", "outcome", "rejected", "reason", "secret_unreadable"); n != 1 {
		t.Errorf("rejected{secret_unreadable} = %v, want 1", n)
	}
	if n := telemetrytest.Value(t, f.h.opts.Registry, "siteops_webhook_unreadable_secrets", "receiver", "main"); n != 1 {
		t.Errorf(`siteops_webhook_unreadable_secrets{receiver="main"} = %v, want 1`, n)
	}
}
