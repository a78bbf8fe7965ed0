package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

func (c *cli) embedCmd() *cobra.Command {
	return group("embed", "Incident playbook: turn a site's embed off, then back on",
		c.embedOffCmd(), c.embedOnCmd(), c.embedCloseCmd(), c.embedListCmd())
}

// embedWait is how long the embed commands wait for the PATCH by default.
const embedWait = 2 * time.Minute

func (c *cli) embedOffCmd() *cobra.Command {
	var (
		site, reason, operator string
		tf                     temporalFlags
		wf                     waitFlags
	)
	cmd := &cobra.Command{
		Use:   "off --site ID --reason TEXT",
		Short: "Turn the embed off and open an incident (embed-incident/<site_id>)",
		Long: `Turn the site's embed off with a fresh idempotency key and open an incident
that records who and why. It returns once the service has acknowledged the
PATCH, or at once with the cause when it cannot (a site the API does not
know: "site ID does not exist", exit 3). It asks nothing first: it is the
emergency brake. Running it again while the incident is open joins it and
sends no second request. Decide it later with 'siteops embed on' or
'siteops embed close'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.withTemporal(cmd, &tf, false, wf.timeout, func(s *starter.Starter) error {
				ctx := cmd.Context() // bounded by --timeout (withTemporal)
				stop := c.watch(cmd, s, workflows.EmbedIncidentID(site), "turning the embed off")
				res, err := s.EmbedOff(ctx, site, operator, reason)
				stop()
				if err != nil {
					return wf.explain(err)
				}
				id := workflows.EmbedIncidentID(site)
				verb := "opened"
				if res.Joined {
					verb = "already open (no second request sent); opened"
				}
				return c.say(cmd, map[string]any{"workflow_id": id, "joined": res.Joined, "incident": res.Status},
					"embed of %s is off; incident %s %s by %s: %s\nrestore with: siteops embed on --site %s",
					site, id, verb, res.Status.Operator, res.Status.Reason, site)
			})
		},
	}
	cmd.Flags().StringVar(&site, "site", "", "site id")
	cmd.Flags().StringVar(&reason, "reason", "", "why the embed goes off (recorded with the incident)")
	operatorFlag(cmd, &operator, "who is acting")
	tf.register(cmd)
	wf.register(cmd, embedWait)
	_ = cmd.MarkFlagRequired("site")
	_ = cmd.MarkFlagRequired("reason")
	return cmd
}

func (c *cli) embedOnCmd() *cobra.Command {
	var (
		site, operator string
		origins        []string
		tf             temporalFlags
		wf             waitFlags
	)
	cmd := &cobra.Command{
		Use:   "on --site ID [--origin https://example.com ...]",
		Short: "Restore the embed of a site with an open incident, optionally with corrected origins",
		Long: `Restore the embed of a site with an open incident, with another fresh
idempotency key, and with corrected exact origins when given (an origin that
is not exact is refused before anything is sent, exit 2). It returns once
the service has acknowledged the PATCH.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.withTemporal(cmd, &tf, false, wf.timeout, func(s *starter.Starter) error {
				ctx := cmd.Context() // bounded by --timeout (withTemporal)
				stop := c.watch(cmd, s, workflows.EmbedIncidentID(site), "turning the embed back on")
				st, err := s.EmbedOn(ctx, site, origins, operator)
				stop()
				if err != nil {
					return wf.explain(err)
				}
				return c.say(cmd, st, "embed of %s is back on (incident %s restored by %s)", site, workflows.EmbedIncidentID(site), st.DecidedBy)
			})
		},
	}
	cmd.Flags().StringVar(&site, "site", "", "site id")
	cmd.Flags().StringArrayVar(&origins, "origin", nil, "corrected allowed origin (repeatable); exact origins only")
	operatorFlag(cmd, &operator, "who is acting")
	tf.register(cmd)
	wf.register(cmd, embedWait)
	_ = cmd.MarkFlagRequired("site")
	return cmd
}

func (c *cli) embedCloseCmd() *cobra.Command {
	var (
		site, operator string
		tf             temporalFlags
		wf             waitFlags
	)
	cmd := &cobra.Command{
		Use:   "close --site ID",
		Short: "Close a site's open incident and leave the embed off",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.withTemporal(cmd, &tf, false, wf.timeout, func(s *starter.Starter) error {
				ctx := cmd.Context() // bounded by --timeout (withTemporal)
				stop := c.watch(cmd, s, workflows.EmbedIncidentID(site), "closing the incident")
				st, err := s.EmbedClose(ctx, site, operator)
				stop()
				if err != nil {
					return wf.explain(err)
				}
				return c.say(cmd, st, "incident %s closed; the embed stays off", workflows.EmbedIncidentID(site))
			})
		},
	}
	cmd.Flags().StringVar(&site, "site", "", "site id")
	operatorFlag(cmd, &operator, "who is acting")
	tf.register(cmd)
	wf.register(cmd, embedWait)
	_ = cmd.MarkFlagRequired("site")
	return cmd
}
