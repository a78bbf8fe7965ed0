package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/doctor"
	"github.com/siteops/siteops/wiring"
)

func (c *cli) doctorCmd() *cobra.Command {
	var tf temporalFlags
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check everything siteops needs: Temporal, search attributes, the API key, the database, the secret key, the build id, the addresses",
		Long: `Check, one line each, everything siteops needs from this environment:
Temporal reachable and the namespace present, the search attributes siteops
uses registered, the Agent-Site API accepting the key with the scopes siteops
reads with, SITEOPS_PUBLIC_URL well formed, the database reachable and
migrated, SITEOPS_SECRET_KEY able to decrypt the stored secrets, the build id
a versioned worker would poll as, and the metrics and ingress addresses free
(or held by a running siteops worker or ingress, which answer GET /healthz
there). It changes nothing: it opens the database read-only, so a database
that does not exist or is not migrated fails (start the worker or the
ingress, which create and migrate it). The exit code is that of the first
failure (see --help of siteops), 0 when every check passes. The worker and
the ingress run the checks that concern them when they start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := tf.load()
			results := wiring.Diagnose(cmd.Context(), t, err)
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
