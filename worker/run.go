package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/activities"
	sitenexus "github.com/siteops/siteops/nexus"
	"github.com/siteops/siteops/nexus/api"
)

// StopTimeout is how long a stopping worker lets in-flight activities
// finish; the ones still running after it are retried by another worker.
const StopTimeout = 30 * time.Second

// Deployment is the Worker Deployment Version a worker polls as.
type Deployment struct {
	Name    string
	BuildID string
}

// Options are what a worker runs on.
type Options struct {
	Client     client.Client
	TaskQueue  string
	Activities *activities.Activities
	Logger     *slog.Logger
	// Deployment, when set, opts into Worker Versioning: the workflows
	// keep their catalogue behaviour (Pinned or AutoUpgrade) and, when the
	// deployment has no current version yet (its first build), this one
	// becomes current. Later builds become current when an operator says
	// so (`siteops release promote`, which also moves the runs an older
	// build pinned whose kinds are AutoUpgrade now).
	Deployment *Deployment
	// Nexus, when set, registers siteops' Nexus service (package nexus) on
	// the same worker, beside the workflows and activities it starts.
	Nexus *sitenexus.Options
	// Worker tunes the SDK worker; StopTimeout is the default
	// WorkerStopTimeout.
	Worker sdkworker.Options
	// SecretReconcileEvery is the period of the secret reconciliation's
	// schedule, created or updated at start; zero is
	// DefaultSecretReconcileEvery, negative leaves the schedule alone.
	SecretReconcileEvery time.Duration
	// LeadSweepEvery is the period of the lead sweep's schedule, created
	// or updated at start; zero is DefaultLeadSweepEvery, negative leaves
	// the schedule alone.
	LeadSweepEvery time.Duration
	// StartFailed, when set, is told of each failure of a step of the
	// start and says whether a retry may fix it: Temporal unavailable,
	// overloaded or too slow to answer. Run then tries the step again
	// after retryIn, instead of returning the failure. Started, when set,
	// is told once a step that failed succeeds.
	StartFailed func(step StartStep, err error, retryIn time.Duration) (retry bool)
	Started     func(step StartStep)
}

// StartStep is a step of a worker's start that may wait for Temporal.
type StartStep string

// The steps of a worker's start that may wait for Temporal.
const (
	// StepPolling is the SDK worker's first calls (the namespace's
	// capabilities), before it polls.
	StepPolling StartStep = "polling"
	// StepDeployment is making the worker's build its deployment's
	// current version when it has none; the worker polls meanwhile.
	StepDeployment StartStep = "deployment"
	// StepSchedule is creating or updating the secret reconciliation's
	// schedule; the worker polls meanwhile.
	StepSchedule StartStep = "secret reconcile schedule"
	// StepLeadSweepSchedule is creating or updating the lead sweep's
	// schedule; the worker polls meanwhile.
	StepLeadSweepSchedule StartStep = "lead sweep schedule"
)

// The waits between two tries to start: the first, and the longest.
const (
	firstStartWait   = time.Second
	longestStartWait = 10 * time.Second
)

// HeartbeatThrottle is the longest the worker holds back an activity's
// heartbeats, and so the longest a cancellation waits to reach it.
const HeartbeatThrottle = 2 * time.Second

// withDefaults returns o with the SDK worker's settings that Options
// documents filled in.
func (o Options) withDefaults() Options {
	if o.Worker.WorkerStopTimeout == 0 {
		o.Worker.WorkerStopTimeout = StopTimeout
	}
	if o.Worker.MaxHeartbeatThrottleInterval == 0 {
		// A cancellation reaches an activity only with the answer to a
		// heartbeat, and the SDK holds heartbeats back for up to 80 % of
		// the heartbeat timeout (24 s for the lead sync). The lead sync
		// cancels its page loop when its history fills, and on-call cancels
		// workflows: both should take effect in seconds. One heartbeat
		// call every 2 s per running activity is cheap.
		o.Worker.MaxHeartbeatThrottleInterval = HeartbeatThrottle
	}
	if d := o.Deployment; d != nil {
		o.Worker.DeploymentOptions = sdkworker.DeploymentOptions{
			UseVersioning:             true,
			Version:                   sdkworker.WorkerDeploymentVersion{DeploymentName: d.Name, BuildID: d.BuildID},
			DefaultVersioningBehavior: workflow.VersioningBehaviorPinned,
		}
	}
	return o
}

// Run runs a worker until ctx is done, then stops it gracefully.
func Run(ctx context.Context, o Options) error {
	o = o.withDefaults()
	w, err := start(ctx, o)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it started
		}
		return err
	}
	o.Logger.Info("worker started", "task_queue", o.TaskQueue, "nexus", o.Nexus != nil)
	for _, s := range []struct {
		Schedule
		every, otherwise time.Duration
	}{
		{SecretReconcileSchedule, o.SecretReconcileEvery, DefaultSecretReconcileEvery},
		{LeadSweepSchedule, o.LeadSweepEvery, DefaultLeadSweepEvery},
	} {
		if s.every >= 0 {
			keepScheduled(ctx, o, s.Schedule, cmp.Or(s.every, s.otherwise))
		}
	}
	if d := o.Deployment; d != nil {
		if err := becomeCurrentIfFirst(ctx, o, *d); err != nil {
			w.Stop()
			return err
		}
	}
	<-ctx.Done()
	o.Logger.Info("worker stopping: in-flight activities get time to finish", "timeout", o.Worker.WorkerStopTimeout)
	w.Stop()
	return nil
}

