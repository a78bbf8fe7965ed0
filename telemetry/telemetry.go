// Package telemetry sets up OpenTelemetry for a siteops process: traces
// (off unless the standard OTEL_* variables choose an exporter, or a caller
// asks for stdout), the W3C trace-context propagator, and metrics in
// Prometheus format — the Temporal SDK's and siteops' own — on one registry.
package telemetry

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// Options tune Setup.
type Options struct {
	// Service names the process in traces (siteops-worker, siteops-ingress).
	Service string
	// StdoutTraces, when set, receives every span as JSON, whatever OTEL_*
	// says.
	StdoutTraces io.Writer
	// SpanProcessor, when set, also receives every span (tests).
	SpanProcessor sdktrace.SpanProcessor
}

// Telemetry is a process's tracing and metrics.
type Telemetry struct {
	// Registry serves /metrics.
	Registry *prometheus.Registry
	// MeterProvider is the process's meter provider (also the global one):
	// what it records, Registry serves.
	MeterProvider metric.MeterProvider
	// Tracing reports whether spans are exported anywhere.
	Tracing  bool
	metrics  client.MetricsHandler
	tracer   interceptor.Interceptor
	shutdown []func(context.Context) error
}

// Setup installs the global tracer and meter providers and the propagator.
func Setup(ctx context.Context, o Options) (*Telemetry, error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	t := &Telemetry{Registry: prometheus.NewRegistry()}
	t.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	res := resource.NewSchemaless(semconv.ServiceName(o.Service))
	var tpOpts []sdktrace.TracerProviderOption
	switch {
	case o.StdoutTraces != nil:
		exp, err := stdouttrace.New(stdouttrace.WithWriter(o.StdoutTraces))
		if err != nil {
			return nil, err
		}
		tpOpts = append(tpOpts, sdktrace.WithSyncer(exp))
	case tracesConfigured():
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, err
		}
		tpOpts = append(tpOpts, sdktrace.WithBatcher(exp))
	}
	if o.SpanProcessor != nil {
		tpOpts = append(tpOpts, sdktrace.WithSpanProcessor(o.SpanProcessor))
	}
	if len(tpOpts) > 0 {
		tp := sdktrace.NewTracerProvider(append(tpOpts, sdktrace.WithResource(res))...)
		otel.SetTracerProvider(tp)
		t.Tracing = true
		t.shutdown = append(t.shutdown, tp.Shutdown)
	}

	mp, err := newMeterProvider(t.Registry, res)
	if err != nil {
		return nil, err
	}
	t.MeterProvider = mp
	otel.SetMeterProvider(mp)
	t.shutdown = append(t.shutdown, mp.Shutdown)
	t.metrics = temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{Meter: mp.Meter("go.temporal.io/sdk"), UseMonotonicCounters: true})

	tracer, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{})
	if err != nil {
		return nil, err
	}
	t.tracer = tracer
	return t, nil
}

// NewMeterProvider returns a meter provider of its own whose metrics reg
// serves in Prometheus format, named as the process's are: for a component
// that runs without the process's telemetry (a handler built alone, tests).
// It adds no target_info, so reg may also be a process's registry.
func NewMeterProvider(reg prometheus.Registerer) (*sdkmetric.MeterProvider, error) {
	return newMeterProvider(reg, nil)
}

// newMeterProvider is the one Prometheus exporter configuration: OTel names
// translated the Prometheus way (dots to underscores, a unit suffix such as
// _seconds, _total on counters), without scope labels, and with the
// resource as target_info when there is one.
func newMeterProvider(reg prometheus.Registerer, res *resource.Resource) (*sdkmetric.MeterProvider, error) {
	opts := []otelprom.Option{otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo()}
	if res == nil {
		opts = append(opts, otelprom.WithoutTargetInfo())
	}
	exp, err := otelprom.New(opts...)
	if err != nil {
		return nil, err
	}
	mpOpts := []sdkmetric.Option{sdkmetric.WithReader(exp)}
	if res != nil {
		mpOpts = append(mpOpts, sdkmetric.WithResource(res))
	}
	return sdkmetric.NewMeterProvider(mpOpts...), nil
}

// tracesConfigured reports whether the standard variables ask for spans.
func tracesConfigured() bool {
	if e := os.Getenv("OTEL_TRACES_EXPORTER"); e != "" {
		return e != "none"
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// ClientOptions adds the SDK's tracing interceptor and metrics handler to
// Temporal client options, so that workflows, activities and signals join
// the caller's trace and the SDK's metrics reach /metrics.
func (t *Telemetry) ClientOptions(o *client.Options) {
	if t == nil {
		return
	}
	o.Interceptors = append(o.Interceptors, t.tracer)
	o.MetricsHandler = t.metrics
}

// Shutdown flushes spans and metrics.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}

// Handler serves /metrics.
func (t *Telemetry) Handler() http.Handler {
	return promhttp.HandlerFor(t.Registry, promhttp.HandlerOpts{})
}

// ServeMetrics serves GET /metrics and GET /healthz on ln until ctx is
// done.
func (t *Telemetry) ServeMetrics(ctx context.Context, ln net.Listener) error {
	return t.ServeMetricsAndReadiness(ctx, ln, nil)
}

// ServeMetricsAndReadiness is ServeMetrics with GET /readyz answered by
// readyz, when it is not nil.
func (t *Telemetry) ServeMetricsAndReadiness(ctx context.Context, ln net.Listener, readyz http.Handler) error {
	return t.serve(ctx, ln, readyz, metricsTimeouts)
}

// serverTimeouts bound how long a client of the metrics and readiness
// server may take to send its request's header, the whole request, to
// read the answer, and how long its connection may idle between requests.
type serverTimeouts struct {
	readHeader, read, write, idle time.Duration
}

// metricsTimeouts are the metrics and readiness server's: a scrape or a
// probe is a header alone, and its answer a few hundred kilobytes at most;
// a connection idles for more than one scrape interval of Prometheus's
// default minute.
var metricsTimeouts = serverTimeouts{readHeader: 5 * time.Second, read: 10 * time.Second, write: 30 * time.Second, idle: 90 * time.Second}

// maxMetricsHeader bounds a request's header: a scrape's is a few lines.
const maxMetricsHeader = 16 << 10

// serve is ServeMetricsAndReadiness within to.
func (t *Telemetry) serve(ctx context.Context, ln net.Listener, readyz http.Handler, to serverTimeouts) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", t.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	if readyz != nil {
		mux.Handle("GET /readyz", readyz)
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: to.readHeader,
		ReadTimeout:       to.read,
		WriteTimeout:      to.write,
		IdleTimeout:       to.idle,
		MaxHeaderBytes:    maxMetricsHeader,
	}
	go func() {
		<-ctx.Done()
		// The serving context is done: shutdown gets a fresh deadline.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
