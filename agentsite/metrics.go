package agentsite

import (
	"context"
	"errors"
	"math"
	"strconv"
	"time"

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
		metric.WithDescription("Agent-Site API requests by method, route and outcome (HTTP status, transport_error, breaker_open, throttled, cancelled_before_sending)."))
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
	case errors.Is(err, ErrThrottled):
		outcome = "throttled"
	case errors.Is(err, errNotSent):
		outcome = "cancelled_before_sending"
	case status == 0 && err != nil:
		outcome = "transport_error"
	}
	in.requests.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(
		attribute.String("method", method), attribute.String("route", apiPrefix+route), attribute.String("outcome", outcome)))
}

// limiterInstruments are a Limiter's metrics, each with a "limiter"
// attribute that names it (WithLimiterName): the allowed rate, the time
// callers spent in Wait, the 429 answers seen and the Retry-After pauses.
type limiterInstruments struct {
	attrs       metric.MeasurementOption
	name        string
	wait        metric.Float64Histogram
	rateLimited metric.Int64Counter
	pauses      metric.Int64Counter
}

func newLimiterInstruments(l *Limiter, name string) limiterInstruments {
	m := otel.Meter(meterName)
	attrs := metric.WithAttributes(attribute.String("limiter", name))
	wait, _ := m.Float64Histogram("siteops.agentsite.limiter.wait",
		metric.WithUnit("s"),
		metric.WithDescription("Time a request waited for the Agent-Site rate limiter, by class (playbook, onboarding, bulk) and outcome (sent, throttled, cancelled)."))
	rateLimited, _ := m.Int64Counter("siteops.agentsite.limiter.rate_limited",
		metric.WithDescription("429 answers of the Agent-Site API seen by the rate limiter."))
	pauses, _ := m.Int64Counter("siteops.agentsite.limiter.pauses",
		metric.WithDescription("Times a Retry-After started or lengthened a pause of every caller."))
	_, _ = m.Float64ObservableGauge("siteops.agentsite.limiter.rate",
		metric.WithUnit("{request}/s"),
		metric.WithDescription("Requests per second the rate limiter allows now; absent while unlimited before the first 429."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			if r := l.Rate(); !math.IsInf(r, 1) {
				o.Observe(r, attrs)
			}
			return nil
		}))
	return limiterInstruments{attrs: attrs, name: name, wait: wait, rateLimited: rateLimited, pauses: pauses}
}

func (in limiterInstruments) waited(ctx context.Context, class Class, d time.Duration, err error) {
	outcome := "sent"
	switch {
	case errors.Is(err, ErrThrottled):
		outcome = "throttled"
	case err != nil:
		outcome = "cancelled"
	}
	in.wait.Record(context.WithoutCancel(ctx), d.Seconds(), metric.WithAttributes(
		attribute.String("limiter", in.name), attribute.String("class", class.String()), attribute.String("outcome", outcome)))
}
