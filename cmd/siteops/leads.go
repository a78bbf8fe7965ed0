package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

func (c *cli) leadsCmd() *cobra.Command {
	return group("leads", "Keep a site's leads in the store", c.leadsSyncCmd(), c.leadsListCmd())
}

func (c *cli) leadsSyncCmd() *cobra.Command {
	var (
		site   string
		full   bool
		follow bool
		tf     temporalFlags
		wf     waitFlags
	)
	cmd := &cobra.Command{
		Use:   "sync --site ID [--full] [--follow]",
		Short: "Start (or wake) the site's lead sync; --follow shows its progress until it has caught up",
		Long: `Start the site's lead sync workflow (lead-sync/<site_id>) if it is not running
and ask it to sync now. It keeps running afterwards: lead.created webhooks and
a poll timer wake it. --full re-reads the whole collection to reconcile.
--follow shows progress until a sync that completed after the request has
caught up, and ends at once with the cause if the workflow fails, is
cancelled or is terminated; it stops waiting after --timeout (30m unless
set), and the sync goes on. Progress redraws in place on a terminal and is
written as plain lines elsewhere.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// --timeout bounds --follow; a request alone gives up on an
			// unavailable Temporal after temporalPatience.
			limit := time.Duration(0)
			if follow {
				limit = wf.timeout
			}
			return c.withTemporal(cmd, &tf, false, limit, func(s *starter.Starter) error {
				if !follow {
					run, err := s.SyncLeads(cmd.Context(), site, full)
					if err != nil {
						return err
					}
					return c.say(cmd, map[string]string{"workflow_id": run.GetID(), "run_id": run.GetRunID()},
						"lead sync %s asked to sync; follow it with: siteops leads sync --site %s --follow", run.GetID(), site)
				}
				ctx := cmd.Context() // bounded by --timeout (withTemporal)
				bar := c.progress(cmd.ErrOrStderr())
				p, err := s.FollowLeadSync(ctx, site, full, 250*time.Millisecond, func(p workflows.LeadSyncProgress) {
					bar.show(fmt.Sprintf("%s %6d leads stored  %5d pages read  %s", drawBar(p), p.Leads, p.Pages, p.State()))
				})
				bar.done()
				if err != nil {
					return wf.explain(err)
				}
				return c.say(cmd, p, "caught up: %d leads stored, %d pages read (last sync %s)", p.Leads, p.Pages, p.LastSyncAt.Format(time.RFC3339))
			})
		},
	}
	cmd.Flags().StringVar(&site, "site", "", "site id")
	cmd.Flags().BoolVar(&full, "full", false, "re-read the whole collection to reconcile")
	cmd.Flags().BoolVar(&follow, "follow", false, "show progress until the sync has caught up")
	tf.register(cmd)
	wf.register(cmd, followTimeout)
	_ = cmd.MarkFlagRequired("site")
	return cmd
}

// followTimeout bounds --follow unless --timeout says otherwise: a full
// re-read of a large site takes minutes, and a wait must always end.
const followTimeout = 30 * time.Minute

// drawBar draws an indeterminate progress bar: the API does not say how
// many leads there are, so it shows activity, then fills when caught up.
func drawBar(p workflows.LeadSyncProgress) string {
	const width = 20
	if p.CaughtUp && !p.Syncing {
		return "[" + strings.Repeat("#", width) + "]"
	}
	pos := p.Pages % width
	return "[" + strings.Repeat("=", pos) + ">" + strings.Repeat(" ", width-pos-1) + "]"
}
