package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/internal/telemetry"
	"github.com/siteops/siteops/webhookingress"
)

func newIngressCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ingress",
		Short: "Receive signed webhooks, record them, and relay them to workflows",
		Long: `Receive the Agent-Site service's signed webhooks on SITEOPS_INGRESS_ADDR:

  POST /webhooks             secrets from SITEOPS_WEBHOOK_SECRETS (and any stored for it)
  POST /webhooks/{receiver}  secrets of the endpoints stored for that receiver path
  GET  /healthz  /readyz  /metrics

Each delivery is verified, recorded under its event id and answered at once
(200 new, 204 duplicate, 400 malformed, 401 bad signature or age, 404 unknown
receiver, 413 too large, 503 store down). The relay in the same process
signals the workflows; Temporal being down delays only the relay.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cfg webhookingress.Config
			if err := config.Load(&cfg); err != nil {
				return err
			}
			tel, err := telemetry.Setup(cmd.Context(), telemetry.Options{Service: "siteops-ingress"})
			if err != nil {
				return err
			}
			defer func() { _ = tel.Shutdown(context.Background()) }()
			return webhookingress.Run(cmd.Context(), cfg, newLogger(cmd.ErrOrStderr()), tel)
		},
	}
}
