package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/doctor"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/wiring"
)

func (c *cli) doctorCmd() *cobra.Command {
	var tf temporalFlags
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check everything siteops needs: Temporal, search attributes, the API key, the database, the secret key, the addresses",
		Long: `Check, one line each, everything siteops needs from this environment:
Temporal reachable and the namespace present, the search attributes siteops
uses registered, the Agent-Site API accepting the key with the scopes siteops
reads with, the database reachable and migrated, SITEOPS_SECRET_KEY able to
decrypt the stored secrets, and the metrics and ingress addresses free (or
held by a running siteops worker or ingress, which answer GET /healthz
there). It changes nothing: it opens the database read-only, so a database that does not
exist or is not migrated fails (start the worker or the ingress, which create
and migrate it). The exit code is that of the first failure (see --help of
siteops), 0 when every check passes. The worker and the ingress run the
checks that concern them when they start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			results := c.diagnose(cmd.Context(), &tf)
			_ = c.show(cmd, results, func(w io.Writer) error {
				for _, r := range results {
					_, _ = fmt.Fprintln(w, r)
				}
				return nil
			})
			if f, failed := doctor.Failed(results); failed {
				code := exitFailed
				if f.Err != nil {
					code = exitCode(f.Err)
				}
				c.note(cmd, "the %s check failed", f.Check)
				return reported{code: code}
			}
			return nil
		},
	}
	tf.register(cmd)
	return cmd
}

// diagnose runs every check that this environment's settings allow.
func (c *cli) diagnose(ctx context.Context, tf *temporalFlags) []doctor.Result {
	var (
		results []doctor.Result
		cfg     struct {
			config.AgentSite
			config.Database
			config.Ingress
			config.Worker
			config.Log
		}
	)
	add := func(r doctor.Result) { results = append(results, r) }
	if err := config.Load(&cfg); err != nil {
		return []doctor.Result{{Check: "configuration", Status: doctor.Fail, Detail: err.Error(), Err: usageError{err}}}
	}
	if err := cfg.Log.Validate(); err != nil {
		add(doctor.Result{Check: "configuration", Status: doctor.Fail, Detail: err.Error(), Err: usageError{err}})
	}

	t, err := tf.load()
	if err != nil {
		add(doctor.Result{Check: "temporal", Status: doctor.Fail, Detail: err.Error(), Err: usageError{err}})
		add(doctor.Skipped("search attributes", "the Temporal settings are wrong"))
	} else if cl, conn, err := wiring.DialTemporal(ctx, t, quietLogger(discard{}), nil); err != nil {
		add(doctor.Result{Check: "temporal", Status: doctor.Fail, Detail: err.Error(), Err: err})
		add(doctor.Skipped("search attributes", "Temporal is not reachable"))
	} else {
		add(doctor.Temporal(ctx, cl, conn.String(), conn.Namespace))
		add(doctor.SearchAttributes(ctx, &starter.Starter{Client: cl, Namespace: conn.Namespace}))
		cl.Close()
	}

	if cfg.BaseURL == "" && cfg.APIKey == "" {
		add(doctor.Skipped("agent-site api", "AGENTSITE_BASE_URL and AGENTSITE_API_KEY are not set (the worker and `webhook list` need them)"))
	} else if api, err := wiring.APIClient(cfg.AgentSite, nil); err != nil {
		add(doctor.Result{Check: "agent-site api", Status: doctor.Fail, Detail: err.Error(), Err: usageError{err}})
	} else {
		add(doctor.APIKey(ctx, api))
	}
	add(doctor.PublicURL(cfg.PublicURL, cfg.AllowLoopback))
	add(buildIDCheck(cfg.Worker))

	// The store is opened read-only and as it is: doctor creates no
	// database and migrates none, so that what it reports is what the
	// other commands will find.
	if st, where, err := wiring.InspectStore(ctx, cfg.Database); err != nil {
		add(doctor.Result{Check: "database", Status: doctor.Fail, Detail: err.Error(), Err: err})
		add(doctor.Skipped("secret key", "the database cannot be read"))
	} else {
		db := doctor.Database(ctx, st, where)
		add(db)
		if db.Status == doctor.OK || db.Status == doctor.Warn {
			add(doctor.SecretKey(ctx, st))
		} else {
			add(doctor.Skipped("secret key", "the database is not ready"))
		}
		_ = st.Close()
	}
	add(doctor.Address(ctx, "SITEOPS_METRICS_ADDR", cfg.MetricsAddr))
	add(doctor.Address(ctx, "SITEOPS_INGRESS_ADDR", cfg.Addr))
	return results
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