// start builds the SDK worker, registers siteops on it and starts it. A
// start that fails in a way o.StartFailed says a retry may fix is tried
// again, on a new SDK worker (one that failed to start cannot start
// again), with a growing wait, until it succeeds or ctx ends.
func start(ctx context.Context, o Options) (sdkworker.Worker, error) {
	failed := false
	for wait := firstStartWait; ; wait = longer(wait) {
		w := sdkworker.New(o.Client, o.TaskQueue, o.Worker)
		Register(w, o.Activities)
		if o.Nexus != nil {
			n := *o.Nexus
			if n.TaskQueue == "" {
				n.TaskQueue = o.TaskQueue
			}
			if err := RegisterNexus(w, n); err != nil {
				return nil, err
			}
			if !failed {
				o.Logger.Info("Nexus service registered", "service", api.ServiceName)
			}
		}
		err := w.Start() // the SDK's calls in it do not end with ctx
		if err == nil && ctx.Err() != nil {
			w.Stop()
			return nil, ctx.Err()
		}
		if err == nil {
			if failed && o.Started != nil {
				o.Started(StepPolling)
			}
			return w, nil
		}
		err = fmt.Errorf("starting the worker: %w", err)
		if ctx.Err() != nil || o.StartFailed == nil || !o.StartFailed(StepPolling, err, wait) {
			return nil, err
		}
		failed = true
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// keepScheduled creates or updates the schedule sc. A worker without the
// right to manage schedules still serves; the schedule waits until one
// can create it. A failure o.StartFailed says a retry may fix (Temporal
// too slow) is tried again in the background, with a growing wait.
func keepScheduled(ctx context.Context, o Options, sc Schedule, every time.Duration) {
	again := func(err error, wait time.Duration) bool {
		switch {
		case ctx.Err() != nil:
			return false
		case o.StartFailed != nil && o.StartFailed(sc.Step, err, wait):
			return true
		}
		o.Logger.Error("the "+sc.What+" is not scheduled: "+sc.Unscheduled, "error", err)
		return false
	}
	err := EnsureSchedule(ctx, o.Client, sc, o.TaskQueue, every, o.Logger)
	if err == nil || !again(err, firstStartWait) {
		return
	}
	go func() {
		for wait := firstStartWait; ; wait = longer(wait) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			err := EnsureSchedule(ctx, o.Client, sc, o.TaskQueue, every, o.Logger)
			if err == nil {
				if o.Started != nil {
					o.Started(sc.Step)
				}
				return
			}
			if !again(err, longer(wait)) {
				return
			}
		}
	}()
}

// longer is the wait after wait between two tries of a step of the start.
func longer(wait time.Duration) time.Duration { return min(2*wait, longestStartWait) }

// becomeCurrentIfFirst makes d the current version of its deployment when
// the deployment has none (the first build ever deployed), so that a new
// namespace works without a manual step; it leaves a current version that
// exists alone, and says how to move to d. The version is registered when
// its first poll reaches the server, so it retries for a minute; after
// that, it goes on retrying only what o.StartFailed says a retry may fix
// (Temporal unavailable or too slow), with a growing wait, and gives the
// version its minute again after each of those (the pollers reach a
// Temporal that is back on their own backoff).
func becomeCurrentIfFirst(ctx context.Context, o Options, d Deployment) error {
	h := o.Client.WorkerDeploymentClient().GetHandle(d.Name)
	patient := time.Now().Add(time.Minute)
	failed := false
	for wait := firstStartWait; ; {
		err := makeCurrentIfNone(ctx, h, d, o.Logger)
		if err == nil {
			if failed && o.Started != nil {
				o.Started(StepDeployment)
			}
			return nil
		}
		if ctx.Err() != nil {
			return nil // the worker is stopping
		}
		var nf *serviceerror.NotFound
		var pre *serviceerror.FailedPrecondition
		expected := errors.As(err, &nf) || errors.As(err, &pre) // the version is not registered yet
		next := 200 * time.Millisecond
		switch {
		case time.Now().Before(patient):
			if !expected {
				o.Logger.Warn("reading the worker deployment failed; retrying", "deployment", d.Name, "error", err)
			}
		case o.StartFailed != nil && o.StartFailed(StepDeployment, fmt.Errorf("worker deployment %s: making build %s current: %w", d.Name, d.BuildID, err), wait):
			failed, next, wait = true, wait, longer(wait)
			patient = time.Now().Add(next + time.Minute)
		default:
			return fmt.Errorf("worker deployment %s: build %s could not be made current (%w); make it current with `siteops release promote --build-id %s` (SITEOPS_DEPLOYMENT_NAME=%s), or start with SITEOPS_WORKER_VERSIONING=false",
				d.Name, d.BuildID, err, d.BuildID, d.Name)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next):
		}
	}
}

// makeCurrentIfNone is one try of becomeCurrentIfFirst.
func makeCurrentIfNone(ctx context.Context, h client.WorkerDeploymentHandle, d Deployment, logger *slog.Logger) error {
	desc, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	if err != nil {
		return err
	}
	switch cur := desc.Info.RoutingConfig.CurrentVersion; {
	case cur != nil && cur.BuildID == d.BuildID:
		logger.Info("worker deployment version is current", "deployment", d.Name, "build_id", d.BuildID)
		return nil
	case cur != nil:
		logger.Warn("another build is the deployment's current version: this worker serves the pinned workflows of its own build and waits to be made current",
			"deployment", d.Name, "build_id", d.BuildID, "current_build_id", cur.BuildID,
			"to_switch", fmt.Sprintf("siteops release promote --build-id %s", d.BuildID))
		return nil
	}
	if _, err := h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: d.BuildID, ConflictToken: desc.ConflictToken}); err != nil {
		return err
	}
	logger.Info("the deployment had no current version: this build is now current", "deployment", d.Name, "build_id", d.BuildID)
	return nil
}
