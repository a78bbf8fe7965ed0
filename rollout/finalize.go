package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/release"
	"github.com/siteops/siteops/store"
)

// Check is one thing Finalize verified.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// FinalizeReport is what Finalize checked, could not check, and did.
type FinalizeReport struct {
	Release int `json:"release"`
	// FinalizedBefore is the release the store was finalized for before
	// (0: none).
	FinalizedBefore int     `json:"finalized_before"`
	Checks          []Check `json:"checks"`
	// Unverified are what no check can see: the operator must make sure.
	Unverified []string           `json:"unverified"`
	Plan       store.ContractPlan `json:"plan"`
	// Ready says every check passed.
	Ready bool `json:"ready"`
	// Done says the contract steps ran and the release is recorded.
	Done   bool                  `json:"done"`
	Result *store.ContractResult `json:"result,omitempty"`
}

// ErrNotReady is returned by Finalize when a check fails.
var ErrNotReady = errors.New("not ready to finalize")

// defaultPollWindow is Rollout.PollWindow's default.
const defaultPollWindow = 2 * time.Minute

// Finalize is the contract step of this release's expand-then-contract
// migrations. It checks what it can — the store is not finalized for this
// release yet; the deployment's current build is one a worker of this
// release registered and nothing ramps; every other build has drained;
// no worker of another build polls the task queue; no registered process
// of an older release was seen within store.ProcessGone — and lists what it cannot
// (processes of releases before the registry do not register; an old
// ingress does not poll). A check that cannot be made fails: the
// deployment not found (a wrong name, or workers without Worker
// Versioning) fails routing, drained and pollers, unless r.o.Unversioned
// says the workers are unversioned, when they are listed among what the
// operator must make sure of instead. When every check passes and yes is
// set, it runs the store's contract steps (store.Finalize) and records the
// release; without yes it changes nothing. After it, rolling back to the
// previous release is no longer possible, and the next release may refuse
// what this one still read.
func (r *Rollout) Finalize(ctx context.Context, st *store.Store, yes bool, by string) (FinalizeReport, error) {
	rep := FinalizeReport{Release: release.Number}
	var err error
	if rep.FinalizedBefore, err = st.FinalizedRelease(ctx); err != nil {
		return rep, err
	}
	if rep.FinalizedBefore >= release.Number {
		rep.Ready, rep.Done = true, true
		rep.Checks = append(rep.Checks, Check{"store", true, fmt.Sprintf("already finalized for release %d; nothing to do", rep.FinalizedBefore)})
		return rep, nil
	}
	if rep.Plan, err = st.Plan(ctx); err != nil {
		return rep, err
	}
	now := r.now()
	procs, err := st.Processes(ctx, now.Add(-store.ProcessGone))
	if err != nil {
		return rep, err
	}
	current, versioned, err := r.checkRouting(ctx, &rep, procs)
	if err != nil {
		return rep, err
	}
	if versioned {
		if err := r.checkPollers(ctx, &rep, current, now); err != nil {
			return rep, err
		}
	}
	var older []string
	for _, p := range procs {
		if p.Release < release.Number {
			older = append(older, fmt.Sprintf("%s of release %d (build %s) on %s, seen %s ago", p.Role, p.Release, p.BuildID, p.Host, now.Sub(p.SeenAt).Truncate(time.Second)))
		}
	}
	if len(older) > 0 {
		rep.Checks = append(rep.Checks, Check{"registry", false, "processes of an older release still run: " + strings.Join(older, "; ") + "; stop them and try again"})
	} else {
		rep.Checks = append(rep.Checks, Check{"registry", true, fmt.Sprintf("%d registered process(es) seen in the last %s, none of an older release", len(procs), store.ProcessGone)})
	}
	rep.Unverified = append(rep.Unverified,
		fmt.Sprintf("processes of release %d (%s) and earlier never record themselves: make sure none still runs, its ingress above all (an ingress does not poll Temporal); e.g. kubectl -n siteops get deploy,pods -l app.kubernetes.io/name=siteops -o wide", release.Previous.Number, release.Previous.Date),
		"the siteops commands people and scripts run: use this release's from now on")
	rep.Ready = true
	for _, c := range rep.Checks {
		rep.Ready = rep.Ready && c.OK
	}
	if !rep.Ready {
		return rep, ErrNotReady
	}
	if !yes {
		return rep, nil
	}
	res, err := st.Finalize(ctx, by)
	if err != nil {
		return rep, err
	}
	rep.Done, rep.Result = true, &res
	return rep, nil
}

