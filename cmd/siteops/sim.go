package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/simulator"
)

func newSimCmd() *cobra.Command {
	var (
		addr  string
		keys  []string
		cfg   simulator.Config
		f     simulator.Faults
		delay time.Duration
		retry time.Duration
		lat   time.Duration
		reord time.Duration
	)
	cmd := &cobra.Command{
		Use:   "sim --key TOKEN=SCOPES [flags]",
		Short: "Serve a local, stateful simulator of the Agent-Site API and its webhooks",
		Long: `Serve a local, stateful simulator of the Agent-Site API (/api/v1) that enforces
every rule of the contract and sends signed webhook deliveries with the
service's retry rules. State is in memory.

Control routes (with --admin-token) live under /_sim/:
  POST /_sim/sites/{site_id}/leads {"count": N}     create visitor leads
  POST /_sim/sites/{site_id}/conversations {"messages": N}
  POST /_sim/sites/{site_id}/broadcasts
  GET|PUT /_sim/faults                              faults at run time
  GET /_sim/requests | /_sim/events | /_sim/deliveries
  GET /_sim/stats                                   answers by status, fault, 429s by key

--rate-limit N throttles every API key at a fixed N requests per second (a
token bucket of --rate-limit-burst): a request over it is answered 429 with
Retry-After (whole seconds, at least 1) before anything is applied, as the
real service does. Change it at run time with PUT /_sim/faults
{"rate_limit_rps": N, "rate_limit_burst": B}.`,
		Example: `  siteops sim --key svc_live_dev='*' --admin-token admin --allow-loopback-receivers --time-scale 100
  siteops sim --key svc_live_dev='*' --rate-limit 20 --rate-limit-burst 5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			parsed, err := parseKeys(keys)
			if err != nil {
				return err
			}
			cfg.Keys = parsed
			f.RetryAfter, f.Latency, f.ReorderWindow, f.Delay = simulator.Duration(retry), simulator.Duration(lat), simulator.Duration(reord), simulator.Duration(delay)
			cfg.Faults = f
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			cfg.Logger = logger
			sim, err := simulator.New(cfg)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				sim.Close()
				return fmt.Errorf("listening on %s: %w (choose another --addr)", addr, err)
			}
			if cfg.AllowLoopbackReceivers {
				logger.Warn("TEST MODE: webhook endpoints on loopback addresses over http are allowed (--allow-loopback-receivers); never use this against real receivers")
			}
			admin := "off (no --admin-token)"
			if cfg.AdminToken != "" {
				admin = "on"
			}
			limit := "no rate limit"
			if f.RateLimitRPS > 0 {
				limit = fmt.Sprintf("rate limit %g/s per key, burst %d", f.RateLimitRPS, max(f.RateLimitBurst, 1))
			}
			_, _ = fmt.Fprintf(cmd.OutOrStdout(), "siteops sim: Agent-Site API on http://%s/api/v1 (%d keys, control routes %s, time scale %g, %s)\n", ln.Addr(), len(parsed), admin, cfg.TimeScale, limit)
			return sim.Serve(cmd.Context(), ln)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&addr, "addr", "127.0.0.1:8090", "listen address HOST:PORT")
	fl.StringArrayVar(&keys, "key", nil, "API key and its scopes as TOKEN=SCOPES (comma-separated, * for all); repeatable")
	fl.StringVar(&cfg.AdminToken, "admin-token", os.Getenv("SITEOPS_SIM_ADMIN_TOKEN"), "bearer token for the /_sim/ control routes (default $SITEOPS_SIM_ADMIN_TOKEN)")
	fl.BoolVar(&cfg.AllowLoopbackReceivers, "allow-loopback-receivers", false, "test mode: allow webhook URLs on 127.0.0.1/localhost over http")
	fl.Float64Var(&cfg.TimeScale, "time-scale", 1, "divide every delivery backoff and processing delay by N")
	fl.Uint64Var(&cfg.Seed, "seed", 1, "seed of the random source for faults and jitter")
	fl.DurationVar(&cfg.KnowledgeDelay, "knowledge-delay", 2*time.Second, "time a knowledge source takes to become ready (before --time-scale)")
	fl.DurationVar(&cfg.IdempotencyRetention, "idempotency-retention", 24*time.Hour, "how long idempotency keys are remembered")
	fl.Float64Var(&f.ErrorRate, "fault-error-rate", 0, "fraction of API requests answered 500 or 503 before being applied")
	fl.Float64Var(&f.RateLimitRate, "fault-rate-limit-rate", 0, "fraction of API requests answered 429 with Retry-After")
	fl.DurationVar(&retry, "fault-retry-after", time.Second, "Retry-After of injected 429 and 503 answers")
	fl.Float64Var(&f.RateLimitRPS, "rate-limit", 0, "throttle each API key at N requests per second, answering 429 with Retry-After beyond it (0 = no limit)")
	fl.IntVar(&f.RateLimitBurst, "rate-limit-burst", 1, "requests a key may send at once under --rate-limit")
	fl.DurationVar(&lat, "fault-latency", 0, "latency added to every API request")
	fl.Float64Var(&f.DropRate, "fault-drop-rate", 0, "fraction of mutations applied and then answered with a dropped connection")
	fl.Float64Var(&f.DuplicateRate, "fault-duplicate-rate", 0, "fraction of deliveries sent twice")
	fl.DurationVar(&reord, "fault-reorder-window", 0, "hold each first delivery for a random time up to this, so events arrive out of order")
	fl.Float64Var(&f.DelayRate, "fault-delay-rate", 0, "fraction of deliveries held for --fault-delay")
	fl.DurationVar(&delay, "fault-delay", 0, "how long a delayed delivery is held")
	return cmd
}

// parseKeys reads TOKEN=SCOPES flags.
func parseKeys(flags []string) (map[string][]string, error) {
	if len(flags) == 0 {
		return nil, fmt.Errorf("give at least one --key TOKEN=SCOPES, e.g. --key svc_live_dev='*'")
	}
	keys := make(map[string][]string, len(flags))
	for _, kv := range flags {
		token, scopes, found := strings.Cut(kv, "=")
		if !found || token == "" || scopes == "" {
			return nil, fmt.Errorf("--key wants TOKEN=SCOPES (scopes comma-separated, * for all), got a value without them")
		}
		for sc := range strings.SplitSeq(scopes, ",") {
			keys[token] = append(keys[token], strings.TrimSpace(sc))
		}
	}
	return keys, nil
}
