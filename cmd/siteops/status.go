package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

func newStatusCmd() *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:     "status WORKFLOW_ID",
		Short:   "Show a workflow's state and what it reports of itself",
		Example: "  siteops status onboarding/acme-anvils\n  siteops status lead-sync/site_1 -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			return withStarter(cmd, false, func(s *starter.Starter) error {
				st, err := s.Status(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if out.json() {
					return writeJSON(cmd.OutOrStdout(), st)
				}
				w := cmd.OutOrStdout()
				_, _ = fmt.Fprintf(w, "%s  %s  %s  started %s\n", st.WorkflowID, st.Type, st.Status, st.StartedAt.Format("2006-01-02 15:04:05Z07:00"))
				switch d := st.Detail.(type) {
				case *workflows.OnboardingStatus:
					_, _ = fmt.Fprintf(w, "step %s  site %s  knowledge %d/%d added, %d ready  FAQs %d\n", d.Step, d.SiteID, d.KnowledgeAdded, d.KnowledgeTotal, d.KnowledgeReady, d.FAQsAdded)
					if d.Error != "" {
						_, _ = fmt.Fprintf(w, "error: %s\n", d.Error)
					}
				case *workflows.LeadSyncProgress:
					_, _ = fmt.Fprintf(w, "%d leads in %d pages over %d syncs; %s; last sync %s\n", d.Leads, d.Pages, d.Syncs, state(*d), d.LastSyncAt.Format("15:04:05"))
				case *workflows.EmbedIncidentStatus:
					_, _ = fmt.Fprintf(w, "state %s  opened by %s: %s\n", d.State, d.Operator, d.Reason)
					if d.Decision != "" {
						_, _ = fmt.Fprintf(w, "decision %s by %s\n", d.Decision, d.DecidedBy)
					}
				}
				return nil
			})
		},
	}
	out.register(cmd)
	return cmd
}

func queryIncident(cmd *cobra.Command, c client.Client, id string) (workflows.EmbedIncidentStatus, error) {
	var st workflows.EmbedIncidentStatus
	v, err := c.QueryWorkflow(cmd.Context(), id, "", workflows.QueryIncident)
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}
