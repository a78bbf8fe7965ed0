package webhookingress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/internal/telemetry"
	"github.com/siteops/siteops/store"
)

// Config is what an ingress process needs.
type Config struct {
	config.Temporal
	config.Database
	config.Ingress
}

// Server is an ingress process: the handler, the relay and their store.
type Server struct {
	Handler *Handler
	Relay   *Relay
	Store   *store.Store
	Client  client.Client
	log     *slog.Logger
}

// New opens the store and a lazy Temporal client (the ingress starts and
// accepts deliveries while Temporal is unreachable) and builds the handler
// and the relay. tel, when given, traces deliveries into the workflows and
// serves the SDK's metrics beside the ingress's on /metrics.
func New(ctx context.Context, cfg Config, logger *slog.Logger, tel *telemetry.Telemetry) (*Server, error) {
	if err := cfg.Temporal.Validate(); err != nil {
		return nil, err
	}
	key, err := cfg.Key()
	if err != nil {
		return nil, err
	}
	var opts []store.Option
	if key != nil {
		opts = append(opts, store.WithSecretKey(key))
	}
	st, err := store.Open(ctx, cfg.Database.URL, opts...)
	if err != nil {
		return nil, err
	}
	var envSecrets []string
	for s := range strings.SplitSeq(cfg.WebhookSecrets, ",") {
		if s = strings.TrimSpace(s); s != "" {
			envSecrets = append(envSecrets, s)
		}
	}
	if key == nil && len(envSecrets) == 0 {
		_ = st.Close()
		return nil, errors.New("the ingress has no signing secret: set SITEOPS_WEBHOOK_SECRETS for POST /webhooks, or SITEOPS_SECRET_KEY to use the secrets of endpoints stored by `siteops webhook create` and rotations")
	}
	c, err := cfg.LazyClient(logger, tel)
	if err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("preparing the Temporal client: %w", err)
	}
	var reg *prometheus.Registry
	if tel != nil {
		reg = tel.Registry
	} else {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	m := NewMetrics(reg)
	relay := &Relay{Store: st, Temporal: c, TaskQueue: cfg.TaskQueue, Logger: logger, Metrics: m}
	var secrets SecretStore
	if key != nil {
		secrets = st
	}
	h := NewHandler(Options{
		Inbox: st, Secrets: secrets, EnvSecrets: envSecrets, Window: cfg.ReplayWindow,
		Logger: logger, Metrics: m, Registry: reg, Recorded: relay.Wake,
	})
	return &Server{Handler: h, Relay: relay, Store: st, Client: c, log: logger}, nil
}

// Serve serves on ln and runs the relay until ctx is done, then shuts down
// gracefully and closes the store.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           Traced(s.Handler),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      15 * time.Second,
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Relay.Run(relayCtx) })
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("ingress listening", "addr", ln.Addr().String())
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = srv.Shutdown(shutdownCtx)
		cancel()
		if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
			err = serveErr
		}
	}
	stopRelay()
	wg.Wait()
	s.Client.Close()
	_ = s.Store.Close()
	return err
}

// Run listens on cfg.Addr and serves until ctx is done.
func Run(ctx context.Context, cfg Config, logger *slog.Logger, tel *telemetry.Telemetry) error {
	s, err := New(ctx, cfg, logger, tel)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		s.Client.Close()
		_ = s.Store.Close()
		return fmt.Errorf("listening on %s: %w; set SITEOPS_INGRESS_ADDR", cfg.Addr, err)
	}
	return s.Serve(ctx, ln)
}
