package wiring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/doctor"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/worker"
)

// flaky is a check that fails as kind until it has been run okAfter
// times (never when okAfter is 0), then passes.
func flaky(name string, kind func(doctor.Result) doctor.Result, okAfter int32) (check, *atomic.Int32) {
	var runs atomic.Int32
	return func(context.Context) doctor.Result {
		n := runs.Add(1)
		if okAfter > 0 && n >= okAfter {
			return doctor.Result{Check: name, Status: doctor.OK, Detail: "fine"}
		}
		return kind(doctor.Result{Check: name, Status: doctor.Fail, Detail: "broken", Err: errors.New("broken")})
	}, &runs
}

func transient(r doctor.Result) doctor.Result     { r.Transient = true; return r }
func partial(r doctor.Result) doctor.Result       { r.Partial = true; return r }
func misconfigured(r doctor.Result) doctor.Result { return r }

// TestPreflightRefusesOnlyWhatNoRetryFixes runs the start-up rule: a
// transient failure is retried and then degrades, a partial one degrades,
// a configuration failure refuses (unless skipped), and a degraded
// process keeps checking until the check passes, which /readyz shows.
func TestPreflightRefusesOnlyWhatNoRetryFixes(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	p := Preflight{Patience: 3 * time.Second, RecheckEvery: 20 * time.Millisecond}

	t.Run("a transient failure that clears within the patience", func(t *testing.T) {
		c, runs := flaky("api", transient, 2)
		checks := NewChecks(nil)
		if err := p.start(t.Context(), "worker", logger, checks, c); err != nil || checks.Degraded() || runs.Load() != 2 {
			t.Errorf("start = %v, degraded %v after %d runs; want a start, not degraded, after 2", err, checks.Degraded(), runs.Load())
		}
	})

	t.Run("a transient failure that outlasts it, then clears", func(t *testing.T) {
		var fixed atomic.Bool
		checks := NewChecks(nil)
		c := func(context.Context) doctor.Result {
			if fixed.Load() {
				return doctor.Result{Check: "api", Status: doctor.OK}
			}
			return doctor.Result{Check: "api", Status: doctor.Fail, Transient: true, Detail: "503"}
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		started := time.Now()
		if err := p.start(ctx, "worker", logger, checks, c); err != nil || !checks.Degraded() {
			t.Fatalf("start = %v, degraded %v; want a degraded start", err, checks.Degraded())
		}
		if d := time.Since(started); d < 2*time.Second || d > 3*time.Second+siteopstest.Bound(time.Second) {
			t.Errorf("it started after %s; want about the patience, 3 s", d)
		}
		rec := httptest.NewRecorder()
		checks.Readiness("temporal").ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"status":"degraded"`) || !strings.Contains(rec.Body.String(), "503") {
			t.Errorf("/readyz = %d %s; want 200, degraded, with the cause", rec.Code, rec.Body)
		}
		fixed.Store(true)
		deadline := time.Now().Add(5 * time.Second)
		for checks.Degraded() {
			if time.Now().After(deadline) {
				t.Fatal("still degraded 5 s after the check passes again")
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	t.Run("a partial failure", func(t *testing.T) {
		c, _ := flaky("secret key", partial, 0)
		checks := NewChecks(nil)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		if err := p.start(ctx, "ingress", logger, checks, c); err != nil || !checks.Degraded() {
			t.Errorf("start = %v, degraded %v; want a degraded start", err, checks.Degraded())
		}
	})

	t.Run("a configuration failure", func(t *testing.T) {
		ok, _ := flaky("temporal", transient, 1)
		bad, runs := flaky("agent-site api", misconfigured, 0)
		started := time.Now()
		err := p.start(t.Context(), "worker", logger, NewChecks(nil), ok, bad)
		var pe *PreflightError
		if !errors.As(err, &pe) || pe.Result.Check != "agent-site api" || runs.Load() != 1 || time.Since(started) > siteopstest.Bound(time.Second) {
			t.Errorf("start = %v after %d runs in %s; want a refusal naming the check at once", err, runs.Load(), time.Since(started))
		}
		skip := Preflight{Skip: true, Patience: time.Second}
		if err := skip.start(t.Context(), "worker", logger, NewChecks(nil), bad); err != nil {
			t.Errorf("with --skip-checks: %v; want a start", err)
		}
	})

	t.Run("an essential check fails /readyz", func(t *testing.T) {
		checks := NewChecks(nil)
		checks.set(doctor.Result{Check: "temporal", Status: doctor.Fail, Transient: true, Detail: "cannot reach"})
		rec := httptest.NewRecorder()
		checks.Readiness("temporal").ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "cannot reach") {
			t.Errorf("/readyz = %d %s; want 503 with the cause", rec.Code, rec.Body)
		}
	})
}

// TestProbe asks the process beside it where the process's own variables
// say it listens: a 200 answer passes, another answer fails naming it, and
// an address that cannot be asked is a setting to fix.
func TestProbe(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	t.Setenv("SITEOPS_METRICS_ADDR", strings.TrimPrefix(srv.URL, "http://"))
	if err := Probe(t.Context(), "worker"); err != nil {
		t.Errorf("probing a healthy worker = %v", err)
	}
	status = http.StatusServiceUnavailable
	if err := Probe(t.Context(), "worker"); err == nil || !strings.Contains(err.Error(), "answered GET "+srv.URL+"/healthz with 503") {
		t.Errorf("probing an unhealthy worker = %v, want the answer named", err)
	}
	for role, env := range map[string][2]string{
		"worker":  {"SITEOPS_METRICS_ADDR", ""},
		"ingress": {"SITEOPS_INGRESS_ADMIN_ADDR", "nonsense"},
		"bogus":   {"SITEOPS_METRICS_ADDR", ":9090"},
	} {
		t.Setenv(env[0], env[1])
		if err := Probe(t.Context(), role); !errors.Is(err, config.ErrInvalid) {
			t.Errorf("probe %s with %s=%q = %v, want a setting to fix", role, env[0], env[1], err)
		}
	}
}

// TestStartPatiently is the worker's answer to a failed start: Temporal
// unavailable or too slow is retried and makes /readyz answer 503 naming
// the check polling until the worker starts (only degrades it while its
// build waits to be made current); a refusal (permission denied, a
// namespace that is not there) is not retried.
func TestStartPatiently(t *testing.T) {
	checks := NewChecks(nil)
	failed, started := startPatiently("siteops", slog.New(slog.DiscardHandler), checks)
	ready := func() int {
		rec := httptest.NewRecorder()
		checks.Readiness(checkTemporal, checkDatabase, checkPolling).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code
	}
	for _, err := range []error{
		serviceerror.NewPermissionDenied("not allowed", ""),
		serviceerror.NewNamespaceNotFound("e2e-x"),
		serviceerror.NewInvalidArgument("bad"),
	} {
		if failed(worker.StepPolling, err, time.Second) {
			t.Errorf("%T is retried; no retry fixes it", err)
		}
	}
	if code := ready(); code != http.StatusOK {
		t.Fatalf("/readyz after refusals = %d; they are the process's to end, not a check's", code)
	}
	for _, err := range []error{
		fmt.Errorf("starting the worker: failed reaching server: %w", context.DeadlineExceeded),
		serviceerror.NewUnavailable("GetNamespace operation failed. Error interrupted (9)"),
		serviceerror.NewResourceExhausted(0, "busy"),
	} {
		if !failed(worker.StepPolling, err, time.Second) {
			t.Errorf("%v is not retried; Temporal may answer the next time", err)
		}
		if code := ready(); code != http.StatusServiceUnavailable {
			t.Errorf("/readyz while the worker retries = %d, want 503", code)
		}
	}
	started(worker.StepPolling)
	if code := ready(); code != http.StatusOK {
		t.Errorf("/readyz once started = %d, want 200", code)
	}
	// Making a first build current waits while the worker polls: it
	// degrades the worker, it does not make it unready.
	if !failed(worker.StepDeployment, serviceerror.NewUnavailable("busy"), time.Second) {
		t.Error("an unavailable Temporal is not retried while making a build current")
	}
	if code := ready(); code != http.StatusOK || !checks.Degraded() {
		t.Errorf("/readyz while the build waits to be made current = %d (degraded %v), want 200 and degraded", code, checks.Degraded())
	}
	started(worker.StepDeployment)
	if !failed(worker.StepSchedule, serviceerror.NewDeadlineExceeded("slow"), time.Second) {
		t.Error("a slow Temporal is not retried while scheduling the secret reconciliation")
	}
	if code := ready(); code != http.StatusOK || !checks.Degraded() {
		t.Errorf("/readyz while the schedule waits = %d (degraded %v), want 200 and degraded", code, checks.Degraded())
	}
	started(worker.StepSchedule)
	if checks.Degraded() {
		t.Errorf("still degraded once the build is current: %+v", checks.Results())
	}
}
