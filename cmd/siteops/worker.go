package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/internal/telemetry"
	"github.com/siteops/siteops/worker"
)

func newWorkerCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Run the Temporal worker that executes siteops workflows and activities",
		Long: `Run the Temporal worker that executes siteops workflows and activities.

Reads TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, SITEOPS_TASK_QUEUE, AGENTSITE_BASE_URL,
AGENTSITE_API_KEY, SITEOPS_DATABASE_URL and SITEOPS_SECRET_KEY. On SIGTERM or
Ctrl-C it stops polling and gives in-flight activities 30 s to finish; the
rest are retried by another worker.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cfg worker.Config
			if err := config.Load(&cfg); err != nil {
				return err
			}
			logger := newLogger(cmd.ErrOrStderr())
			tel, err := telemetry.Setup(cmd.Context(), telemetry.Options{Service: "siteops-worker"})
			if err != nil {
				return err
			}
			defer func() { _ = tel.Shutdown(context.Background()) }()
			if cfg.MetricsAddr != "" {
				go func() {
					if err := tel.ServeMetrics(cmd.Context(), cfg.MetricsAddr); err != nil {
						logger.Error("metrics endpoint failed", "addr", cfg.MetricsAddr, "error", err)
					}
				}()
			}
			return worker.Run(cmd.Context(), cfg, logger, tel)
		},
	}
}
