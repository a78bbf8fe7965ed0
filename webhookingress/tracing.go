package webhookingress

import (
	"context"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

const tracerName = "github.com/siteops/siteops/webhookingress"

// Traced wraps the ingress in an OpenTelemetry server span per request,
// named by route, joining the sender's trace when it sent one.
func Traced(h http.Handler) http.Handler {
	return otelhttp.NewHandler(h, "ingress", otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
		if r.Pattern != "" {
			return r.Pattern
		}
		return r.Method + " " + r.URL.Path
	}))
}

// traceparent returns the W3C trace context of the request's span — or,
// when the handler runs untraced, the one the sender sent, if valid — to be
// stored with the event so that the relay's dispatch joins the trace.
func traceparent(r *http.Request) string {
	ctx := r.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(r.Header))
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// dispatchSpan starts the relay's span for an event, as a child of the
// delivery's span when its trace context was stored.
func dispatchSpan(ctx context.Context, tp, eventID, eventType string) (context.Context, trace.Span) {
	if tp != "" {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
	}
	return otel.Tracer(tracerName).Start(ctx, "relay "+eventType, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("siteops.event_id", eventID), attribute.String("siteops.event_type", eventType)))
}
