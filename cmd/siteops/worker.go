package main

import (
	"github.com/spf13/cobra"

	"github.com/siteops/siteops/config"
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
			return worker.Run(cmd.Context(), cfg, newLogger(cmd.ErrOrStderr()))
		},
	}
}
