package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/internal/release"
	"github.com/siteops/siteops/internal/release/rollout"
	"github.com/siteops/siteops/starter"
)

func (c *cli) releaseCmd() *cobra.Command {
	return group("release", "Roll a new build out: promote it, tell when an old one has drained, finalize the release",
		c.releasePromoteCmd(), c.releaseDrainedCmd(), c.releaseStatusCmd())
}

// releaseFlags are the flags every release command shares.
type releaseFlags struct {
	temporalFlags
	deployment string
}

func (f *releaseFlags) register(cmd *cobra.Command) {
	f.temporalFlags.register(cmd)
	def := os.Getenv("SITEOPS_DEPLOYMENT_NAME")
	if def == "" {
		def = "siteops"
	}
	cmd.Flags().StringVar(&f.deployment, "deployment-name", def, "the Worker Deployment (default $SITEOPS_DEPLOYMENT_NAME or siteops)")
}

// withRollout dials Temporal and runs f on the deployment.
func (c *cli) withRollout(cmd *cobra.Command, f *releaseFlags, run func(r *rollout.Rollout) error) error {
	return c.withStarter(cmd, &f.temporalFlags, false, func(s *starter.Starter) error {
		return run(&rollout.Rollout{Client: s.Client, Namespace: s.Namespace, Deployment: f.deployment})
	})
}

