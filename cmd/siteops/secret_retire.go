package main

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/wiring"
)

func (c *cli) secretRetireCmd() *cobra.Command {
	var endpoint, fingerprint, at string
	var unreadable bool
	var cf confirmFlags
	cmd := &cobra.Command{
		Use:   "retire (--endpoint ID | --fingerprint FP) [--at TIME] [--unreadable] [--dry-run] [--yes]",
		Short: "Stop accepting a stored signing secret, now or at a time",
		Long: `Retire a stored signing secret: the ingress refuses deliveries signed with it
from --at on (now by default; an RFC 3339 time, or a duration from now such
as 30m). Name it by its endpoint id or by its fingerprint (as 'siteops
webhook list' shows it). A retirement is never postponed: an earlier one
stays. The endpoint itself is not deleted; delete it in the API or the
dashboard (the reconciliation would retire its secret anyway).

A secret's retirement is bound into its encryption, so retiring seals it
again: SITEOPS_SECRET_KEY must be the key that sealed it (the worker's and
the ingress's). With another key the secret does not open, and retire
refuses and changes nothing (exit 4): rewriting it would leave it readable
by no key, the right one included. --unreadable retires such a secret
anyway, for one given up for good (its row damaged, its key lost): no key
opens it afterwards. A secret from SITEOPS_WEBHOOK_SECRETS is not stored
and cannot be retired here: remove it from that variable.

It cannot be undone, so it says first which secret would retire and when:
with --dry-run only that; on a terminal it asks before it writes, unless
--yes; elsewhere it needs --yes (exit 2 without it, nothing changed).`,
		Example: "  siteops secret retire --endpoint we_1 --dry-run\n  siteops secret retire --fingerprint 4ff8f565e1b8 --at 30m --yes",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (endpoint == "") == (fingerprint == "") {
				return usageError{errors.New("name the secret by --endpoint ID or by --fingerprint FP (one of them)")}
			}
			when := time.Now()
			if at != "" {
				t, err := parseWhen(at, when)
				if err != nil {
					return usageError{err}
				}
				when = t
			}
			st, err := wiring.OpenExistingStoreFromEnv(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = st.Close() }()
			plan, err := starter.PlanRetire(cmd.Context(), st, endpoint, fingerprint, when)
			if err != nil {
				return err
			}
			ch, asks, refused := retireChange(plan, time.Now(), unreadable)
			if cf.dryRun && refused != nil {
				return refused
			}
			if asks || cf.dryRun {
				if ok, err := c.confirm(cmd, &cf, ch); err != nil || !ok {
					return err
				}
			}
			retire := starter.RetireSecret
			if unreadable {
				retire = starter.RetireUnreadableSecret
			}
			r, err := retire(cmd.Context(), st, endpoint, fingerprint, when)
			if err != nil {
				return err
			}
			verb := "retires at"
			if !r.At.After(time.Now()) {
				verb = "retired at"
			}
			return c.say(cmd, r, "secret of endpoint %s (receiver %s, fingerprint %s) %s %s", r.EndpointID, store.ReceiverName(r.Receiver), r.Fingerprint, verb, r.At.Format(time.RFC3339))
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "id of the endpoint whose secret retires")
	cmd.Flags().StringVar(&fingerprint, "fingerprint", "", "fingerprint of the secret that retires")
	cmd.Flags().StringVar(&at, "at", "", "when: an RFC 3339 time or a duration from now (default now)")
	cf.register(cmd)
	cmd.Flags().BoolVar(&unreadable, "unreadable", false, "retire it even if it does not decrypt with SITEOPS_SECRET_KEY: no key opens it again (for a secret given up for good)")
	return cmd
}
