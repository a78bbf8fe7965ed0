package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

const (
	apiKey    = "svc_live_e2e"
	taskQueue = "siteops-e2e"
)

// env is one test's world (package testenv) in a namespace of its own on
// one of the shared dev servers.
type env struct{ *testenv.Env }

// newEnv builds the test's world on a shared dev server, with the
// simulator as the end-to-end tests run it (testenv.EndToEnd).
func newEnv(t *testing.T, d store.Dialect, cfg simulator.Config) *env {
	t.Helper()
	address, ns := nextNamespace(t)
	return newEnvAt(t, address, ns, d, cfg)
}

// envOn is newEnv, on SQLite with the default simulator, in namespace ns
// of another server, at address.
func envOn(t *testing.T, address, ns string) *env {
	t.Helper()
	return newEnvAt(t, address, ns, store.SQLite, simulator.Config{})
}

func newEnvAt(t *testing.T, address, ns string, d store.Dialect, cfg simulator.Config) *env {
	t.Helper()
	return &env{testenv.New(t, testenv.Options{Address: address, Namespace: ns, TaskQueue: taskQueue, APIKey: apiKey,
		Dialect: d, Sim: testenv.EndToEnd(cfg)})}
}

// startWorker runs the siteops worker as the binary does (wiring.RunWorker)
// until the test ends.
func (e *env) startWorker(t *testing.T) *testenv.Worker {
	t.Helper()
	return e.StartWorker(t, testenv.WorkerOptions{})
}

// onboard starts an onboarding and waits for its result.
func (e *env) onboard(t *testing.T, p starter.Prepared, within time.Duration) workflows.OnboardingResult {
	t.Helper()
	o, err := e.Starter.Onboard(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.OnboardingResult
	if err := e.Starter.Wait(ctxWithin(t, within), o.Run, &res); err != nil {
		t.Fatalf("%s: %v", o.WorkflowID, err)
	}
	return res
}

func ctxWithin(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
