// Package rollout drives a release of siteops on Temporal and on the store:
// making a new build the deployment's current version and moving onto it
// the runs an older build pinned that this build declares AutoUpgrade
// (Promote), telling when an old build has no pinned run left and may be
// stopped (Drained), describing where every open run is (Status), going
// back to an older build without sending it runs it cannot replay
// (Rollback), keeping the store's process registry (Register), and the
// contract step of the store's expand-then-contract migrations once no
// process of the previous release remains (Finalize).
//
// `siteops release promote|drained|status|rollback|finalize` call it, and
// deploy/kubernetes/rollout.sh runs those commands; the end-to-end tests
// run the same commands. It leaves deploying and stopping processes to
// whoever runs them (Kubernetes, compose, a person).
package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/workflows"
)

// Rollout is one Worker Deployment on one namespace.
type Rollout struct{ o Options }

// Options configure a Rollout (New).
type Options struct {
	Client     client.Client
	Namespace  string
	Deployment string // SITEOPS_DEPLOYMENT_NAME
	// TaskQueue is SITEOPS_TASK_QUEUE: Finalize looks at its pollers.
	TaskQueue string
	// PollWindow is how recently a worker must have polled the task queue
	// for Finalize to count it as running (default 2 minutes: a running
	// worker polls again within about 70 s, and the server keeps a
	// stopped one's last poll for minutes).
	PollWindow time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Logf, when set, is told what a long step is waiting for.
	Logf func(format string, args ...any)
	// Settle is how long after a version stopped being current or ramping
	// Drained trusts an empty visibility count without the server's own
	// drainage status (default 5 s): a run pinned just before the switch
	// reaches visibility shortly after.
	Settle time.Duration
	// Unversioned says that the workers run without Worker Versioning
	// (SITEOPS_WORKER_VERSIONING=false): Finalize then lists the checks
	// that need the Worker Deployment as what the operator must make sure
	// of, instead of failing them.
	Unversioned bool
}

// New returns a Rollout of o.
func New(o Options) *Rollout { return &Rollout{o: o.withDefaults()} }

// withDefaults returns o with the clock, Settle and PollWindow that
// Options documents where it left them zero.
func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Settle == 0 {
		o.Settle = 5 * time.Second
	}
	if o.PollWindow == 0 {
		o.PollWindow = defaultPollWindow
	}
	return o
}

// Deployment is the Worker Deployment's name (SITEOPS_DEPLOYMENT_NAME).
func (r *Rollout) Deployment() string { return r.o.Deployment }

// Run is one open workflow run as visibility lists it.
type Run struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Type       string `json:"type"`
	// BuildID is the build whose worker completed its last workflow task
	// ("" when none of a versioned worker did).
	BuildID string `json:"build_id,omitempty"`
	// Behavior is Pinned or AutoUpgrade ("" unversioned).
	Behavior string    `json:"behavior,omitempty"`
	Started  time.Time `json:"started"`
}

// Age is how long the run has been open at now.
func (r Run) Age(now time.Time) time.Duration { return now.Sub(r.Started).Truncate(time.Second) }

func (r *Rollout) now() time.Time { return r.o.Now() }

func (r *Rollout) logf(format string, args ...any) {
	if r.o.Logf != nil {
		r.o.Logf(format, args...)
	}
}

// Visibility's names for a run's deployment version and behaviour.
const (
	saVersion  = "TemporalWorkerDeploymentVersion"
	saBehavior = "TemporalWorkflowVersioningBehavior"
	behPinned  = "Pinned"
)

// version is the deployment version string of buildID, as visibility
// stores it.
func (r *Rollout) version(buildID string) string { return r.o.Deployment + ":" + buildID }

