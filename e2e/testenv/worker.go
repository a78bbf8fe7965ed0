package testenv

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/taskqueue/v1"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/telemetry"
	"github.com/siteops/siteops/wiring"
)

// NoReconcile is the period of the secret reconciliation's schedule that
// StartWorker asks for unless told otherwise, so that no reconciliation
// runs during a test that did not ask for one (it would retire the stored
// secrets of endpoints the simulator does not have). A schedule's times
// are counted from 1970 in whole periods: with 50 years the next is in
// 2069 (a year would be every December), and three periods, the run
// timeout the worker gives a reconciliation, still fit a time.Duration.
const NoReconcile = 50 * 365 * 24 * time.Hour

// PollWithin bounds how long StartWorker waits for its worker to poll.
const PollWithin = 90 * time.Second

// WorkerOptions are what a test sets of the worker StartWorker runs, as
// the variables of `siteops worker` would; the zero value runs it with the
// binary's defaults, except those named below.
type WorkerOptions struct {
	// PayloadKey encrypts the payloads (SITEOPS_PAYLOAD_KEY: a key, or a
	// ring of them).
	PayloadKey string
	// SecretReconcileEvery is the secret reconciliation's period
	// (SITEOPS_SECRET_RECONCILE_EVERY); NoReconcile when zero.
	SecretReconcileEvery time.Duration
	// LeadSweepEvery is the lead sweep's period
	// (SITEOPS_LEAD_SWEEP_EVERY); NoReconcile when zero, so that no sweep
	// runs during a test that did not ask for one.
	LeadSweepEvery time.Duration
	// NexusTextQuota bounds the knowledge texts of one caller of the Nexus
	// service (SITEOPS_NEXUS_TEXT_QUOTA); the binary's default when zero.
	NexusTextQuota int64
	// Telemetry traces the worker's workflows, activities and calls.
	Telemetry *telemetry.Telemetry
	// Logger receives the worker's log. When nil the log is kept and
	// printed if the test fails.
	Logger *slog.Logger
	// Preflight is what the worker does with its start-up checks.
	Preflight wiring.Preflight
}

// Worker is a worker that StartWorker runs.
type Worker struct {
	// Identity names the worker to Temporal (its pollers, its tasks in
	// the histories).
	Identity string
	cancel   context.CancelFunc
	done     chan struct{}
	err      error // wiring.RunWorker's, once done is closed
	stopOnce sync.Once
}

var workers atomic.Int64

// StartWorker runs the siteops worker on the env as `siteops worker` runs
// it — wiring.RunWorker, with its own store connection and Temporal
// client, its start-up checks, the Nexus service and the secret
// reconciliation's schedule — with webhook endpoints allowed on loopback
// (SITEOPS_ALLOW_LOOPBACK_RECEIVERS), without Worker Versioning and
// without a metrics endpoint. It returns once the worker polls the task
// queue for workflow and activity tasks, and stops it when the test ends
// (or at Stop), failing the test if it ended with an error.
//
// The worker sets the Temporal SDK's sticky workflow cache to the binary's
// size; the SDK keeps that one size for every worker of the process.
func (e *Env) StartWorker(tb testing.TB, o WorkerOptions) *Worker {
	tb.Helper()
	w := &Worker{Identity: fmt.Sprintf("testenv-worker-%d", workers.Add(1)), done: make(chan struct{})}
	cfg := wiring.WorkerConfig{
		Temporal: config.Temporal{Address: e.Address, Namespace: e.Namespace, TaskQueue: e.TaskQueue,
			PayloadKey: o.PayloadKey, Identity: w.Identity},
		AgentSite: config.AgentSite{BaseURL: e.SimURL, APIKey: e.APIKey, AllowLoopback: true, Headroom: agentsite.DefaultHeadroom},
		Database:  config.Database{URL: e.DBURL, SecretKey: base64.StdEncoding.EncodeToString(storetest.TestKey)},
		Worker:    WorkerDefaults(),
	}
	if o.SecretReconcileEvery != 0 {
		cfg.SecretReconcileEvery = o.SecretReconcileEvery
	}
	if o.LeadSweepEvery != 0 {
		cfg.LeadSweepEvery = o.LeadSweepEvery
	}
	if o.NexusTextQuota != 0 {
		cfg.NexusTextQuota = o.NexusTextQuota
	}
	logger, log := o.Logger, (*siteopstest.Log)(nil)
	if logger == nil {
		log = &siteopstest.Log{}
		logger = slog.New(slog.NewTextHandler(log, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() {
		defer close(w.done)
		w.err = wiring.RunWorker(ctx, cfg, logger, o.Telemetry, o.Preflight)
	}()
	tb.Cleanup(func() {
		if err := w.Stop(); err != nil {
			tb.Errorf("worker %s: ended with %v; want it to stop cleanly%s", w.Identity, err, tail(log))
		} else if tb.Failed() && log != nil {
			tb.Logf("worker %s:%s", w.Identity, tail(log))
		}
	})
	siteopstest.EventuallyNil(tb, PollWithin, "worker "+w.Identity+" to poll task queue "+e.TaskQueue, func() error {
		select {
		case <-w.done:
			tb.Fatalf("worker %s: ended before it polled: %v; want it polling task queue %s%s", w.Identity, w.err, e.TaskQueue, tail(log))
		default:
		}
		return e.polledBy(tb.Context(), w.Identity)
	})
	return w
}

// polledBy returns nil once identity polls the env's task queue for
// workflow tasks and for activity tasks, else what polls it.
func (e *Env) polledBy(ctx context.Context, identity string) error {
	for _, kind := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
		resp, err := e.Client.DescribeTaskQueue(ctx, e.TaskQueue, kind)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(resp.GetPollers(), func(p *taskqueue.PollerInfo) bool { return p.GetIdentity() == identity }) {
			var got []string
			for _, p := range resp.GetPollers() {
				got = append(got, p.GetIdentity())
			}
			return fmt.Errorf("%s pollers %v", kind, got)
		}
	}
	return nil
}

// Stop stops the worker as SIGTERM stops `siteops worker` (in-flight
// activities get worker.StopTimeout to finish) and waits until it has. It
// returns the error the worker ended with, nil for a clean stop; it does
// its work once.
func (w *Worker) Stop() error {
	w.stopOnce.Do(func() {
		w.cancel()
		<-w.done
		if errors.Is(w.err, context.Canceled) {
			w.err = nil // stopped during its start-up checks
		}
	})
	return w.err
}

// WorkerDefaults are the settings of config.Worker that `siteops worker` runs
// with when no variable sets them, but for the four a test process
// differs in: no metrics endpoint, no Worker Versioning, and the secret
// reconciliation and the lead sweep every NoReconcile.
func WorkerDefaults() config.Worker {
	return config.Worker{
		WorkflowCacheSize:     2000,
		SecretReconcileEvery:  NoReconcile,
		LeadSweepEvery:        NoReconcile,
		NexusTextQuota:        64 << 20,
		NexusTextTotal:        1 << 30,
		NexusSharedTextQuota:  8 << 20,
		NexusMaxRunning:       20,
		NexusSharedMaxRunning: 10,
		KnowledgeRetention:    720 * time.Hour,
	}
}

// tailBytes is how much of a worker's log a failing test prints.
const tailBytes = 16 << 10

// tail is the end of log as a message's last lines; empty for a worker
// whose log went to the test's logger (a nil log).
func tail(log *siteopstest.Log) string {
	if log == nil {
		return ""
	}
	s := log.String()
	if len(s) > tailBytes {
		s = "…" + s[len(s)-tailBytes:]
	}
	return "\nits log:\n" + s
}
