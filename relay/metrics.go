package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/siteops/siteops/telemetry"
)

const meterName = "github.com/siteops/siteops/relay"

// Metrics are the relay's metrics, recorded with the OpenTelemetry meter
// API as every siteops metric is. The Prometheus exporter names them: a
// counter gets _total, a unit of seconds _seconds.
//
//	siteops_relay_dispatched_total{type,outcome}      counter
//	siteops_relay_retries_total                       counter
//	siteops_relay_lag_seconds                         gauge
//	siteops_relay_pending_events                      gauge
//	siteops_relay_dead_letters                        gauge
//	siteops_relay_dead_lettered_total{type}           counter
//	siteops_relay_signal_delay_seconds{lane}          histogram (slo_metrics.go)
//
// Every label's values are bounded: type names only verified events
// (typeLabel), lane the store's lanes, outcome a fixed set in this package.
type Metrics struct {
	dispatched metric.Int64Counter
	retries    metric.Int64Counter
	lag        metric.Float64Gauge
	pending    metric.Int64Gauge
	dead       metric.Int64Gauge
	deadDone   metric.Int64Counter
	// signalDelay is the service level of slo_metrics.go.
	signalDelay metric.Float64Histogram
}

// NewMetrics returns metrics on a meter provider of their own whose
// Prometheus exporter registers with reg: for a relay that runs without
// the process's telemetry, and tests. Like prometheus.MustRegister, it
// panics if reg refuses the exporter.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	mp, err := telemetry.NewMeterProvider(reg)
	if err != nil {
		panic(fmt.Sprintf("relay: registering the metrics exporter: %v", err))
	}
	return NewMetricsOn(mp)
}

// NewMetricsOn returns metrics on mp, the process's meter provider
// (telemetry.Telemetry.MeterProvider).
func NewMetricsOn(mp metric.MeterProvider) *Metrics {
	mt := mp.Meter(meterName)
	// A meter only fails an instrument with an invalid name or option,
	// which a test of this package would show; the instrument it returns
	// then is a no-op.
	m := &Metrics{}
	m.dispatched, _ = mt.Int64Counter("siteops.relay.dispatched",
		metric.WithDescription("Inbox events handled by the relay, by event type and outcome."))
	m.retries, _ = mt.Int64Counter("siteops.relay.retries",
		metric.WithDescription("Dispatch attempts that failed and were scheduled again."))
	// A counter without attributes is exported from the start, at 0, as
	// an alert on its rate needs.
	m.retries.Add(context.Background(), 0)
	m.lag, _ = mt.Float64Gauge("siteops.relay.lag",
		metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest inbox event not yet dispatched (0 when none)."))
	m.pending, _ = mt.Int64Gauge("siteops.relay.pending_events",
		metric.WithUnit("{event}"),
		metric.WithDescription("Inbox events not yet dispatched."))
	m.dead, _ = mt.Int64Gauge("siteops.relay.dead_letters",
		metric.WithUnit("{event}"),
		metric.WithDescription("Dead letters in the inbox: events whose dispatch failed too often in a row, no longer retried until `siteops events replay` (the same in every replica: it counts the shared store)."))
	m.deadDone, _ = mt.Int64Counter("siteops.relay.dead_lettered",
		metric.WithDescription("Events this relay made dead letters, by event type."))
	// Exported at 0 from the start, like the retries, so that an alert
	// sees the series before the first dead letter.
	m.dead.Record(context.Background(), 0)
	m.signalDelay = newSignalDelay(mt)
	return m
}

// dispatch counts an inbox event the relay handled.
func (m *Metrics) dispatch(ctx context.Context, typ, outcome string) {
	m.dispatched.Add(ctx, 1, metric.WithAttributes(attribute.String("type", typ), attribute.String("outcome", outcome)))
}

// retry counts a failed dispatch scheduled again.
func (m *Metrics) retry(ctx context.Context) { m.retries.Add(ctx, 1) }

// deadLetters sets how many dead letters the inbox holds.
func (m *Metrics) deadLetters(ctx context.Context, n int) { m.dead.Record(ctx, int64(n)) }

// deadLettered counts an event the relay stopped retrying.
func (m *Metrics) deadLettered(ctx context.Context, typ string) {
	m.deadDone.Add(ctx, 1, metric.WithAttributes(attribute.String("type", typ)))
}

// inbox sets the relay's gauges from the inbox's state.
func (m *Metrics) inbox(ctx context.Context, pending int, lag time.Duration) {
	m.pending.Record(ctx, int64(pending))
	m.lag.Record(ctx, lag.Seconds())
}
