package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/wiring"
)

// probeCmd is a container health check run inside the container: the
// siteops images are distroless, with no shell and no HTTP client, so the
// binary itself asks the process beside it.
func (c *cli) probeCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "probe worker|ingress",
		Short: "Exit 0 when the worker or ingress in this container answers its health check (for Docker health checks)",
		Long: `Ask the siteops process running beside this command whether it is healthy,
as a container health check does (the images have no shell and no HTTP
client): for ingress, GET /readyz on SITEOPS_INGRESS_ADMIN_ADDR (ready: the
store answers); for worker, GET /healthz on SITEOPS_METRICS_ADDR (the
process runs). It reads the same variables as the process, so it asks the
address the process listens on; an address without a host (":9091") is
asked on 127.0.0.1. Exit 0 on a 200 answer, 1 otherwise, with one line
saying what answered.`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"worker", "ingress"},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return wiring.Probe(ctx, args[0])
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the answer")
	return cmd
}
