package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "siteops",
		Short: "Automate the Agent-Site API with durable Temporal workflows",
		Long: `siteops automates the Agent-Site API with durable Temporal workflows.

Configuration comes from environment variables (see the README); secrets have
no defaults and are never printed.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCmd(), newSignatureCmd(), newSimCmd(), newWorkerCmd(), newOnboardCmd(), newLeadsCmd(), newEmbedCmd(), newStatusCmd(), newIngressCmd(), newSecretCmd(), newWebhookCmd(), newDemoCmd(), newCodecServerCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the siteops version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "siteops", version)
			return err
		},
	}
}
