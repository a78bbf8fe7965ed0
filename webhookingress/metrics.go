package webhookingress

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the ingress's and the relay's Prometheus metrics.
type Metrics struct {
	Deliveries *prometheus.CounterVec
	Dispatched *prometheus.CounterVec
	Retries    prometheus.Counter
	RelayLag   prometheus.Gauge
	Pending    prometheus.Gauge
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "siteops_webhook_deliveries_total",
			Help: "Webhook deliveries by outcome (accepted, duplicate, rejected) and reason.",
		}, []string{"outcome", "reason"}),
		Dispatched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "siteops_relay_dispatched_total",
			Help: "Inbox events handled by the relay, by event type and outcome.",
		}, []string{"type", "outcome"}),
		Retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "siteops_relay_retries_total",
			Help: "Dispatch attempts that failed and were scheduled again.",
		}),
		RelayLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "siteops_relay_lag_seconds",
			Help: "Age of the oldest inbox event not yet dispatched (0 when none).",
		}),
		Pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "siteops_relay_pending_events",
			Help: "Inbox events not yet dispatched.",
		}),
	}
	reg.MustRegister(m.Deliveries, m.Dispatched, m.Retries, m.RelayLag, m.Pending)
	return m
}