// quoted refuses a value that would need escaping inside a visibility
// query: deployment names and build ids never hold quotes.
func quoted(v string) (string, error) {
	if strings.ContainsAny(v, `'"\`) {
		return "", fmt.Errorf("%q cannot be named in a visibility query", v)
	}
	return "'" + v + "'", nil
}

// maxListed bounds how many runs one listing reads.
const maxListed = 100_000

// list returns the runs a visibility query matches, and whether it
// stopped at maxListed.
func (r *Rollout) list(ctx context.Context, query string) ([]Run, bool, error) {
	var out []Run
	var token []byte
	for {
		resp, err := r.o.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: r.o.Namespace, Query: query, PageSize: 1000, NextPageToken: token,
		})
		if err != nil {
			return nil, false, fmt.Errorf("listing workflows (%s): %w", query, err)
		}
		for _, e := range resp.GetExecutions() {
			run := Run{
				WorkflowID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId(),
				Type: e.GetType().GetName(), Started: e.GetStartTime().AsTime(),
			}
			fields := e.GetSearchAttributes().GetIndexedFields()
			if v := keyword(fields[saVersion]); v != "" {
				run.BuildID = strings.TrimPrefix(v, r.o.Deployment+":")
			}
			run.Behavior = keyword(fields[saBehavior])
			out = append(out, run)
			if len(out) >= maxListed {
				return out, true, nil
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, false, nil
		}
	}
}

// keyword decodes a Keyword search attribute ("" when absent).
func keyword(p *commonpb.Payload) string {
	if p == nil {
		return ""
	}
	var s string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err != nil {
		return ""
	}
	return s
}

// PromoteResult is what Promote did.
type PromoteResult struct {
	BuildID string `json:"build_id"`
	// Previous is the build that was current before ("" when this one
	// already was, or none was).
	Previous       string `json:"previous_build_id,omitempty"`
	AlreadyCurrent bool   `json:"already_current"`
	// Moved are the runs pinned to another build whose kind this binary
	// declares AutoUpgrade: they now carry an AutoUpgrade override and
	// move to the current build at their next workflow task.
	Moved []Run `json:"moved"`
	// StayPinned are the runs that stay on the build that pinned them
	// (their kind is Pinned here): that build must run until they end.
	StayPinned []Run `json:"stay_pinned"`
}

// Promote makes buildID the deployment's current version, once its
// workers poll every task queue the current version serves (the server
// refuses before; Promote tries again until ctx ends), then moves every
// running run that another build pinned and whose kind this binary's
// catalogue declares AutoUpgrade onto the current build (an AutoUpgrade
// versioning override: the run moves at its next workflow task and keeps
// the override). It is safe to run again: a current build stays current,
// and a moved run is not moved twice.
//
// Moving a run is safe only if this build's code replays its history:
// make test replays every release's recorded histories
// (workflows/replay_test.go), and every change to an AutoUpgrade kind is
// guarded by workflow.GetVersion. Run Promote from the new build (its
// catalogue says what moves). A run of such a kind pinned to another
// build by a versioning override moves too: Rollback pins that way the
// runs it keeps on a newer build, and rolling forward again is Promote.
func (r *Rollout) Promote(ctx context.Context, buildID string) (PromoteResult, error) {
	res := PromoteResult{BuildID: buildID}
	if _, err := quoted(r.o.Deployment); err != nil {
		return res, err
	}
	if err := r.makeCurrent(ctx, buildID, &res); err != nil {
		return res, err
	}
	moved := map[string]bool{}
	// Visibility lags the server a little: a pass that moved something is
	// followed by another until one finds nothing more to move.
	for pass := 0; pass < 5; pass++ {
		n, err := r.movePass(ctx, buildID, &res, moved)
		if err != nil {
			return res, err
		}
		if n == 0 {
			break
		}
	}
	return res, nil
}

// makeCurrent sets buildID as current, retrying while the server refuses
// because its workers have not polled yet.
func (r *Rollout) makeCurrent(ctx context.Context, buildID string, res *PromoteResult) error {
	h := r.o.Client.WorkerDeploymentClient().GetHandle(r.o.Deployment)
	lastMsg := ""
	for {
		desc, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
		if err == nil {
			cur := desc.Info.RoutingConfig.CurrentVersion
			if cur != nil && cur.BuildID == buildID {
				res.AlreadyCurrent = res.Previous == ""
				return nil
			}
			if cur != nil {
				res.Previous = cur.BuildID
			}
			_, err = h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: buildID, ConflictToken: desc.ConflictToken})
			if err == nil {
				return nil
			}
		}
		if refusedForGood(err) {
			return fmt.Errorf("making build %s current in deployment %s: %w", buildID, r.o.Deployment, err)
		}
		if msg := err.Error(); msg != lastMsg {
			lastMsg = msg
			r.logf("waiting for build %s to poll every task queue of deployment %s: %s", buildID, r.o.Deployment, msg)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("build %s did not become the current version of deployment %s (%s): are its workers running with SITEOPS_BUILD_ID=%s? `siteops release status` shows the versions that poll",
				buildID, r.o.Deployment, lastMsg, buildID)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// refusedForGood tells errors no retry fixes from the server's "not yet"
// (the version has not polled every task queue, or was not seen at all).
func refusedForGood(err error) bool {
	var invalid *serviceerror.InvalidArgument
	var denied *serviceerror.PermissionDenied
	var unimplemented *serviceerror.Unimplemented
	return errors.As(err, &invalid) || errors.As(err, &denied) || errors.As(err, &unimplemented)
}

// movePass moves what one listing shows and returns how many it moved.
func (r *Rollout) movePass(ctx context.Context, buildID string, res *PromoteResult, moved map[string]bool) (int, error) {
	dep, err := quoted(r.o.Deployment)
	if err != nil {
		return 0, err
	}
	runs, _, err := r.list(ctx, "ExecutionStatus = 'Running' AND TemporalWorkerDeployment = "+dep+" AND "+saBehavior+" = '"+behPinned+"'")
	if err != nil {
		return 0, err
	}
	res.StayPinned = nil
	n := 0
	for _, run := range runs {
		if run.BuildID == buildID || moved[run.RunID] {
			continue
		}
		if !Movable(run.Type) {
			res.StayPinned = append(res.StayPinned, run)
			continue
		}
		// Visibility may be behind: the run itself says whether it is
		// still pinned, and how.
		desc, err := r.o.Client.DescribeWorkflow(ctx, run.WorkflowID, run.RunID)
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("describing %s: %w", run.WorkflowID, err)
		}
		info := desc.RawResponse.GetWorkflowExecutionInfo()
		vi := info.GetVersioningInfo()
		switch {
		case info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			continue
		case vi.GetVersioningOverride().GetAutoUpgrade():
			moved[run.RunID] = true
			res.Moved = append(res.Moved, run)
			continue
		case vi.GetVersioningOverride().GetPinned().GetVersion().GetBuildId() == buildID:
			continue
		case vi.GetVersioningOverride().GetPinned() == nil && vi.GetBehavior() != enumspb.VERSIONING_BEHAVIOR_PINNED:
			continue
		}
		_, err = r.o.Client.UpdateWorkflowExecutionOptions(ctx, client.UpdateWorkflowExecutionOptionsRequest{
			WorkflowId: run.WorkflowID, RunId: run.RunID,
			WorkflowExecutionOptionsChanges: client.WorkflowExecutionOptionsChanges{
				VersioningOverride: &client.VersioningOverrideChange{Value: &client.AutoUpgradeVersioningOverride{}},
			},
		})
		if errors.As(err, &nf) {
			continue // it ended meanwhile
		}
		if err != nil {
			return n, fmt.Errorf("moving %s (pinned to %s) to the current build: %w", run.WorkflowID, run.BuildID, err)
		}
		moved[run.RunID] = true
		res.Moved = append(res.Moved, run)
		n++
	}
	return n, nil
}

// DrainReport says whether a build may be stopped.
type DrainReport struct {
	BuildID string `json:"build_id"`
	// Routing is "current" or "ramping" while the build takes new work
	// (then it is never drained), "" otherwise.
	Routing string `json:"routing,omitempty"`
	// Known says the deployment still lists the version.
	Known bool `json:"known"`
	// DrainageStatus is the server's own: "draining", "drained" or ""
	// (not reported: current, ramping, unknown, or not checked yet). The
	// server checks it minutes apart; the visibility count is current.
	DrainageStatus string `json:"drainage_status,omitempty"`
	// Pinned are the running runs pinned to the build.
	Pinned []Run `json:"pinned"`
	// Movable are those of Pinned whose kind this binary declares
	// AutoUpgrade: `siteops release promote` moves them.
	Movable []Run `json:"movable,omitempty"`
	Drained bool  `json:"drained"`
	// Reason says why it is not drained, or what it relied on.
	Reason string `json:"reason"`
}

// Drained reports whether no running run is pinned to buildID, so that
// its workers may be stopped: the build is neither current nor ramping,
// visibility lists no running run pinned to it, and either the server
// reports the version drained or it stopped taking new work at least
// Settle ago (a run pinned just before the switch is listed by then).
func (r *Rollout) Drained(ctx context.Context, buildID string) (DrainReport, error) {
	rep := DrainReport{BuildID: buildID}
	pin, err := quoted("pinned:" + r.version(buildID))
	if err != nil {
		return rep, err
	}
	h := r.o.Client.WorkerDeploymentClient().GetHandle(r.o.Deployment)
	desc, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
	case err != nil:
		return rep, fmt.Errorf("describing deployment %s: %w", r.o.Deployment, err)
	default:
		rc := desc.Info.RoutingConfig
		if rc.CurrentVersion != nil && rc.CurrentVersion.BuildID == buildID {
			rep.Routing = "current"
		} else if rc.RampingVersion != nil && rc.RampingVersion.BuildID == buildID {
			rep.Routing = "ramping"
		}
	}
	var changed time.Time
	v, err := h.DescribeVersion(ctx, client.WorkerDeploymentDescribeVersionOptions{BuildID: buildID})
	switch {
	case err == nil:
		rep.Known, changed = true, v.Info.RoutingChangedTime
		if d := v.Info.DrainageInfo; d != nil {
			rep.DrainageStatus = drainage(d.DrainageStatus)
		}
	case errors.As(err, &nf):
	default:
		var pre *serviceerror.FailedPrecondition
		if !errors.As(err, &pre) {
			return rep, fmt.Errorf("describing build %s of deployment %s: %w", buildID, r.o.Deployment, err)
		}
	}
	rep.Pinned, _, err = r.list(ctx, "ExecutionStatus = 'Running' AND BuildIds = "+pin)
	if err != nil {
		return rep, err
	}
	for _, run := range rep.Pinned {
		if Movable(run.Type) {
			rep.Movable = append(rep.Movable, run)
		}
	}
	settle := r.o.Settle
	switch {
	case rep.Routing != "":
		rep.Reason = fmt.Sprintf("build %s is the %s version: new runs start on it; promote another build first", buildID, rep.Routing)
	case len(rep.Pinned) > 0:
		rep.Reason = fmt.Sprintf("%d running run(s) are pinned to build %s; its workers must keep running until they end", len(rep.Pinned), buildID)
		if len(rep.Movable) > 0 {
			rep.Reason += fmt.Sprintf(" (%d of them may move: run `siteops release promote --build-id <current>` again)", len(rep.Movable))
		}
	case rep.DrainageStatus == "drained":
		rep.Drained, rep.Reason = true, "no running run is pinned to it, and the server reports it drained"
	case !rep.Known:
		rep.Drained, rep.Reason = true, "no running run is pinned to it, and the deployment no longer lists it"
	case r.now().Sub(changed) >= settle:
		rep.Drained, rep.Reason = true, fmt.Sprintf("no running run is pinned to it, and it has taken no new work since %s (the server's drainage check runs minutes apart)", changed.UTC().Format(time.RFC3339))
	default:
		rep.Reason = fmt.Sprintf("it stopped taking new work only at %s: ask again in a few seconds, when visibility lists every run pinned to it", changed.UTC().Format(time.RFC3339))
	}
	return rep, nil
}

// Movable reports whether this binary's catalogue declares the workflow
// type AutoUpgrade: a run of it that an older build pinned may move to the
// current build.
func Movable(workflowType string) bool {
	k, ok := workflows.KindNamed(workflowType)
	return ok && k.Versioning == workflow.VersioningBehaviorAutoUpgrade
}

// drainage names a drainage status as the temporal CLI does.
func drainage(s client.WorkerDeploymentVersionDrainageStatus) string {
	switch s {
	case client.WorkerDeploymentVersionDrainageStatusDraining:
		return "draining"
	case client.WorkerDeploymentVersionDrainageStatusDrained:
		return "drained"
	}
	return ""
}
