package telemetry

import (
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/siteops/siteops/telemetry/telemetrytest"
)

// TestMetricsExposition records as the Temporal SDK and siteops do and
// reads /metrics: SDK counters are counters (not gauges), a timer is a
// histogram in seconds, siteops' counters get _total, and no label value
// has a space.
func TestMetricsExposition(t *testing.T) {
	tel, err := Setup(t.Context(), Options{Service: "siteops-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(t.Context()) })

	sdk := tel.metrics.WithTags(map[string]string{"operation": "SignalWithStartWorkflowExecution", "namespace": "default"})
	sdk.Counter("temporal_request").Inc(2)
	sdk.Gauge("temporal_worker_task_slots_available").Update(5)
	sdk.Timer("temporal_request_latency").Record(20 * time.Millisecond)
	own, err := otel.Meter("test").Int64Counter("siteops.test.things")
	if err != nil {
		t.Fatal(err)
	}
	own.Add(t.Context(), 3)

	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	mfs := telemetrytest.Families(t, string(b))
	for name, want := range map[string]string{
		"temporal_request_total":               "counter",
		"temporal_worker_task_slots_available": "gauge",
		"temporal_request_latency_seconds":     "histogram",
		"siteops_test_things_total":            "counter",
		"target_info":                          "gauge",
		"go_goroutines":                        "gauge",
	} {
		if got := telemetrytest.Type(mfs, name); got != want {
			t.Errorf("TYPE %s = %q, want %s", name, got, want)
		}
	}
	if n := telemetrytest.ValueIn(t, mfs, "temporal_request_total", "operation", "SignalWithStartWorkflowExecution", "namespace", "default"); n != 2 {
		t.Errorf("temporal_request_total = %v, want 2", n)
	}
	for _, p := range telemetrytest.Problems(mfs) {
		t.Error(p)
	}
}

// TestNewMeterProviderSharesARegistry checks that a component's own meter
// provider can export into the process's registry: it adds no second
// target_info.
func TestNewMeterProviderSharesARegistry(t *testing.T) {
	tel, err := Setup(t.Context(), Options{Service: "siteops-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(t.Context()) })
	mp, err := NewMeterProvider(tel.Registry)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := mp.Meter("test").Int64Counter("siteops.test.private")
	c.Add(t.Context(), 1)
	if _, err := tel.Registry.Gather(); err != nil {
		t.Fatalf("gathering the shared registry: %v", err)
	}
	if n := telemetrytest.Value(t, tel.Registry, "siteops_test_private_total"); n != 1 {
		t.Errorf("siteops_test_private_total = %v, want 1", n)
	}
}
