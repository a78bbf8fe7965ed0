package webhookingress

import (
	"io"
	"net/http/httptest"
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
// OpenTelemetry instruments: the ones the README documents, with their
// types, and label values without spaces.
func TestMetricNames(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	// No Metrics, no Registry: the handler serves metrics of its own.
	h := NewHandler(Options{Inbox: st, EnvSecrets: []string{envSecret}, Now: func() time.Time { return now }})
	f := &fixture{h: h, st: st}
	if n, ok := telemetrytest.Families(t, scrape(t, h))["siteops_relay_retries_total"]; !ok || n.GetMetric()[0].GetCounter().GetValue() != 0 {
		t.Errorf("before any retry, siteops_relay_retries_total = %v, want a counter at 0", n)
	}
	f.send(t, delivery{})
	f.send(t, delivery{})
	f.send(t, delivery{secret: "whsec_wrong", id: "evt_2"})
	ctx := t.Context()
	m := h.opts.Metrics
	m.hold(ctx, "held")
	m.unreadableSecrets(ctx, "", 2)
	m.dispatch(ctx, "lead.created", OutcomeSignalled)
	m.retry(ctx)
	m.inbox(ctx, 3, 1500*time.Millisecond)

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
		{"siteops_webhook_unreadable_secrets", "gauge", []string{"receiver", "default"}, 2},
		{"siteops_relay_dispatched_total", "counter", []string{"type", "lead.created", "outcome", "signalled"}, 1},
		{"siteops_relay_retries_total", "counter", nil, 1},
		{"siteops_relay_lag_seconds", "gauge", nil, 1.5},
		{"siteops_relay_pending_events", "gauge", nil, 3},
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
// the process's meter provider records on it, and serves the registry it
// exports into.
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
	if srv.Relay.Metrics != srv.Handler.opts.Metrics {
		t.Error("the relay and the handler record on different metrics")
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

// TestUnreadableSecretsGauge checks the gauge of a receiver whose stored
// secret does not decrypt with the key the ingress has.
func TestUnreadableSecretsGauge(t *testing.T) {
	ctx := t.Context()
	u := storetest.SQLiteURL(t)
	a, err := store.Open(ctx, u, store.WithSecretKey(storetest.TestKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.PutSecret(ctx, "we_1", "main", agentsite.NewSigningSecret("whsec_under_old_key")); err != nil {
		t.Fatal(err)
	}
	_ = a.Close()
	b, err := store.Open(ctx, u, store.WithSecretKey([]byte("ffffffffffffffffffffffffffffffff")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	f := &fixture{h: NewHandler(Options{Inbox: b, Secrets: b}), st: b}
	if rec := f.send(t, delivery{path: "/webhooks/main", secret: "whsec_under_old_key", at: time.Now()}); rec.Code != 404 {
		t.Errorf("a delivery signed with the unreadable secret = %d, want 404 (no readable secret)", rec.Code)
	}
	if n := telemetrytest.Value(t, f.h.opts.Registry, "siteops_webhook_unreadable_secrets", "receiver", "main"); n != 1 {
		t.Errorf(`siteops_webhook_unreadable_secrets{receiver="main"} = %v, want 1`, n)
	}
}
