package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/doctor"
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
			url, err := probeURL(args[0])
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return usageError{err}
			}
			resp, err := (&http.Client{}).Do(req)
			if err != nil {
				return fmt.Errorf("the %s does not answer GET %s: %w", args[0], url, err)
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("the %s answered GET %s with %s", args[0], url, resp.Status)
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the answer")
	return cmd
}

// probeURL is the health endpoint of role's process, from the variables
// that process reads.
func probeURL(role string) (string, error) {
	var addr, setting, path, example string
	switch role {
	case "ingress":
		var in config.Ingress
		if err := config.Load(&in); err != nil {
			return "", err
		}
		addr, setting, path, example = in.AdminAddr, "SITEOPS_INGRESS_ADMIN_ADDR", "/readyz", ":9091"
	case "worker":
		var w config.Worker
		if err := config.Load(&w); err != nil {
			return "", err
		}
		addr, setting, path, example = w.MetricsAddr, "SITEOPS_METRICS_ADDR", "/healthz", ":9090"
	default:
		return "", usageError{fmt.Errorf("siteops probe %q: probe worker or ingress", role)}
	}
	if addr == "" {
		return "", usageError{fmt.Errorf("%s is empty, so the %s serves no %s to probe; set it, e.g. %s", setting, role, path, example)}
	}
	url, err := doctor.LocalURL(addr, path)
	if err != nil {
		return "", usageError{fmt.Errorf("%s=%q is not HOST:PORT (%w); set it, e.g. %s", setting, addr, err, example)}
	}
	return url, nil
}
