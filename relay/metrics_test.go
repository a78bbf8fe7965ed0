package relay

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/telemetry/telemetrytest"
)

// TestMetricNames checks the names the Prometheus exporter gives the
// relay's instruments: the ones docs/observability.md documents, with
// their types, the counters that alerts rate exported at 0 from the start,
// and label values without spaces.
func TestMetricNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	before := telemetrytest.Families(t, gather(t, reg))
	for _, name := range []string{"siteops_relay_retries_total", "siteops_relay_dead_letters"} {
		if got := telemetrytest.ValueIn(t, before, name); got != 0 {
			t.Errorf("before any dispatch, %s = %v, want 0", name, got)
		}
	}
	ctx := t.Context()
	m.dispatch(ctx, "lead.created", store.OutcomeSignalled)
	m.retry(ctx)
	m.inbox(ctx, 3, 1500*time.Millisecond)
	m.deadLetters(ctx, 2)
	m.deadLettered(ctx, "knowledge.ready")
	mfs := telemetrytest.Families(t, gather(t, reg))
	for _, w := range []struct {
		name, typ string
		labels    []string
		value     float64
	}{
		{"siteops_relay_dispatched_total", "counter", []string{"type", "lead.created", "outcome", "signalled"}, 1},
		{"siteops_relay_retries_total", "counter", nil, 1},
		{"siteops_relay_lag_seconds", "gauge", nil, 1.5},
		{"siteops_relay_pending_events", "gauge", nil, 3},
		{"siteops_relay_dead_letters", "gauge", nil, 2},
		{"siteops_relay_dead_lettered_total", "counter", []string{"type", "knowledge.ready"}, 1},
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
