package ingress

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/telemetry"
	"github.com/siteops/siteops/telemetry/telemetrytest"
)

// maxLabelValues bounds the distinct values of any one label of any one
// metric that requests can bring about: the largest fixed set is the
// statuses the ingress and net/http answer.
const maxLabelValues = 16

// TestMetricLabelsStayBounded is item 4 of the review: requests a client
// chooses freely — 2,100 of each kind, with distinct Host headers (and
// ports in them), paths, methods, receiver names and event types, signed
// or not, through the traced handler as siteops ingress serves it — leave
// every label of every metric on /metrics with at most maxLabelValues
// values. Before the fix otelhttp labelled its series with the Host
// header: one series per Host.
func TestMetricLabelsStayBounded(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	if err := st.PutSecret(t.Context(), "we_2", "v2", agentsite.NewSigningSecret(storedSecret)); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	mp, err := telemetry.NewMeterProvider(reg)
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(Options{Inbox: st, Secrets: st, EnvSecrets: []string{envSecret}, Metrics: NewMetricsOn(mp), Registry: reg})
	srv := httptest.NewServer(traced(h, mp))
	t.Cleanup(srv.Close)
	hc := srv.Client()
	do := func(method, path, host string, header map[string]string, body string) {
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return
		}
		req.Host = host
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	const n, senders = 2100, 30
	var wg sync.WaitGroup
	for w := range senders {
		wg.Go(func() {
			for i := w; i < n; i += senders {
				host := fmt.Sprintf("h%d.example:%d", i, 1+i%65000)
				do(http.MethodGet, "/nope", host, nil, "")
				do(fmt.Sprintf("M%d", i), fmt.Sprintf("/webhooks/p%d", i), host, nil, "")
				id, typ := fmt.Sprintf("evt_%d", i), fmt.Sprintf("type.%d", i)
				body := envelope(id, typ)
				sig := map[string]string{"svc-event-id": "evt_header_" + id, "svc-event-type": "header." + typ}
				// Forged, to a receiver named anew each time.
				sig["svc-signature"] = webhook.Sign("whsec_forged", time.Now(), []byte(body))
				do(http.MethodPost, fmt.Sprintf("/webhooks/r%d", i), host, sig, body)
				// Verified, of a type named anew each time, with headers
				// that differ from the body.
				sig["svc-signature"] = webhook.Sign(envSecret, time.Now(), []byte(body))
				do(http.MethodPost, "/webhooks", host, sig, body)
			}
		})
	}
	wg.Wait()
	rec := httptest.NewRecorder()
	h.Admin().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	text := rec.Body.String()
	mfs := telemetrytest.Families(t, text)
	series := 0
	for name, mf := range mfs {
		values := map[string]map[string]bool{}
		for _, m := range mf.GetMetric() {
			series++
			for _, lp := range m.GetLabel() {
				if values[lp.GetName()] == nil {
					values[lp.GetName()] = map[string]bool{}
				}
				values[lp.GetName()][lp.GetValue()] = true
			}
		}
		for label, vs := range values {
			if len(vs) > maxLabelValues {
				t.Errorf("%s{%s} has %d values after %d requests of each kind; want at most %d", name, label, len(vs), n, maxLabelValues)
			}
		}
	}
	if _, ok := mfs["http_server_request_duration_seconds"]; !ok {
		t.Errorf("no otelhttp server metric on /metrics: the test does not see what it bounds")
	}
	if got := telemetrytest.ValueIn(t, mfs, "siteops_webhook_deliveries_total", "outcome", "accepted"); got != n {
		t.Errorf("accepted = %v, want %d", got, n)
	}
	t.Logf("/metrics after %d requests: %d bytes, %d series in %d families", 4*n, len(text), series, len(mfs))
	if len(text) > 256<<10 {
		t.Errorf("/metrics is %d bytes after %d requests; want under 256 KiB", len(text), 4*n)
	}
}
