package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

func newOnboardCmd() *cobra.Command {
	var (
		file   string
		wait   bool
		dryRun bool
		out    output
	)
	cmd := &cobra.Command{
		Use:   "onboard -f site.yaml [--wait] [--dry-run]",
		Short: "Onboard a customer: create the site, configure its agent, add knowledge and FAQs, publish",
		Long: `Onboard a customer from a JSON or YAML spec (see examples/): create the site,
configure its agent and embed policy, add knowledge sources and FAQs, and
publish. The workflow is onboarding/<slug>; starting it twice is refused.

--dry-run checks the whole spec against every rule of the API contract,
prints every problem at once, and exits non-zero if there is any. It needs
neither Temporal nor the database.`,
		Example: "  siteops onboard -f examples/acme-anvils.yaml --wait\n  siteops onboard -f site.json --dry-run",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			spec, err := starter.LoadSpec(file)
			if err != nil {
				return err
			}
			prepared, problems := starter.Prepare(spec)
			if len(problems) > 0 {
				w := cmd.ErrOrStderr()
				if out.json() {
					_ = writeJSON(cmd.OutOrStdout(), map[string]any{"valid": false, "problems": problems})
				} else {
					_, _ = fmt.Fprintf(w, "%s has %d problem(s):\n", file, len(problems))
					for _, p := range problems {
						_, _ = fmt.Fprintf(w, "  %s\n", p)
					}
				}
				return exitError{code: 2}
			}
			in := prepared.Input
			if dryRun {
				if out.json() {
					return writeJSON(cmd.OutOrStdout(), map[string]any{"valid": true, "workflow_id": workflows.OnboardingID(in.Site.Slug), "knowledge": len(in.Knowledge), "faqs": len(in.FAQs)})
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s is valid: would start %s with %d knowledge source(s) and %d FAQ(s)\n",
					file, workflows.OnboardingID(in.Site.Slug), len(in.Knowledge), len(in.FAQs))
				return err
			}
			return withStarter(cmd, len(prepared.Texts) > 0, func(s *starter.Starter) error {
				run, err := s.Onboard(cmd.Context(), prepared)
				if err != nil {
					return err
				}
				if !wait {
					if out.json() {
						return writeJSON(cmd.OutOrStdout(), map[string]string{"workflow_id": run.GetID(), "run_id": run.GetRunID()})
					}
					_, err := fmt.Fprintf(cmd.OutOrStdout(), "started %s (run %s); follow it with: siteops status %s\n", run.GetID(), run.GetRunID(), run.GetID())
					return err
				}
				var res workflows.OnboardingResult
				if err := run.Get(cmd.Context(), &res); err != nil {
					return fmt.Errorf("%s failed: %w", run.GetID(), err)
				}
				if out.json() {
					return writeJSON(cmd.OutOrStdout(), res)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: site %s is %s (knowledge %s; FAQs %s)\n", run.GetID(), res.SiteID, res.Status,
					strings.Join(res.KnowledgeIDs, ", "), strings.Join(res.FAQIDs, ", "))
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "onboarding spec, JSON or YAML")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the onboarding to finish and print its result")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "validate the spec and exit")
	out.register(cmd)
	_ = cmd.MarkFlagRequired("file")
	return cmd
}
