package main

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/telemetry"
	"github.com/siteops/siteops/wiring"
)

func (c *cli) ingressCmd() *cobra.Command {
	var tf temporalFlags
	var pf preflightFlags
	cmd := &cobra.Command{
		Use:   "ingress",
		Short: "Receive signed webhooks, record them, and relay them to workflows",
		Long: `Receive the Agent-Site service's signed webhooks on SITEOPS_INGRESS_ADDR:

  POST /webhooks             secrets from SITEOPS_WEBHOOK_SECRETS (and any stored for it)
  POST /webhooks/{receiver}  secrets of the endpoints stored for that receiver path
  GET  /healthz

and GET /metrics, /readyz and /healthz on SITEOPS_INGRESS_ADMIN_ADDR (an
internal address, 127.0.0.1:9091 unless set; empty: none).

Each delivery is verified, recorded under its event id and answered at once
(200 new, also a verified body that is not an envelope, recorded as
malformed; 204 duplicate; 400 malformed header; 401 bad signature, age,
unknown receiver or a stored secret that does not decrypt, alike; 408 body
too slow; 413 too large, or a body on a route that takes none; 503 with
Retry-After: store down or busy). The relay in the same process
signals the workflows; Temporal being down delays only the relay.

At start it checks its settings and says where its store is, migrates the
store (waiting for a database that does not answer yet), and runs the checks
of 'siteops doctor' that concern it: the database, and SITEOPS_SECRET_KEY
against the stored secrets. It refuses to start only on what no retry fixes
(a database behind this build's schema, a key that reads none of the stored
secrets; --skip-checks starts anyway, logging each failure as an error) and
on a busy address. A transient failure is retried for 30 s; it, a secret of
several that does not decrypt, and Temporal being down (checked in the
background) start it degraded: logged, siteops_check_ok, /readyz.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cfg wiring.IngressConfig
			if err := config.Load(&cfg); err != nil {
				return err
			}
			tf.apply(&cfg.Temporal)
			return c.runProcess(cmd, "siteops-ingress", func(logger *slog.Logger, tel *telemetry.Telemetry) error {
				return wiring.RunIngress(cmd.Context(), cfg, logger, tel, pf.options())
			})
		},
	}
	tf.register(cmd)
	pf.register(cmd)
	return cmd
}
