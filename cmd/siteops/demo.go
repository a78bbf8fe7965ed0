package main

import (
	"github.com/spf13/cobra"

	"github.com/siteops/siteops/demo"
)

func (c *cli) demoCmd() *cobra.Command {
	var o demo.Options
	var traces bool
	cmd := &cobra.Command{
		Use:   "demo [--keep]",
		Short: "Run everything on this machine and show it working",
		Long: `Start a Temporal dev server (with its Web UI), the Agent-Site simulator, the
worker and the ingress on SQLite; register a webhook endpoint; onboard the two
sample sites; let visitors leave leads and watch the lead syncs catch up
through lead.created webhooks; run an embed incident; and rotate the webhook
signing secret while deliveries keep flowing. Ctrl-C stops everything.

Needs the pinned temporal CLI: 'make demo' builds it, or set SITEOPS_TEMPORAL_CLI.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Out = cmd.OutOrStdout()
			if traces {
				o.Traces = cmd.OutOrStdout()
			}
			return demo.Run(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.Keep, "keep", false, "leave everything running after the summary, until Ctrl-C")
	cmd.Flags().IntVar(&o.Leads, "leads", 200, "visitor leads per site")
	cmd.Flags().BoolVar(&traces, "trace-stdout", false, "print every OpenTelemetry span to stdout as JSON")
	cmd.Flags().StringVar(&o.Dir, "dir", "", "directory for the databases and the log (default: a new temporary one)")
	return cmd
}