func (c *cli) releasePromoteCmd() *cobra.Command {
	var f releaseFlags
	var buildID string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "promote --build-id BUILD",
		Short: "Make a build the current version, and move the runs older builds pinned whose kinds are AutoUpgrade now",
		Long: `Make BUILD the current version of the Worker Deployment: new runs start on
it. The server accepts that only once BUILD's workers poll every task queue
the current version serves, so promote tries again until --timeout.

Then it moves onto BUILD every running run that an older build pinned and
whose kind this binary declares AutoUpgrade (EmbedIncident, SecretRotation,
LeadSync, SecretReconcile): each gets an AutoUpgrade versioning override and
continues on BUILD at its next workflow task. That is safe because make test
replays every release's recorded histories against this code. Runs of Pinned
kinds (Onboarding, EndpointRegistration) stay on their build, which must run
until they end: promote lists them, and 'siteops release drained' tells when
none is left. Run it from the new build's image; running it again changes
nothing.`,
		Example: "  siteops release promote --build-id v3.0.1",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if own, _, err := release.BuildID(os.Getenv("SITEOPS_BUILD_ID")); err == nil && own != buildID {
				c.warn(cmd.ErrOrStderr(), fmt.Sprintf("this binary is build %s, not %s: its catalogue decides which kinds move; run promote from the new build's image", own, buildID))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return c.withRollout(cmd, &f, func(r *rollout.Rollout) error {
				r.Logf = func(format string, args ...any) {
					if !c.json() {
						_, _ = fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...)
					}
				}
				res, err := r.Promote(ctx, buildID)
				if err != nil {
					return err
				}
				if c.json() {
					return writeJSON(cmd.OutOrStdout(), res)
				}
				printPromote(cmd.OutOrStdout(), r.Deployment, res, time.Now())
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&buildID, "build-id", "", "the build to make current (its workers' SITEOPS_BUILD_ID)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the build's workers to poll")
	_ = cmd.MarkFlagRequired("build-id")
	return cmd
}

func printPromote(w io.Writer, deployment string, res rollout.PromoteResult, now time.Time) {
	switch {
	case res.AlreadyCurrent:
		_, _ = fmt.Fprintf(w, "%s was already the current version of deployment %s\n", res.BuildID, deployment)
	case res.Previous != "":
		_, _ = fmt.Fprintf(w, "%s is now the current version of deployment %s (was %s)\n", res.BuildID, deployment, res.Previous)
	default:
		_, _ = fmt.Fprintf(w, "%s is now the current version of deployment %s\n", res.BuildID, deployment)
	}
	_, _ = fmt.Fprintf(w, "moved %d run(s) pinned to older builds onto %s (their kinds are AutoUpgrade in this build)\n", len(res.Moved), res.BuildID)
	printRuns(w, res.Moved, now)
	if len(res.PinnedByOverride) > 0 {
		_, _ = fmt.Fprintf(w, "left %d run(s) pinned by a versioning override (someone pinned them on purpose):\n", len(res.PinnedByOverride))
		printRuns(w, res.PinnedByOverride, now)
	}
	if len(res.StayPinned) == 0 {
		_, _ = fmt.Fprintln(w, "no run stays pinned to an older build")
		return
	}
	_, _ = fmt.Fprintf(w, "%d run(s) stay pinned to older builds, which must keep running until they end (siteops release drained --build-id BUILD says when):\n", len(res.StayPinned))
	printRuns(w, res.StayPinned, now)
}

func printRuns(w io.Writer, runs []rollout.Run, now time.Time) {
	for _, r := range runs {
		_, _ = fmt.Fprintf(w, "  %-22s %-44s on %-16s open %s\n", r.Type, r.WorkflowID, buildOrUnversioned(r.BuildID), r.Age(now))
	}
}

func buildOrUnversioned(s string) string {
	if s == "" {
		return "(unversioned)"
	}
	return s
}

func (c *cli) releaseDrainedCmd() *cobra.Command {
	var f releaseFlags
	var buildID string
	cmd := &cobra.Command{
		Use:   "drained --build-id BUILD",
		Short: "Exit 0 when no running run is pinned to a build, so its workers may be stopped",
		Long: `Say whether BUILD's workers may be stopped: it is neither the current nor the
ramping version, no running run is pinned to it (a visibility count), and the
server reports it drained or it stopped taking new work a few seconds ago.
Exits 0 when drained; otherwise exits 1 and lists the runs still pinned to
it (kind, workflow id, age). deploy/kubernetes/rollout.sh deletes an old
build's Deployment only after this exits 0.`,
		Example: "  siteops release drained --build-id v3.0.0 || echo 'keep it running'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.withRollout(cmd, &f, func(r *rollout.Rollout) error {
				rep, err := r.Drained(cmd.Context(), buildID)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if c.json() {
					if err := writeJSON(w, rep); err != nil {
						return err
					}
				} else {
					state := "drained"
					if !rep.Drained {
						state = "not drained"
					}
					_, _ = fmt.Fprintf(w, "build %s of deployment %s: %s: %s\n", buildID, r.Deployment, state, rep.Reason)
					printRuns(w, rep.Pinned, time.Now())
				}
				if !rep.Drained {
					return reported{exitFailed}
				}
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&buildID, "build-id", "", "the old build")
	_ = cmd.MarkFlagRequired("build-id")
	return cmd
}

func (c *cli) releaseStatusCmd() *cobra.Command {
	var f releaseFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the deployment's routing, its builds, the open runs per build and kind, and the store's release state",
		Long: `Show where a rollout stands: the current and ramping builds, every build the
Worker Deployment lists with the server's drainage status and its pinned
runs, the open runs grouped by build, behaviour and kind, and the store's
schema version, the release it was finalized for and the processes that
recently said which release they run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.withRollout(cmd, &f, func(r *rollout.Rollout) error {
				st, err := r.Status(cmd.Context())
				if err != nil {
					return err
				}
				if c.json() {
					return writeJSON(cmd.OutOrStdout(), map[string]any{"release": release.Number, "temporal": st})
				}
				printStatus(cmd.OutOrStdout(), st, time.Now())
				return nil
			})
		},
	}
	f.register(cmd)
	return cmd
}

func printStatus(w io.Writer, st rollout.Status, now time.Time) {
	_, _ = fmt.Fprintf(w, "deployment %s: current %s", st.Deployment, buildOrUnversioned(st.Current))
	if st.Ramping != "" {
		_, _ = fmt.Fprintf(w, ", ramping %s at %.0f%%", st.Ramping, st.RampPercentage)
	}
	_, _ = fmt.Fprintln(w)
	for _, v := range st.Versions {
		state := v.Routing
		if state == "" {
			state = v.DrainageStatus
		}
		if state == "" {
			state = "-"
		}
		_, _ = fmt.Fprintf(w, "  build %-24s %-9s %d pinned run(s)  created %s\n", v.BuildID, state, v.Pinned, v.Created.UTC().Format(time.RFC3339))
	}
	_, _ = fmt.Fprintln(w, "open runs:")
	if len(st.Runs) == 0 {
		_, _ = fmt.Fprintln(w, "  none")
	}
	for _, g := range st.Runs {
		_, _ = fmt.Fprintf(w, "  %-16s %-12s %-22s %5d  oldest %s (%s)\n", buildOrUnversioned(g.BuildID), orDash(g.Behavior), g.Type, g.Count, g.Example, g.Oldest.Sub(now).Truncate(time.Second)*-1)
	}
	if st.Truncated {
		_, _ = fmt.Fprintln(w, "  (more runs are open than were counted)")
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// buildIDLine says which build and release this binary is, for `siteops
// version`: the build id a versioned worker would poll as, or why it would
// refuse to start.
func buildIDLine() string {
	id, source, err := release.BuildID(os.Getenv("SITEOPS_BUILD_ID"))
	if err != nil {
		return fmt.Sprintf("release %d, no build id: %v", release.Number, err)
	}
	return fmt.Sprintf("release %d, build id %s (from %s)", release.Number, id, source)
}

// versionJSON is `siteops version -o json`.
func versionJSON() map[string]any {
	out := map[string]any{"version": buildVersion(), "release": release.Number}
	id, source, err := release.BuildID(os.Getenv("SITEOPS_BUILD_ID"))
	if err != nil {
		out["build_id_error"] = err.Error()
	} else {
		out["build_id"], out["build_id_source"] = id, source
	}
	return out
}
