package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/internal/telemetry"
	"github.com/siteops/siteops/store"
)

// Config is what a worker process needs.
type Config struct {
	config.Temporal
	config.AgentSite
	config.Database
	// AllowLoopback lets webhook endpoints point at loopback receivers: the
	// simulator's test mode, for demos and tests only.
	AllowLoopback bool `envconfig:"SITEOPS_ALLOW_LOOPBACK_RECEIVERS" default:"false"`
	// MetricsAddr serves the worker's /metrics (empty: none).
	MetricsAddr string `envconfig:"SITEOPS_METRICS_ADDR" default:":9090"`
}

// StopTimeout is how long a stopping worker lets in-flight activities
// finish; the ones still running after it are retried by another worker.
const StopTimeout = 30 * time.Second

// APITimeout bounds one Agent-Site request; the workflows give an activity
// attempt 20 s.
const APITimeout = 10 * time.Second

// Run runs a worker until ctx is done, then stops it gracefully. tel, when
// given, traces workflows and activities and collects the SDK's metrics.
func Run(ctx context.Context, cfg Config, logger *slog.Logger, tel *telemetry.Telemetry) error {
	if err := cfg.AgentSite.Validate(); err != nil {
		return err
	}
	key, err := cfg.Key()
	if err != nil {
		return err
	}
	var opts []store.Option
	if key != nil {
		opts = append(opts, store.WithSecretKey(key))
	}
	st, err := store.Open(ctx, cfg.Database.URL, opts...)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	apiOpts := []agentsite.Option{agentsite.WithTimeout(APITimeout)}
	if cfg.AllowLoopback {
		logger.Warn("TEST MODE: webhook endpoints may point at loopback receivers (SITEOPS_ALLOW_LOOPBACK_RECEIVERS)")
		apiOpts = append(apiOpts, agentsite.WithLoopbackReceivers())
	}
	api, err := agentsite.NewClient(cfg.BaseURL, cfg.APIKey, apiOpts...)
	if err != nil {
		return err
	}
	c, err := cfg.Dial(ctx, logger, tel)
	if err != nil {
		return err
	}
	defer c.Close()
	w := sdkworker.New(c, cfg.TaskQueue, sdkworker.Options{WorkerStopTimeout: StopTimeout})
	Register(w, activities.New(api, st))
	if err := w.Start(); err != nil {
		return fmt.Errorf("starting the worker: %w", err)
	}
	logger.Info("worker started", "task_queue", cfg.TaskQueue, "temporal", cfg.Address, "namespace", cfg.Namespace, "api", api.BaseURL(), "store", st.Dialect())
	<-ctx.Done()
	logger.Info("worker stopping: in-flight activities get time to finish", "timeout", StopTimeout)
	w.Stop()
	return nil
}
