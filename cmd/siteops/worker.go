package main

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/telemetry"
	"github.com/siteops/siteops/wiring"
)

func (c *cli) workerCmd() *cobra.Command {
	var tf temporalFlags
	var pf preflightFlags
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the Temporal worker that executes siteops workflows and activities",
		Long: `Run the Temporal worker that executes siteops workflows and activities.

Reads the Temporal connection (TEMPORAL_*), SITEOPS_TASK_QUEUE,
AGENTSITE_BASE_URL, AGENTSITE_API_KEY, SITEOPS_DATABASE_URL,
SITEOPS_SECRET_KEY and SITEOPS_METRICS_ADDR. It checks those settings first
and says where its store and Temporal are, then migrates the store; a
database or a Temporal that does not answer yet is waited for. Before it
polls it runs the checks of 'siteops doctor' that concern it (Temporal and the
namespace, the search attributes, the API key, the database, the secret key)
and refuses to start only on what no retry fixes: the API refusing the key,
a missing namespace or search attribute, a secret key that reads none of the
stored secrets (--skip-checks starts anyway, logging each failure as an
error). A transient failure (5xx, 429, a timeout) is retried for 30 s, then
the worker starts degraded and checks again every 30 s: logged,
siteops_check_ok, /readyz on SITEOPS_METRICS_ADDR. On SIGTERM or Ctrl-C it stops polling
and gives in-flight activities 30 s to finish; the rest are retried by
another worker.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cfg wiring.WorkerConfig
			if err := config.Load(&cfg); err != nil {
				return err
			}
			tf.apply(&cfg.Temporal)
			return c.runProcess(cmd, "siteops-worker", func(logger *slog.Logger, tel *telemetry.Telemetry) error {
				if !cfg.Versioning {
					logger.Warn("Worker Versioning is off (SITEOPS_WORKER_VERSIONING=false): a new build takes over running workflows at once")
				}
				return wiring.RunWorker(cmd.Context(), cfg, logger, tel, pf.options())
			})
		},
	}
	tf.register(cmd)
	pf.register(cmd)
	return cmd
}
