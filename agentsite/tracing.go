package agentsite

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

type routeKey struct{}

func withRoute(ctx context.Context, route string) context.Context {
	return context.WithValue(ctx, routeKey{}, route)
}

func routeFrom(ctx context.Context) string {
	r, _ := ctx.Value(routeKey{}).(string)
	return r
}

// routeTagger sits inside the otelhttp transport, where the request context
// carries the client span, and names the route template on it so that spans
// group by endpoint rather than by site id.
type routeTagger struct{ next http.RoundTripper }

func (t routeTagger) RoundTrip(req *http.Request) (*http.Response, error) {
	if route := routeFrom(req.Context()); route != "" {
		trace.SpanFromContext(req.Context()).SetAttributes(attribute.String("http.route", route))
	}
	return t.next.RoundTrip(req)
}
