package agentsite

import (
	"context"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const meterName = "github.com/siteops/siteops/agentsite"

// instruments are the client's metrics: requests by route and outcome, and
// the breaker's state. They go to the global meter provider, which is a
// no-op until a process sets one up.
type instruments struct {
	requests metric.Int64Counter
}

func newInstruments(b *breaker) instruments {
	m := otel.Meter(meterName)
	requests, _ := m.Int64Counter("siteops.agentsite.requests",
		metric.WithDescription("Agent-Site API requests by method, route and outcome (HTTP status, transport_error, breaker_open)."))
	_, _ = m.Int64ObservableGauge("siteops.agentsite.breaker.state",
		metric.WithDescription("Circuit breaker state: 0 closed, 1 half-open, 2 open."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(b.cb.State()))
			return nil
		}))
	return instruments{requests: requests}
}

func (in instruments) record(ctx context.Context, method, route string, status int, err error) {
	outcome := strconv.Itoa(status)
	var open *BreakerOpenError
	switch {
	case errors.As(err, &open):
		outcome = "breaker_open"
	case status == 0 && err != nil:
		outcome = "transport_error"
	}
	in.requests.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(
		attribute.String("method", method), attribute.String("route", apiPrefix+route), attribute.String("outcome", outcome)))
}
