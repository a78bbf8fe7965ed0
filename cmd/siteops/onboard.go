package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

func (c *cli) onboardCmd() *cobra.Command {
	var (
		file   string
		wait   bool
		dryRun bool
		tf     temporalFlags
		wf     waitFlags
	)
	cmd := &cobra.Command{
		Use:   "onboard -f site.yaml [--wait] [--dry-run]",
		Short: "Onboard a customer: create the site, configure its agent, add knowledge and FAQs, publish",
		Long: `Onboard a customer from a JSON or YAML spec (see examples/; -f - reads standard
input): create the site, configure its agent and embed policy, add knowledge
sources and FAQs, and publish. The workflow is onboarding/<slug>.

Onboarding the same spec again is safe: it joins the running onboarding, or
reports the result of the one that succeeded ("already onboarded", exit 0).
A different spec for the same slug is refused (exit 2) naming the fields that
differ. After a failure the same slug may be onboarded again.

--dry-run checks the whole spec against every rule of the API contract and
against the published schema (schemas/onboarding-spec.schema.json), prints
every problem at once with its line and column, and exits 2 if there is any.
It needs neither Temporal nor the database. Onboarding checks the same
before it starts anything.`,
		Example: "  siteops onboard -f examples/acme-anvils.yaml --wait\n  siteops onboard -f site.json --dry-run\n  generate-spec | siteops onboard -f - --wait -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			name := file
			if file == "-" {
				name = "<stdin>"
			}
			prepared, problems, err := starter.ReadSpec(file)
			if err != nil {
				return usageError{err}
			}
			if len(problems) > 0 {
				return c.problems(cmd, name, problems)
			}
			in := prepared.Input
			id := workflows.OnboardingID(in.Site.Slug)
			if dryRun {
				return c.say(cmd, map[string]any{"valid": true, "workflow_id": id, "knowledge": len(in.Knowledge), "faqs": len(in.FAQs)},
					"%s is valid: would start %s with %d knowledge source(s) and %d FAQ(s)", name, id, len(in.Knowledge), len(in.FAQs))
			}
			return c.withTemporal(cmd, &tf, len(prepared.Texts) > 0, wf.timeout, func(s *starter.Starter) error {
				o, err := s.Onboard(cmd.Context(), prepared)
				if err != nil {
					return err
				}
				if o.Done != nil {
					return c.onboarded(cmd, starter.Onboarded{OnboardingResult: *o.Done, WorkflowID: id, Outcome: starter.OutcomeAlreadyOnboarded})
				}
				verb := "started"
				if !o.Started {
					verb = "joined the running onboarding"
				}
				if !wait {
					return c.say(cmd, map[string]any{"workflow_id": id, "run_id": o.Run.GetRunID(), "started": o.Started},
						"%s %s (run %s); follow it with: siteops status %s", verb, id, o.Run.GetRunID(), id)
				}
				// --timeout bounds the whole command (withTemporal).
				var res workflows.OnboardingResult
				stop := c.watch(cmd, s, id, verb)
				err = s.Wait(cmd.Context(), o.Run, &res)
				stop()
				if err != nil {
					return wf.explain(err)
				}
				return c.onboarded(cmd, starter.Onboarded{OnboardingResult: res, WorkflowID: id, Outcome: starter.OutcomeOnboarded})
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "onboarding spec, JSON or YAML (- for standard input)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the onboarding to finish and print its result")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "validate the spec and exit")
	tf.register(cmd)
	wf.register(cmd, 0)
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// problems reports every problem of a spec and ends with exit 2.
// As text they go to standard error, one line each; as JSON they are the
// result.
func (c *cli) problems(cmd *cobra.Command, name string, problems []workflows.Problem) error {
	_ = c.show(cmd, map[string]any{"valid": false, "file": name, "problems": problems}, func(io.Writer) error {
		w := cmd.ErrOrStderr()
		for _, p := range problems {
			_, _ = fmt.Fprintln(w, p.In(name))
		}
		_, _ = fmt.Fprintf(w, "siteops: %s has %d problem(s); nothing was started\n", name, len(problems))
		return nil
	})
	return reported{code: exitUsage}
}

func (c *cli) onboarded(cmd *cobra.Command, o starter.Onboarded) error {
	return c.say(cmd, o, "%s: %s; %s", o.WorkflowID, strings.ReplaceAll(o.Outcome, "_", " "), starter.OnboardingSummary(o.OnboardingResult))
}
