package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

func newLeadsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "leads", Short: "Keep a site's leads in the store"}
	cmd.AddCommand(newLeadsSyncCmd())
	return cmd
}

func newLeadsSyncCmd() *cobra.Command {
	var (
		site   string
		full   bool
		follow bool
		out    output
	)
	cmd := &cobra.Command{
		Use:   "sync --site ID [--full] [--follow]",
		Short: "Start (or wake) the site's lead sync; --follow shows its progress until it has caught up",
		Long: `Start the site's lead sync workflow (lead-sync/<site_id>) if it is not running
and ask it to sync now. It keeps running afterwards: lead.created webhooks and
a poll timer wake it. --full re-reads the whole collection to reconcile.
--follow shows live progress until the requested sync has caught up.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			ctx := cmd.Context()
			return withStarter(cmd, false, func(s *starter.Starter) error {
				before, _ := s.LeadProgress(ctx, site) // zero when not yet running
				run, err := s.SyncLeads(ctx, site, full)
				if err != nil {
					return err
				}
				if !follow {
					if out.json() {
						return writeJSON(cmd.OutOrStdout(), map[string]string{"workflow_id": run.GetID(), "run_id": run.GetRunID()})
					}
					_, err := fmt.Fprintf(cmd.OutOrStdout(), "lead sync %s asked to sync; follow it with: siteops leads sync --site %s --follow\n", run.GetID(), site)
					return err
				}
				tick := time.NewTicker(250 * time.Millisecond)
				defer tick.Stop()
				w := cmd.ErrOrStderr()
				for {
					p, err := s.LeadProgress(ctx, site)
					if err == nil {
						if !out.json() {
							_, _ = fmt.Fprintf(w, "\r%s %6d leads  %5d pages  %s", bar(p), p.Leads, p.Pages, state(p))
						}
						if p.CaughtUp && !p.Syncing && (p.Syncs > before.Syncs || p.Runs > before.Runs) {
							if out.json() {
								return writeJSON(cmd.OutOrStdout(), p)
							}
							_, _ = fmt.Fprintln(w)
							_, err := fmt.Fprintf(cmd.OutOrStdout(), "caught up: %d leads in %d pages (last sync %s)\n", p.Leads, p.Pages, p.LastSyncAt.Format(time.RFC3339))
							return err
						}
					}
					select {
					case <-ctx.Done():
						_, _ = fmt.Fprintln(w)
						return ctx.Err()
					case <-tick.C:
					}
				}
			})
		},
	}
	cmd.Flags().StringVar(&site, "site", "", "site id")
	cmd.Flags().BoolVar(&full, "full", false, "re-read the whole collection to reconcile")
	cmd.Flags().BoolVar(&follow, "follow", false, "show progress until the sync has caught up")
	out.register(cmd)
	_ = cmd.MarkFlagRequired("site")
	return cmd
}

// bar draws an indeterminate progress bar: the API does not say how many
// leads there are, so it shows activity, then fills when caught up.
func bar(p workflows.LeadSyncProgress) string {
	const width = 20
	if p.CaughtUp && !p.Syncing {
		return "[" + strings.Repeat("#", width) + "]"
	}
	pos := p.Pages % width
	return "[" + strings.Repeat("=", pos) + ">" + strings.Repeat(" ", width-pos-1) + "]"
}

func state(p workflows.LeadSyncProgress) string {
	if p.Syncing {
		return "syncing"
	}
	if p.CaughtUp {
		return "caught up"
	}
	return "waiting"
}
