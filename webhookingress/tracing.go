package webhookingress

import (
	"context"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/siteops/siteops/store"
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

// dispatchSpan starts the relay's span for a dispatch, as a child of the
// first event's delivery span when its trace context was stored, and
// linked to the deliveries of the other events it carries.
func dispatchSpan(ctx context.Context, evs []store.InboxEvent) (context.Context, trace.Span) {
	first := evs[0]
	if first.TraceContext != "" {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": first.TraceContext})
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("siteops.event_id", first.EventID), attribute.String("siteops.event_type", typeLabel(first)),
			attribute.Int("siteops.events", len(evs))),
	}
	for _, ev := range evs[1:min(len(evs), maxLinks+1)] {
		if ev.TraceContext == "" {
			continue
		}
		lctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": ev.TraceContext})
		if sc := trace.SpanContextFromContext(lctx); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	return otel.Tracer(tracerName).Start(ctx, "relay "+typeLabel(first), opts...)
}

// maxLinks bounds the links of one dispatch span.
const maxLinks = 64
