package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/wiring"
	"github.com/siteops/siteops/worker"
	"github.com/siteops/siteops/workflows"
)

const (
	apiKey    = "svc_live_e2e"
	taskQueue = "siteops-e2e"
)

// env is one test's world: a simulator, a store, a namespace on the shared
// dev server, and a starter.
type env struct {
	ns      string
	sim     *simulator.Simulator
	simURL  string
	store   *store.Store
	dbURL   string
	client  client.Client
	starter *starter.Starter
}

func newEnv(t *testing.T, d store.Dialect, cfg simulator.Config) *env {
	t.Helper()
	if cfg.Keys == nil {
		cfg.Keys = map[string][]string{apiKey: {simulator.ScopeAll}}
	}
	if cfg.TimeScale == 0 {
		cfg.TimeScale = 100
	}
	if cfg.KnowledgeDelay == 0 {
		cfg.KnowledgeDelay = time.Hour
	}
	cfg.AllowLoopbackReceivers = true
	sim, err := simulator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { srv.Close(); sim.Close() })

	dbURL := storetest.SQLiteURL(t)
	if d == store.Postgres {
		dbURL = storetest.PostgresSchemaURL(t)
	}
	st, err := store.Open(t.Context(), dbURL, store.WithSecretKey(storetest.TestKey))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })

	ns := nextNamespace(t)
	c, err := client.Dial(client.Options{HostPort: server.Address, Namespace: ns, Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &env{ns: ns, sim: sim, simURL: srv.URL, store: st, dbURL: dbURL, client: c,
		starter: &starter.Starter{Client: c, Texts: st, TaskQueue: taskQueue, Namespace: ns}}
}

// startWorker runs the real worker registration in-process until the test
// ends.
func (e *env) startWorker(t *testing.T) {
	t.Helper()
	api, err := wiring.APIClient(config.AgentSite{BaseURL: e.simURL, APIKey: apiKey, AllowLoopback: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The heartbeat throttle worker.Run sets: cancellations reach
	// activities within seconds, as in the siteops worker.
	w := sdkworker.New(e.client, taskQueue, sdkworker.Options{MaxHeartbeatThrottleInterval: worker.HeartbeatThrottle})
	worker.Register(w, loopbackReceivers(activities.New(api, e.store)))
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
}

// onboard starts an onboarding and waits for its result.
func (e *env) onboard(t *testing.T, p starter.Prepared, within time.Duration) workflows.OnboardingResult {
	t.Helper()
	o, err := e.starter.Onboard(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.OnboardingResult
	if err := e.starter.Wait(ctxWithin(t, within), o.Run, &res); err != nil {
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

// loopbackReceivers lets a test's activities register and rotate webhook
// endpoints at loopback receivers, as SITEOPS_ALLOW_LOOPBACK_RECEIVERS
// does in the siteops worker.
func loopbackReceivers(a *activities.Activities) *activities.Activities {
	a.Receivers = activities.ReceiverPolicy{AllowLoopback: true}
	return a
}
