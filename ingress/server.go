package ingress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/metric"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/relay"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/telemetry"
)

// ServerOptions are what an ingress process runs on, built by package
// wiring.
type ServerOptions struct {
	Store *store.Store
	// Temporal is the relay's client; a lazy one lets the ingress start and
	// accept deliveries while Temporal is unreachable.
	Temporal  client.Client
	TaskQueue string
	// EnvSecrets are accepted on POST /webhooks (SITEOPS_WEBHOOK_SECRETS).
	EnvSecrets []string
	// Window is the signature age window.
	Window time.Duration
	// MaxBody and MaxConcurrent bound the bodies read and the deliveries
	// verified and recorded at once (Options; zero for the defaults).
	MaxBody       int64
	MaxConcurrent int
	// MaxConns bounds the connections open on the webhook port
	// (DefaultMaxConns when zero; see connLimiter), and ShedBusyAfter is
	// how long a connection must have been in its request before the cap
	// may close it for a new one (DefaultShedBusyAfter when zero).
	MaxConns      int
	ShedBusyAfter time.Duration
	Logger        *slog.Logger
	// Registry serves GET /metrics and MeterProvider records the
	// ingress's metrics: in a process with telemetry, its Registry and
	// MeterProvider, the one exporting into the other. With MeterProvider
	// nil, the metrics get a meter provider of their own exporting into
	// Registry, or into a new registry (with the Go and process
	// collectors) when Registry is nil too.
	Registry      *prometheus.Registry
	MeterProvider metric.MeterProvider
	// Checks, when set, reports the process's start-up checks for
	// /readyz's body (Options.Checks).
	Checks func() (degraded bool, checks any)
	// Relay tunes the relay (its Retention, Pipelines, ...); New sets its
	// Store, Temporal, TaskQueue, Logger and Metrics from the fields above.
	Relay relay.Options
	// Refused tunes the record of refused deliveries (its Retention,
	// MaxRows; Disabled keeps none); New sets its Store to Store.
	Refused RefusedOptions
}

// Server is an ingress process: the handler, the relay and their store.
type Server struct {
	Handler *Handler
	Relay   *relay.Relay
	Store   *store.Store
	Client  client.Client
	log     *slog.Logger
	// conns bound the webhook port's connections; mp records otelhttp's
	// metrics (nil: the global meter provider).
	conns connLimits
	mp    metric.MeterProvider
}

// IdleTimeout closes a keep-alive connection of the webhook port that has
// had no request for that long. A sender that keeps its connection reuses
// it within seconds when it has deliveries; the connection cap closes idle
// connections sooner when it needs room.
const IdleTimeout = 30 * time.Second

// webhookServer returns the server of the webhook port and the listener it
// is to serve: ln, admitting connections within limits.
func webhookServer(h *Handler, ln net.Listener, limits connLimits, mp metric.MeterProvider) (*http.Server, net.Listener) {
	limited := newConnLimiter(ln, limits, h.opts.Metrics)
	return &http.Server{
		Handler:           traced(h, mp),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ConnState:         limited.state,
		ConnContext:       limited.context,
	}, limited
}

// ErrNoSecrets is returned when the ingress could verify nothing.
var ErrNoSecrets = errors.New("the ingress has no signing secret: set SITEOPS_WEBHOOK_SECRETS for POST /webhooks, or SITEOPS_SECRET_KEY to use the secrets of endpoints stored by `siteops webhook create` and rotations")

