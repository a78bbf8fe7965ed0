package ingress

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ServerName is the server.address of the ingress's spans and HTTP server
// metrics.
const ServerName = "siteops-ingress"

// Traced wraps the ingress in an OpenTelemetry server span per request,
// named by route, joining the sender's trace when it sent one, and records
// otelhttp's HTTP server metrics on the global meter provider.
func Traced(h http.Handler) http.Handler { return traced(h, nil) }

// traced is Traced recording its metrics on mp (nil: the global one).
//
// otelhttp labels its metrics with the request's Host header (server.address
// and server.port) unless told the server's name: any client could then
// add a series per Host it sends (2,100 requests with distinct Hosts made
// 106,000 series). So the server is named, and the Host replaced by that
// name before otelhttp sees it (the port otherwise comes from the Host);
// the routes only ever match on the path. Its other labels are bounded by
// otelhttp or by the mux: the method ("_OTHER" beyond the standard ones),
// the route (a pattern of the mux, none when no route matched), the status
// code (the ones this package and net/http answer), the scheme and the
// protocol version (HTTP/1.x).
func traced(h http.Handler, mp metric.MeterProvider) http.Handler {
	opts := []otelhttp.Option{
		otelhttp.WithServerName(ServerName),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if r.Pattern != "" {
				return r.Pattern
			}
			return clipLog(r.Method + " " + r.URL.Path)
		}),
	}
	if mp != nil {
		opts = append(opts, otelhttp.WithMeterProvider(mp))
	}
	inner := otelhttp.NewHandler(h, "ingress", opts...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Host = ServerName
		inner.ServeHTTP(w, r)
	})
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
