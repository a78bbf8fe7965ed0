package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

func newEmbedCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "embed",
		Short: "Incident playbook: turn a site's embed off, then back on",
	}
	cmd.AddCommand(newEmbedOffCmd(), newEmbedOnCmd(), newEmbedCloseCmd())
	return cmd
}

func newEmbedOffCmd() *cobra.Command {
	var site, reason, operator string
	var out output
	cmd := &cobra.Command{
		Use:   "off --site ID --reason TEXT",
		Short: "Turn the embed off and open an incident (embed-incident/<site_id>)",
		Long: `Turn the site's embed off with a fresh idempotency key and open an incident
that records who and why. Running it again while the incident is open joins
it and sends no second request. Decide it later with 'siteops embed on'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			ctx := cmd.Context()
			return withStarter(cmd, false, func(s *starter.Starter) error {
				run, joined, err := s.EmbedOff(ctx, site, operator, reason)
				if err != nil {
					return err
				}
				// Wait until the embed is actually off, so that on-call knows.
				var st workflows.EmbedIncidentStatus
				deadline := time.Now().Add(2 * time.Minute)
				for {
					st, err = queryIncident(cmd, s.Client, run.GetID())
					if err == nil && st.State != workflows.IncidentTurningOff {
						break
					}
					if time.Now().After(deadline) {
						return fmt.Errorf("%s: the embed is not confirmed off after 2 minutes; check `siteops status %s`", run.GetID(), run.GetID())
					}
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(200 * time.Millisecond):
					}
				}
				if out.json() {
					return writeJSON(cmd.OutOrStdout(), map[string]any{"workflow_id": run.GetID(), "joined": joined, "incident": st})
				}
				verb := "opened"
				if joined {
					verb = "already open (no second request sent); opened"
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "embed of %s is off; incident %s %s by %s: %s\nrestore with: siteops embed on --site %s\n",
					site, run.GetID(), verb, st.Operator, st.Reason, site)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&site, "site", "", "site id")
	cmd.Flags().StringVar(&reason, "reason", "", "why the embed goes off (recorded with the incident)")
	cmd.Flags().StringVar(&operator, "operator", defaultOperator(), "who is acting (default $SITEOPS_OPERATOR or the login name)")
	out.register(cmd)
	_ = cmd.MarkFlagRequired("site")
	_ = cmd.MarkFlagRequired("reason")
	return cmd
}

func newEmbedOnCmd() *cobra.Command {
	var site, operator string
	var origins []string
	var out output
	cmd := &cobra.Command{
		Use:   "on --site ID [--origin https://example.com ...]",
		Short: "Restore the embed of a site with an open incident, optionally with corrected origins",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			return withStarter(cmd, false, func(s *starter.Starter) error {
				st, err := s.EmbedOn(cmd.Context(), site, origins, operator)
				if err != nil {
					return err
				}
				if out.json() {
					return writeJSON(cmd.OutOrStdout(), st)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "embed of %s is back on (incident %s restored by %s)\n", site, workflows.EmbedIncidentID(site), st.DecidedBy)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&site, "site", "", "site id")
	cmd.Flags().StringArrayVar(&origins, "origin", nil, "corrected allowed origin (repeatable); exact origins only")
	cmd.Flags().StringVar(&operator, "operator", defaultOperator(), "who is acting")
	out.register(cmd)
	_ = cmd.MarkFlagRequired("site")
	return cmd
}

func newEmbedCloseCmd() *cobra.Command {
	var site, operator string
	cmd := &cobra.Command{
		Use:   "close --site ID",
		Short: "Close a site's open incident and leave the embed off",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStarter(cmd, false, func(s *starter.Starter) error {
				if _, err := s.EmbedClose(cmd.Context(), site, operator); err != nil {
					return err
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "incident %s closed; the embed stays off\n", workflows.EmbedIncidentID(site))
				return err
			})
		},
	}
	cmd.Flags().StringVar(&site, "site", "", "site id")
	cmd.Flags().StringVar(&operator, "operator", defaultOperator(), "who is acting")
	_ = cmd.MarkFlagRequired("site")
	return cmd
}
