package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/siteops/siteops/release"
	"github.com/siteops/siteops/rollout"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/wiring"
)

func (c *cli) releaseCmd() *cobra.Command {
	return group("release", "Roll a new build out: promote it, tell when an old one has drained, finalize the release",
		c.releasePromoteCmd(), c.releaseDrainedCmd(), c.releaseStatusCmd(), c.releaseRollbackCmd(), c.releaseFinalizeCmd())
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

// withRollout dials Temporal and runs f on the deployment, with the
// rollout's other options (a log of long waits, versioning off) as o says.
func (c *cli) withRollout(cmd *cobra.Command, f *releaseFlags, o rollout.Options, run func(r *rollout.Rollout) error) error {
	return c.withStarter(cmd, &f.temporalFlags, false, func(s *starter.Starter) error {
		o.Client, o.Namespace, o.Deployment, o.TaskQueue = s.Client(), s.Namespace(), f.deployment, s.TaskQueue()
		return run(rollout.New(o))
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
			logf := func(format string, args ...any) { c.note(cmd, format, args...) }
			return c.withRollout(cmd, &f, rollout.Options{Logf: logf}, func(r *rollout.Rollout) error {
				res, err := r.Promote(ctx, buildID)
				if err != nil {
					return err
				}
				return c.show(cmd, res, func(w io.Writer) error {
					printPromote(w, r.Deployment(), res, time.Now())
					return nil
				})
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
			return c.withRollout(cmd, &f, rollout.Options{}, func(r *rollout.Rollout) error {
				rep, err := r.Drained(cmd.Context(), buildID)
				if err != nil {
					return err
				}
				if err := c.show(cmd, rep, func(w io.Writer) error {
					state := "drained"
					if !rep.Drained {
						state = "not drained"
					}
					_, _ = fmt.Fprintf(w, "build %s of deployment %s: %s: %s\n", buildID, r.Deployment(), state, rep.Reason)
					printRuns(w, rep.Pinned, time.Now())
					return nil
				}); err != nil {
					return err
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
			return c.withRollout(cmd, &f, rollout.Options{}, func(r *rollout.Rollout) error {
				st, err := r.Status(cmd.Context())
				if err != nil {
					return err
				}
				ss := rollout.ReadStoreStatus(cmd.Context(), wiring.InspectStoreFromEnv, time.Now())
				return c.show(cmd, map[string]any{"release": release.Number, "temporal": st, "store": ss}, func(w io.Writer) error {
					printStatus(w, st, time.Now())
					printStoreStatus(w, ss, time.Now())
					return nil
				})
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
		_, _ = fmt.Fprintf(w, "  %-16s %-12s %-22s %5d  oldest %s (%s)\n", buildOrUnversioned(g.BuildID), dash(g.Behavior), g.Type, g.Count, g.Example, now.Sub(g.Oldest).Truncate(time.Second))
	}
	if st.Truncated {
		_, _ = fmt.Fprintln(w, "  (more runs are open than were counted)")
	}
}

func printStoreStatus(w io.Writer, ss rollout.StoreStatus, now time.Time) {
	if ss.Error != "" {
		_, _ = fmt.Fprintf(w, "store %s: %s\n", ss.Where, ss.Error)
		return
	}
	_, _ = fmt.Fprintf(w, "store %s: schema version %d", ss.Where, ss.Schema)
	if ss.Pending > 0 {
		_, _ = fmt.Fprintf(w, ", %d migration(s) of this build not applied yet (a worker or ingress of this build applies them at start)", ss.Pending)
	}
	if len(ss.Ahead) > 0 {
		_, _ = fmt.Fprintf(w, ", migrations %v of a later release applied", ss.Ahead)
	}
	_, _ = fmt.Fprintln(w)
	switch {
	case ss.Finalized >= release.Number:
		_, _ = fmt.Fprintf(w, "finalized for release %d: rolling back to an earlier release is no longer supported\n", ss.Finalized)
	case ss.Finalized > 0:
		_, _ = fmt.Fprintf(w, "finalized for release %d; release %d is not finalized yet (siteops release finalize)\n", ss.Finalized, release.Number)
	default:
		_, _ = fmt.Fprintf(w, "no release finalized yet; release %d's contract steps wait for siteops release finalize\n", release.Number)
	}
	if p := ss.Plan; p != nil && ss.Finalized < release.Number {
		_, _ = fmt.Fprintf(w, "contract steps left: %s\n", rollout.DescribePlan(*p))
	}
	_, _ = fmt.Fprintf(w, "processes seen in the last %s:\n", store.ProcessGone)
	if len(ss.Processes) == 0 {
		_, _ = fmt.Fprintln(w, "  none (processes of releases before 3 do not register)")
	}
	for _, p := range ss.Processes {
		_, _ = fmt.Fprintf(w, "  %-8s release %d  build %-24s %s  seen %s ago\n", p.Role, p.Release, buildOrUnversioned(p.BuildID), p.Host, now.Sub(p.SeenAt).Truncate(time.Second))
	}
}

func (c *cli) releaseFinalizeCmd() *cobra.Command {
	var (
		f           releaseFlags
		cf          confirmFlags
		unversioned bool
	)
	cmd := &cobra.Command{
		Use:   "finalize [--dry-run] [--yes] [--unversioned]",
		Short: "Run this release's contract steps once no process of the previous release remains",
		Long: `The second half of this release's expand-then-contract store changes. Run it
once the rollout is over: this release's build is current, every older build
has drained and its workers are stopped, and no ingress of the previous
release runs. It checks what it can (the deployment's routing, that every
other build drained, the task queue's pollers, the store's process registry)
and lists what it cannot (processes of releases before 3 do not register;
make sure none runs). A check that cannot be made fails: when the Worker
Deployment (--deployment-name) does not exist — a wrong name, or workers
without Worker Versioning — routing, drained and pollers fail, unless
--unversioned says the workers are unversioned; they are then listed among
what to make sure of.

When every check passes it says what it would change — re-seal the signing
secrets still stored in the first format (the next release refuses that
format), date the knowledge texts the previous release stored without
used_at, and record the release as finalized — and, on a terminal, asks
before it does it, unless --yes; elsewhere it needs --yes. --dry-run says
it and changes nothing. Rolling back to the previous release is supported
only until then; binaries of release 3 and later refuse a store finalized
for a later release than theirs.
Exits 1 when a check fails (--dry-run too), 2 without --yes where it cannot
ask; nothing is changed then.`,
		Example: "  siteops release finalize --dry-run\n  siteops release finalize --yes\n  siteops release finalize --unversioned --yes   # workers with SITEOPS_WORKER_VERSIONING=false",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := wiring.OpenExistingStoreFromEnv(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = st.Close() }()
			return c.withRollout(cmd, &f, rollout.Options{Unversioned: unversioned}, func(r *rollout.Rollout) error {
				// The checks run, and what would change is read, before
				// anything is asked; the contract steps check again.
				rep, err := r.Finalize(cmd.Context(), st, false, defaultOperator())
				if err != nil && !errors.Is(err, rollout.ErrNotReady) {
					return err
				}
				if !rep.Ready || rep.Done {
					if err := c.show(cmd, dryRunFinalize{DryRun: cf.dryRun, FinalizeReport: rep}, func(w io.Writer) error {
						switch {
						case cf.dryRun && rep.Done:
							_, _ = fmt.Fprintf(w, "nothing changed (dry run); %s would change nothing: the store is finalized already\n", cmd.CommandPath())
						case cf.dryRun:
							_, _ = fmt.Fprintf(w, "nothing changed (dry run); %s would refuse: %s\n", cmd.CommandPath(), failed(rep.Checks))
						}
						printFinalize(w, rep)
						return nil
					}); err != nil {
						return err
					}
					if !rep.Ready {
						return reported{exitFailed}
					}
					return nil
				}
				if ok, err := c.confirm(cmd, &cf, finalizeChange(rep)); err != nil || !ok {
					return err
				}
				rep, err = r.Finalize(cmd.Context(), st, true, defaultOperator())
				if err != nil && !errors.Is(err, rollout.ErrNotReady) {
					return err
				}
				if err := c.show(cmd, rep, func(w io.Writer) error { printFinalize(w, rep); return nil }); err != nil {
					return err
				}
				if errors.Is(err, rollout.ErrNotReady) {
					return reported{exitFailed}
				}
				return nil
			})
		},
	}
	f.register(cmd)
	cf.register(cmd)
	cmd.Flags().BoolVar(&unversioned, "unversioned", false, "the workers run without Worker Versioning (SITEOPS_WORKER_VERSIONING=false): list the checks that need the Worker Deployment as what to make sure of, instead of failing them")
	return cmd
}

// dryRunFinalize is finalize's report with -o json when it changes
// nothing.
type dryRunFinalize struct {
	DryRun  bool `json:"dry_run"`
	Changed bool `json:"changed"`
	rollout.FinalizeReport
}

func printFinalize(w io.Writer, rep rollout.FinalizeReport) {
	_, _ = fmt.Fprintf(w, "finalizing release %d\n", rep.Release)
	printChecks(w, rep)
	if rep.Done && rep.Result == nil {
		return // finalized before
	}
	_, _ = fmt.Fprintf(w, "contract steps: %s\n", rollout.DescribePlan(rep.Plan))
	if r := rep.Result; r != nil {
		msg := fmt.Sprintf("finalized release %d: re-sealed %d secret(s), dated %d knowledge text(s)", r.Release, r.Resealed, r.TextsDated)
		if r.UnreadableRetired > 0 {
			msg += fmt.Sprintf("; %d retired secret(s) in the first format do not decrypt and stay refused", r.UnreadableRetired)
		}
		_, _ = fmt.Fprintln(w, msg+".")
		_, _ = fmt.Fprintf(w, "Rolling back to release %d is no longer supported: the next release may change the store in ways it cannot read, and binaries of release %d and later refuse a store finalized for a later one.\n", release.Previous.Number, release.FirstRegistering)
	}
	if !rep.Ready {
		_, _ = fmt.Fprintln(w, "not finalized: "+strings.TrimSpace(failed(rep.Checks)))
	}
}

// printChecks prints what finalize checked, and what it cannot check.
func printChecks(w io.Writer, rep rollout.FinalizeReport) {
	for _, c := range rep.Checks {
		state := "ok  "
		if !c.OK {
			state = "FAIL"
		}
		_, _ = fmt.Fprintf(w, "  %s %-9s %s\n", state, c.Name, c.Detail)
	}
	if len(rep.Unverified) > 0 {
		_, _ = fmt.Fprintln(w, "cannot be checked; make sure yourself:")
		for _, u := range rep.Unverified {
			_, _ = fmt.Fprintf(w, "  - %s\n", u)
		}
	}
}

func failed(checks []rollout.Check) string {
	var names []string
	for _, c := range checks {
		if !c.OK {
			names = append(names, c.Name)
		}
	}
	return "the " + strings.Join(names, ", ") + " check(s) failed; fix them and run it again"
}

func (c *cli) releaseRollbackCmd() *cobra.Command {
	var f releaseFlags
	var buildID string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "rollback --to-build-id BUILD",
		Short: "Make an older build current again, keeping on the newer build the runs that ran there",
		Long: `Roll back to BUILD, an older build whose workers run again (redeploy them
first): it becomes the current version, so new runs start on it. The runs the
current build ran stay on it: its Pinned runs as always, and its AutoUpgrade
runs (lead syncs, incidents, rotations) are pinned to it by a versioning
override, since their histories may hold code paths of the newer build that
the older one cannot replay. So the newer build's workers keep running for
them; promoting a fixed build later (siteops release promote) moves them on.

Run it from the newer build's image (a release before 3 has no 'siteops
release'). Rolling back to the previous release is possible until 'siteops
release finalize': until then every migration of the newer release only
added to the store, so the older one reads and writes it as before. Roll the
ingress back too.`,
		Example: "  siteops release rollback --to-build-id v2.0.4",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return c.withRollout(cmd, &f, rollout.Options{}, func(r *rollout.Rollout) error {
				res, err := r.Rollback(ctx, buildID)
				if err != nil {
					return err
				}
				return c.show(cmd, res, func(w io.Writer) error {
					now := time.Now()
					_, _ = fmt.Fprintf(w, "%s is now the current version of deployment %s (was %s)\n", res.To, r.Deployment(), res.From)
					_, _ = fmt.Fprintf(w, "kept %d AutoUpgrade run(s) on %s (pinned by an override; promoting a fixed build moves them):\n", len(res.KeptOnFrom), res.From)
					printRuns(w, res.KeptOnFrom, now)
					_, _ = fmt.Fprintf(w, "%d run(s) %s pinned finish there:\n", len(res.PinnedToFrom), res.From)
					printRuns(w, res.PinnedToFrom, now)
					_, _ = fmt.Fprintf(w, "keep %s's workers running until siteops release drained --build-id %s exits 0\n", res.From, res.From)
					return nil
				})
			})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&buildID, "to-build-id", "", "the older build to make current again")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the older build's workers to poll")
	_ = cmd.MarkFlagRequired("to-build-id")
	return cmd
}
