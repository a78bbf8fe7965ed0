package ingress

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/telemetry"
)

const meterName = "github.com/siteops/siteops/ingress"

// Metrics are the ingress's metrics (the relay's are relay.Metrics), recorded with the
// OpenTelemetry meter API as every siteops metric is. The Prometheus
// exporter names them: a counter gets _total, a unit of seconds _seconds.
//
//	siteops_webhook_deliveries_total{outcome,reason}  counter
//	siteops_webhook_refusals_total{receiver,reason}   counter (refusals.go)
//	siteops_webhook_header_mismatches_total{header}   counter
//	siteops_webhook_held_total{outcome}               counter
//	siteops_webhook_rejection_logs_suppressed_total    counter
//	siteops_webhook_error_logs_suppressed_total        counter
//	siteops_webhook_unreadable_secrets{receiver}      gauge
//	siteops_webhook_connections                       gauge
//	siteops_webhook_connections_shed_total{action}    counter
//
// Every label's values are bounded whatever a client sends: outcome,
// reason, header and action are fixed sets in this package, receiver names
// only receivers whose stored secrets the store lists (a refusal's
// receiver that the list does not hold is UnknownReceiverLabel), and the
// relay's type only verified events. The HTTP server metrics of otelhttp
// (Traced) are bounded too: see Traced.
type Metrics struct {
	deliveries metric.Int64Counter
	refusals   metric.Int64Counter
	mismatches metric.Int64Counter
	held       metric.Int64Counter
	suppressed metric.Int64Counter
	errSupp    metric.Int64Counter
	unreadable metric.Int64Gauge
	conns      metric.Int64UpDownCounter
	shed       metric.Int64Counter

	// registry serves the metrics when NewMetrics made their provider.
	registry prometheus.Gatherer
}

// NewMetrics returns metrics on a meter provider of their own whose
// Prometheus exporter registers with reg: for a handler or relay that runs
// without the process's telemetry, and tests. Like prometheus.MustRegister,
// it panics if reg refuses the exporter.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	mp, err := telemetry.NewMeterProvider(reg)
	if err != nil {
		panic(fmt.Sprintf("ingress: registering the metrics exporter: %v", err))
	}
	m := NewMetricsOn(mp)
	if g, ok := reg.(prometheus.Gatherer); ok {
		m.registry = g
	}
	return m
}

// NewMetricsOn returns metrics on mp, the process's meter provider
// (telemetry.Telemetry.MeterProvider).
func NewMetricsOn(mp metric.MeterProvider) *Metrics {
	mt := mp.Meter(meterName)
	// A meter only fails an instrument with an invalid name or option,
	// which a test of this package would show; the instrument it returns
	// then is a no-op.
	m := &Metrics{}
	m.deliveries, _ = mt.Int64Counter("siteops.webhook.deliveries",
		metric.WithDescription("Webhook deliveries by outcome (accepted, duplicate, malformed: verified but not an envelope, recorded and answered 200; rejected) and reason (for rejected: unknown_receiver, invalid_signature, secret_unreadable, busy, ...)."))
	m.refusals, _ = mt.Int64Counter("siteops.webhook.refusals",
		metric.WithDescription("Refused deliveries (POST /webhooks[/receiver]) by receiver (default for POST /webhooks; "+UnknownReceiverLabel+" for every name the list of receivers does not hold) and reason, as siteops_webhook_deliveries_total{outcome=\"rejected\"} counts them; `siteops events list --refused` shows the names."))
	m.mismatches, _ = mt.Int64Counter("siteops.webhook.header_mismatches",
		metric.WithDescription("Verified deliveries whose svc-event-id or svc-event-type header (header) differs from the signed body; they are recorded under the body's id and type."))
	m.held, _ = mt.Int64Counter("siteops.webhook.held",
		metric.WithDescription("Deliveries held while their receiver expected a new secret (outcome held), or answered at once because MaxHeld were held (refused_full)."))
	m.suppressed, _ = mt.Int64Counter("siteops.webhook.rejection_logs_suppressed",
		metric.WithDescription("Rejected deliveries not logged because more than the log's rate of rejections came in one second (siteops_webhook_deliveries_total counts them all)."))
	m.suppressed.Add(context.Background(), 0)
	m.errSupp, _ = mt.Int64Counter("siteops.webhook.error_logs_suppressed",
		metric.WithDescription("Store failures of the ingress not logged because more than the log's rate of them came in one second (siteops_webhook_deliveries_total{reason=\"store_unavailable\"} counts them all)."))
	m.errSupp.Add(context.Background(), 0)
	m.conns, _ = mt.Int64UpDownCounter("siteops.webhook.connections",
		metric.WithUnit("{connection}"),
		metric.WithDescription("Connections open on the webhook port (at most SITEOPS_INGRESS_MAX_CONNECTIONS)."))
	m.conns.Add(context.Background(), 0)
	m.shed, _ = mt.Int64Counter("siteops.webhook.connections_shed",
		metric.WithDescription("Connections of the webhook port closed at the connection cap to admit another (action closed_answered: a refused request's, answered and closing; closed_idle: the keep-alive connection idle longest; closed_slow: the one waiting longest for its header or body; closed_busy: the one longest in its request, past SITEOPS_INGRESS_SHED_BUSY_AFTER), or refused with 503 (refused: every connection busy, none for that long)."))
	m.unreadable, _ = mt.Int64Gauge("siteops.webhook.unreadable_secrets",
		metric.WithUnit("{secret}"),
		metric.WithDescription("Active stored signing secrets of a receiver that do not decrypt with SITEOPS_SECRET_KEY (skipped)."))
	return m
}

// delivery counts an answered delivery; reason is empty unless rejected.
func (m *Metrics) delivery(ctx context.Context, outcome, reason string) {
	m.deliveries.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome), attribute.String("reason", reason)))
}

// refusal counts a refused delivery by its receiver's label and reason.
func (m *Metrics) refusal(ctx context.Context, receiver, reason string) {
	m.refusals.Add(ctx, 1, metric.WithAttributes(attribute.String("receiver", receiver), attribute.String("reason", reason)))
}

// hold counts a delivery held, or refused a hold (refused_full).
func (m *Metrics) hold(ctx context.Context, outcome string) {
	m.held.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}

// headerMismatch counts a verified delivery whose header differs from its
// body; header is svc-event-id or svc-event-type.
func (m *Metrics) headerMismatch(ctx context.Context, header string) {
	m.mismatches.Add(ctx, 1, metric.WithAttributes(attribute.String("header", header)))
}

// logSuppressed counts a rejection left out of the log.
func (m *Metrics) logSuppressed(ctx context.Context) { m.suppressed.Add(ctx, 1) }

// errorLogSuppressed counts a store failure left out of the log.
func (m *Metrics) errorLogSuppressed(ctx context.Context) { m.errSupp.Add(ctx, 1) }

// connOpened counts connections opened (n > 0) and closed (n < 0).
func (m *Metrics) connOpened(ctx context.Context, n int64) { m.conns.Add(ctx, n) }

// connShed counts a connection closed or refused at the cap.
func (m *Metrics) connShed(ctx context.Context, action string) {
	m.shed.Add(ctx, 1, metric.WithAttributes(attribute.String("action", action)))
}

// unreadableSecrets sets how many of the receiver's secrets do not
// decrypt.
func (m *Metrics) unreadableSecrets(ctx context.Context, receiver string, n int) {
	m.unreadable.Record(ctx, int64(n), metric.WithAttributes(attribute.String("receiver", store.ReceiverName(receiver))))
}