// checkRouting checks the deployment's routing and that every build but
// the current one has drained, and returns the current build ("" none)
// and whether the pollers can be checked by build.
func (r *Rollout) checkRouting(ctx context.Context, rep *FinalizeReport, procs []store.Process) (string, bool, error) {
	desc, err := r.o.Client.WorkerDeploymentClient().GetHandle(r.o.Deployment).Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf) && r.o.Unversioned:
		r.unversioned(rep)
		return "", false, nil
	case errors.As(err, &nf):
		cannot := fmt.Sprintf("cannot be checked: the Worker Deployment %s does not exist — a wrong --deployment-name (default $SITEOPS_DEPLOYMENT_NAME or siteops), or workers that run unversioned (SITEOPS_WORKER_VERSIONING=false); name the deployment, or give --unversioned if the workers are unversioned", r.o.Deployment)
		rep.Checks = append(rep.Checks, Check{"routing", false, cannot}, Check{"drained", false, "cannot be checked without the deployment (see routing)"}, Check{"pollers", false, "cannot be told apart by build without the deployment (see routing)"})
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("describing deployment %s: %w", r.o.Deployment, err)
	}
	rc := desc.Info.RoutingConfig
	current := ""
	if rc.CurrentVersion != nil {
		current = rc.CurrentVersion.BuildID
	}
	switch {
	case r.o.Unversioned && current != "":
		rep.Checks = append(rep.Checks, Check{"routing", false, fmt.Sprintf("deployment %s has the current build %s, so its workers are versioned: drop --unversioned", r.o.Deployment, current)})
		return current, false, nil
	case r.o.Unversioned:
		r.unversioned(rep)
		return "", false, nil
	}
	switch {
	case current == "":
		rep.Checks = append(rep.Checks, Check{"routing", false, fmt.Sprintf("deployment %s has no current build: promote this release's build first (siteops release promote --build-id BUILD)", r.o.Deployment)})
	case rc.RampingVersion != nil:
		rep.Checks = append(rep.Checks, Check{"routing", false, fmt.Sprintf("build %s is ramping beside %s: finish the ramp (promote one of them) first", rc.RampingVersion.BuildID, current)})
	default:
		ours := false
		for _, p := range procs {
			ours = ours || (p.Role == "worker" && p.BuildID == current && p.Release >= release.Number)
		}
		if ours {
			rep.Checks = append(rep.Checks, Check{"routing", true, fmt.Sprintf("the current build %s is a worker of release %d", current, release.Number)})
		} else {
			rep.Checks = append(rep.Checks, Check{"routing", false, fmt.Sprintf("no worker of release %d registered as the current build %s in the last %s: is %s this release's build? promote this release's build first", release.Number, current, store.ProcessGone, current)})
		}
	}
	var pinned []string
	for _, v := range desc.Info.VersionSummaries {
		if v.Version.BuildID == current {
			continue
		}
		d, err := r.Drained(ctx, v.Version.BuildID)
		if err != nil {
			return current, true, err
		}
		if !d.Drained {
			pinned = append(pinned, "build "+v.Version.BuildID+": "+d.Reason)
		}
	}
	if len(pinned) > 0 {
		rep.Checks = append(rep.Checks, Check{"drained", false, strings.Join(pinned, "; ") + "; wait for siteops release drained to exit 0 for each"})
	} else {
		rep.Checks = append(rep.Checks, Check{"drained", true, fmt.Sprintf("every build but %s has drained", buildOrNone(current))})
	}
	return current, true, nil
}

// unversioned lists what cannot be checked of unversioned workers.
func (r *Rollout) unversioned(rep *FinalizeReport) {
	rep.Unverified = append(rep.Unverified, fmt.Sprintf("the workers are unversioned (--unversioned): no build, drainage or poller can be told apart; make sure every worker runs release %d and none of an older release still polls task queue %s", release.Number, r.o.TaskQueue))
}

// checkPollers checks that no worker of another build (or an unversioned
// one) polled the task queue recently.
func (r *Rollout) checkPollers(ctx context.Context, rep *FinalizeReport, current string, now time.Time) error {
	if r.o.TaskQueue == "" {
		rep.Checks = append(rep.Checks, Check{"pollers", false, "cannot be checked: no task queue named (SITEOPS_TASK_QUEUE)"})
		return nil
	}
	window := r.o.PollWindow
	others := map[string]time.Time{}
	for _, typ := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
		resp, err := r.o.Client.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
			Namespace: r.o.Namespace, TaskQueue: &taskqueuepb.TaskQueue{Name: r.o.TaskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}, TaskQueueType: typ,
		})
		if err != nil {
			return fmt.Errorf("describing task queue %s: %w", r.o.TaskQueue, err)
		}
		for _, p := range resp.GetPollers() {
			build := p.GetDeploymentOptions().GetBuildId()
			if build == current && current != "" {
				continue
			}
			if at := p.GetLastAccessTime().AsTime(); now.Sub(at) < window && at.After(others[build]) {
				others[build] = at
			}
		}
	}
	if len(others) == 0 {
		rep.Checks = append(rep.Checks, Check{"pollers", true, fmt.Sprintf("no worker of another build polled task queue %s in the last %s", r.o.TaskQueue, window)})
		return nil
	}
	var names []string
	for build, at := range others {
		names = append(names, fmt.Sprintf("%s (%s ago)", buildOrNone(build), now.Sub(at).Truncate(time.Second)))
	}
	rep.Checks = append(rep.Checks, Check{"pollers", false, fmt.Sprintf("workers of other builds polled task queue %s in the last %s: %s; stop them (rollout.sh retire BUILD) and try again %s later", r.o.TaskQueue, window, strings.Join(names, ", "), window)})
	return nil
}

func buildOrNone(b string) string {
	if b == "" {
		return "(unversioned)"
	}
	return b
}
