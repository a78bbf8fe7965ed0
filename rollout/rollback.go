package rollout

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// RollbackResult is what Rollback did.
type RollbackResult struct {
	// From is the build that was current; To the one that is now.
	From string `json:"from_build_id"`
	To   string `json:"to_build_id"`
	// KeptOnFrom are the AutoUpgrade runs that had run on From: they are
	// pinned to it (a versioning override), since their histories may
	// hold From's new code paths (GetVersion branches, new commands) that
	// the older build cannot replay. From's workers must keep running for
	// them; promoting a fixed build moves them on.
	KeptOnFrom []Run `json:"kept_on_from"`
	// PinnedToFrom are the runs From pinned (Pinned kinds): they finish on
	// it, as after any promote.
	PinnedToFrom []Run `json:"pinned_to_from"`
}

// Rollback makes toBuildID, an older build whose workers run again, the
// current version in place of the current one (From), without sending
// From's runs to code that cannot replay them: every running run whose
// last workflow task ran on From and that would follow the current build
// (AutoUpgrade) is first pinned to From, twice over to catch visibility's
// lag, and once more after the switch. New runs start on toBuildID; the
// runs From ran finish on From. Run it from From's image: a release
// before 3 has no `siteops release`.
//
// Rolling back to the previous release is possible until `siteops
// release finalize`; the store's migrations of From only expanded, so the
// older release reads and writes it as before.
func (r *Rollout) Rollback(ctx context.Context, toBuildID string) (RollbackResult, error) {
	res := RollbackResult{To: toBuildID}
	dep, err := quoted(r.o.Deployment)
	if err != nil {
		return res, err
	}
	desc, err := r.o.Client.WorkerDeploymentClient().GetHandle(r.o.Deployment).Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	if err != nil {
		return res, fmt.Errorf("describing deployment %s: %w", r.o.Deployment, err)
	}
	if cur := desc.Info.RoutingConfig.CurrentVersion; cur != nil {
		res.From = cur.BuildID
	}
	switch res.From {
	case "":
		return res, fmt.Errorf("deployment %s has no current build to roll back from", r.o.Deployment)
	case toBuildID:
		return res, fmt.Errorf("build %s is already the current version of deployment %s", toBuildID, r.o.Deployment)
	}
	from, err := quoted(r.version(res.From))
	if err != nil {
		return res, err
	}
	query := "ExecutionStatus = 'Running' AND TemporalWorkerDeployment = " + dep + " AND " + saVersion + " = " + from
	kept := map[string]bool{}
	pass := func() error {
		runs, _, err := r.list(ctx, query)
		if err != nil {
			return err
		}
		res.PinnedToFrom = nil
		for _, run := range runs {
			if kept[run.RunID] {
				continue
			}
			pinned, err := r.keepOn(ctx, run, res.From)
			if err != nil {
				return err
			}
			if pinned {
				kept[run.RunID] = true
				res.KeptOnFrom = append(res.KeptOnFrom, run)
			} else if run.Behavior == behPinned {
				res.PinnedToFrom = append(res.PinnedToFrom, run)
			}
		}
		return nil
	}
	for range 2 {
		if err := pass(); err != nil {
			return res, err
		}
	}
	var promoted PromoteResult
	if err := r.makeCurrent(ctx, toBuildID, &promoted); err != nil {
		return res, err
	}
	return res, pass()
}

// keepOn pins a run that would follow the current build to build, and
// reports whether it did.
func (r *Rollout) keepOn(ctx context.Context, run Run, build string) (bool, error) {
	desc, err := r.o.Client.DescribeWorkflow(ctx, run.WorkflowID, run.RunID)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("describing %s: %w", run.WorkflowID, err)
	}
	info := desc.RawResponse.GetWorkflowExecutionInfo()
	vi := info.GetVersioningInfo()
	ov := vi.GetVersioningOverride()
	follows := ov.GetAutoUpgrade() || (ov.GetPinned() == nil && vi.GetBehavior() == enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE)
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING || !follows {
		return false, nil
	}
	_, err = r.o.Client.UpdateWorkflowExecutionOptions(ctx, client.UpdateWorkflowExecutionOptionsRequest{
		WorkflowId: run.WorkflowID, RunId: run.RunID,
		WorkflowExecutionOptionsChanges: client.WorkflowExecutionOptionsChanges{
			VersioningOverride: &client.VersioningOverrideChange{Value: &client.PinnedVersioningOverride{
				Version: worker.WorkerDeploymentVersion{DeploymentName: r.o.Deployment, BuildID: build},
			}},
		},
	})
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("keeping %s on build %s: %w", run.WorkflowID, build, err)
	}
	return true, nil
}
