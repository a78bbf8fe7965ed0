package relay

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/siteops/siteops/store"
)

const tracerName = "github.com/siteops/siteops/relay"

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
		trace.WithAttributes(attribute.String("siteops.event_id", first.EventID), attribute.String("siteops.event_type", TypeLabel(first)),
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
	return otel.Tracer(tracerName).Start(ctx, "relay "+TypeLabel(first), opts...)
}

// maxLinks bounds the links of one dispatch span.
const maxLinks = 64