// withDefaults is o with a Registry and a MeterProvider where it has
// none: a new registry (with the Go and process collectors) and a meter
// provider exporting into it. A MeterProvider without its Registry is
// refused.
func (o ServerOptions) withDefaults() (ServerOptions, error) {
	if o.Registry == nil {
		if o.MeterProvider != nil {
			return o, errors.New("ingress: ServerOptions.MeterProvider is set without the Registry it exports into; set both (telemetry.Telemetry's) or neither")
		}
		o.Registry = prometheus.NewRegistry()
		o.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if o.MeterProvider == nil {
		own, err := telemetry.NewMeterProvider(o.Registry)
		if err != nil {
			return o, fmt.Errorf("ingress: registering the metrics exporter: %w", err)
		}
		o.MeterProvider = own
	}
	return o, nil
}

// New builds the handler and the relay over o's store and client.
func New(o ServerOptions) (*Server, error) {
	if !o.Store.HasSecretKey() && len(o.EnvSecrets) == 0 {
		return nil, ErrNoSecrets
	}
	// The HTTP server's own metrics (otelhttp) go to the process's meter
	// provider, the global one when it has none.
	httpMeters := o.MeterProvider
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	m := NewMetricsOn(o.MeterProvider)
	ro := o.Relay
	ro.Store, ro.Temporal, ro.TaskQueue, ro.Logger, ro.Metrics = o.Store, o.Temporal, o.TaskQueue, o.Logger, relay.NewMetricsOn(o.MeterProvider)
	rl := relay.New(ro)
	var secrets SecretStore
	if o.Store.HasSecretKey() {
		secrets = o.Store
	}
	refused := o.Refused
	refused.Store = o.Store
	h := NewHandler(Options{
		Inbox: o.Store, Secrets: secrets, EnvSecrets: o.EnvSecrets, Window: o.Window,
		MaxBody: o.MaxBody, MaxConcurrent: o.MaxConcurrent,
		Logger: o.Logger, Metrics: m, Registry: o.Registry, Recorded: rl.Wake, Checks: o.Checks,
		Refused: refused,
	})
	conns := connLimits{max: o.MaxConns, shedBusyAfter: o.ShedBusyAfter}.withDefaults()
	return &Server{Handler: h, Relay: rl, Store: o.Store, Client: o.Temporal, log: o.Logger, conns: conns, mp: httpMeters}, nil
}

// Serve serves the webhook routes on ln and runs the relay until ctx is
// done, then shuts down gracefully. The caller closes the store and the
// client. It serves no admin routes: see ServeWithAdmin.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.ServeWithAdmin(ctx, ln, nil)
}

// ServeWithAdmin is Serve, and serves the admin routes (/metrics, /readyz,
// /healthz) on admin when it is not nil: an internal address that only the
// operators' network (Prometheus, the kubelet) reaches.
//
// The webhook server is the part anyone can reach: at most MaxConns
// connections are open (see connLimiter), a request that is refused, or
// that is not a delivery or a GET /healthz without a body, has its
// connection closed with the answer, a request's header is bounded
// (MaxHeaderBytes) and must come within 5 s, a body within its deadline
// (Options.BodyTimeout), a request within 15 s, and a connection idle for
// 30 s is closed. The list of receivers is read every SecretRefresh
// meanwhile, so that requests rarely wait for a read and the
// unreadable-secrets gauge follows a fix without a delivery; and what the
// handler refused is written to the record of refused deliveries every
// second, and once more when ctx is done (refusals.go).
func (s *Server) ServeWithAdmin(ctx context.Context, ln, admin net.Listener) error {
	srv, limited := webhookServer(s.Handler, ln, s.conns, s.mp)
	servers := []*http.Server{srv}
	listeners := []net.Listener{limited}
	if admin != nil {
		servers = append(servers, &http.Server{
			Handler:           s.Handler.Admin(),
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       15 * time.Second,
			WriteTimeout:      30 * time.Second,
			MaxHeaderBytes:    MaxHeaderBytes,
		})
		listeners = append(listeners, admin)
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Relay.Run(relayCtx) })
	wg.Go(func() { s.Handler.watchReceivers(relayCtx) })
	wg.Go(func() { s.Handler.recordRefusals(relayCtx) })
	errc := make(chan error, len(servers))
	for i, hs := range servers {
		go func() { errc <- hs.Serve(listeners[i]) }()
	}
	s.log.Info("ingress listening", "addr", ln.Addr().String())
	if admin != nil {
		s.log.Info("ingress admin endpoint (metrics, readyz) listening", "addr", admin.Addr().String())
	}
	var err error
	select {
	case err = <-errc:
		// One server failed: stop the other too.
		for _, hs := range servers {
			_ = hs.Close()
		}
		for range len(servers) - 1 {
			<-errc //nolint:errcheck // the first error is the one returned
		}
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for _, hs := range servers {
			if serr := hs.Shutdown(shutdownCtx); serr != nil && err == nil {
				err = serr
			}
		}
		cancel()
		for range servers {
			if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
				err = serveErr
			}
		}
	}
	stopRelay()
	wg.Wait()
	return err
}
