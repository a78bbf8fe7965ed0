package wiring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/doctor"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/telemetry"
	"github.com/siteops/siteops/worker"
)

// The names of the checks a process keeps while it waits for a dependency;
// the same as package doctor's.
const (
	checkTemporal = "temporal"
	checkDatabase = "database"
	// checkPolling is the worker's own: whether it could start polling
	// (recorded only once a start has failed).
	checkPolling = string(worker.StepPolling)
)

// waitAtMost is the longest a process waits between two tries to reach a
// dependency that is not there yet.
const waitAtMost = 10 * time.Second

// openStorePatiently opens the store, and while the database cannot be
// reached (it comes up after the process, or is restarting) keeps trying,
// saying so in the log and in checks, instead of exiting: a process that
// exits on it is restarted into the same wait. A store that answers and
// refuses (a bad URL, a failed migration) is returned as the error.
func openStorePatiently(ctx context.Context, db config.Database, process string, logger *slog.Logger, checks *Checks) (*store.Store, string, error) {
	for wait := time.Second; ; wait = min(2*wait, waitAtMost) {
		st, where, err := OpenStore(ctx, db)
		if err == nil {
			return st, where, nil
		}
		if !errors.Is(err, store.ErrUnreachable) || ctx.Err() != nil {
			return nil, "", err
		}
		r := doctor.FailedWith(checkDatabase, err)
		r.Transient = true
		checks.set(r)
		logger.Warn("the database does not answer; the "+process+" waits for it", "detail", r.Detail, "retry_in", wait)
		select {
		case <-ctx.Done():
			return nil, "", ctx.Err()
		case <-time.After(wait):
		}
	}
}

// dialPatiently connects to Temporal, and while Temporal cannot be reached
// (it comes up after the worker, or is restarting) keeps trying, saying so
// in the log and in checks, instead of exiting. Credentials Temporal
// refuses, or a connection that cannot work as configured (TLS against a
// plaintext server), are returned as the error: no retry fixes them.
func dialPatiently(ctx context.Context, o client.Options, conn Connection, process string, logger *slog.Logger, checks *Checks) (client.Client, error) {
	for wait := time.Second; ; wait = min(2*wait, waitAtMost) {
		c, err := client.DialContext(ctx, o)
		if err == nil {
			return c, nil
		}
		explained := DialError(conn, err)
		if ctx.Err() != nil || errors.Is(explained, ErrTemporalAuth) || !doctor.IsTransient(err) ||
			strings.Contains(err.Error(), "first record does not look like a TLS handshake") {
			return nil, explained
		}
		r := doctor.FailedWith(checkTemporal, explained)
		r.Transient = true
		checks.set(r)
		logger.Warn(fmt.Sprintf("Temporal does not answer; the %s waits for it and starts its work once it does", process), "detail", r.Detail, "retry_in", wait)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// startPatiently is the worker's answer to a failed step of its start
// (worker.Options StartFailed and Started): while Temporal is
// unavailable, overloaded or too slow, the worker keeps trying, saying so
// in the log and in checks, instead of exiting. The check is the step's
// name: polling (the SDK worker's first calls; /readyz answers 503 until
// it passes), deployment (making a first build current) or secret
// reconcile schedule; the worker polls during the last two, degraded.
func startPatiently(taskQueue string, logger *slog.Logger, checks *Checks) (failed func(worker.StartStep, error, time.Duration) bool, started func(worker.StartStep)) {
	// What the log says of each step while it fails, and the check's
	// detail once it passes.
	says := map[worker.StartStep][2]string{
		worker.StepPolling:           {"the worker could not start polling; it tries again", "polling task queue " + taskQueue},
		worker.StepDeployment:        {"the worker polls, but its build could not be made its deployment's current version yet; it tries again", "the worker's build is its deployment's current version"},
		worker.StepSchedule:          {"the secret reconciliation is not scheduled yet (deleted endpoints' secrets stay accepted until it is); the worker tries again", "the secret reconciliation is scheduled"},
		worker.StepLeadSweepSchedule: {"the lead sweep is not scheduled yet (a lead whose lead.created delivery never comes waits until it is); the worker tries again", "the lead sweep is scheduled"},
	}
	failed = func(step worker.StartStep, err error, retryIn time.Duration) bool {
		if !doctor.IsTransient(err) {
			return false
		}
		r := doctor.FailedWith(string(step), err)
		r.Transient = true
		checks.set(r)
		logger.Warn(says[step][0], "task_queue", taskQueue, "detail", r.Detail, "retry_in", retryIn)
		return true
	}
	started = func(step worker.StartStep) {
		checks.set(doctor.Result{Check: string(step), Status: doctor.OK, Detail: says[step][1]})
		logger.Info("the worker's start went through after all; no longer degraded by it", "check", string(step), "detail", says[step][1])
	}
	return failed, started
}

// meters is the meter provider of tel, or none.
func meters(tel *telemetry.Telemetry) metric.MeterProvider {
	if tel == nil {
		return nil
	}
	return tel.MeterProvider
}
