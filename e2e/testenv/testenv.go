// Package testenv is the world the end-to-end tests and the benchmarks run
// siteops in: the Agent-Site simulator over HTTP, a real store, a Temporal
// client of one namespace and a starter (New), and the siteops worker and
// ingress as the binary runs them, through package wiring
// (Env.StartWorker, Env.StartIngress).
//
// An Env is handed the address and namespace of a Temporal server, which
// the tests get the one way (temporal.go): a test's own with DevServer, or
// the servers a package's tests share, set up by its TestMain through
// Shared.Main (e2e: two dev servers; e2e/production: a cluster on
// PostgreSQL with mutual TLS; bench: a dev server, or the cluster of `make
// cluster`).
//
// It lives beside the end-to-end tests rather than with the rigs of
// internal/: it imports wiring, the top of the product, while the rigs
// (devserver, cluster, siteopstest, ports, testcerts) import none of it,
// and siteopstest is used by the product's own package tests, ingress's
// among them, which wiring imports.
package testenv

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// Options say what an Env is made of.
type Options struct {
	// Address is the Temporal frontend, Namespace the namespace the env's
	// client and workers use ("default" when empty).
	Address, Namespace string
	// TaskQueue is the queue of the env's starter and workers.
	TaskQueue string
	// APIKey is the key the workers use, and the one key the simulator
	// accepts (with every scope) unless Sim.Keys says otherwise.
	APIKey string
	// Dialect is the store's: a SQLite file of the test (the default), or
	// a schema of its own on the test PostgreSQL server, which skips the
	// test when that server cannot be reached (package storetest).
	Dialect store.Dialect
	// Sim configures the simulator as it is; EndToEnd fills in the
	// defaults of the end-to-end tests.
	Sim simulator.Config
}

// Env is one test's world. Everything in it ends with the test, or at
// Close.
type Env struct {
	Sim    *simulator.Simulator
	SimURL string
	APIKey string
	Store  *store.Store
	DBURL  string // the store's URL, for processes and workers that open it too
	// Address, Namespace and TaskQueue are where the env's client, starter
	// and workers meet.
	Address, Namespace, TaskQueue string
	Client                        client.Client
	Starter                       *starter.Starter

	closeOnce sync.Once
	closers   []func()
}

// New builds an Env for tb: it serves the simulator, opens and migrates
// the store with storetest.TestKey as its secret key, and dials Temporal.
func New(tb testing.TB, o Options) *Env {
	tb.Helper()
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.Sim.Keys == nil {
		o.Sim.Keys = map[string][]string{o.APIKey: {simulator.ScopeAll}}
	}
	e := &Env{APIKey: o.APIKey, Address: o.Address, Namespace: o.Namespace, TaskQueue: o.TaskQueue}
	// The store's place first: PostgreSQL out of reach skips the test
	// before anything is started, and the place goes after what uses it.
	e.DBURL = storetest.SQLiteURL(tb)
	if o.Dialect == store.Postgres {
		e.DBURL = storetest.PostgresSchemaURL(tb)
	}
	tb.Cleanup(e.Close)
	var closeSim func()
	e.Sim, e.SimURL, closeSim = serve(tb, o.Sim)
	e.closers = append(e.closers, closeSim)

	st, err := store.Open(tb.Context(), e.DBURL, store.Options{SecretKey: storetest.TestKey})
	if err != nil {
		tb.Fatalf("testenv: opening the %s store: %v", dialect(o.Dialect), err)
	}
	e.Store = st
	e.closers = append(e.closers, func() { _ = st.Close() })

	c, err := client.DialContext(tb.Context(), client.Options{HostPort: o.Address, Namespace: o.Namespace, Logger: quietSDK()})
	if err != nil {
		tb.Fatalf("testenv: dialling Temporal at %s (namespace %s): %v", o.Address, o.Namespace, err)
	}
	e.Client = c
	e.closers = append(e.closers, c.Close)
	e.Starter = starter.New(starter.Options{Client: c, Texts: st, LeadSyncs: st, TaskQueue: o.TaskQueue, Namespace: o.Namespace})
	return e
}

// Close closes the client and the store and stops the simulator, before
// the test ends: for a benchmark that builds an Env per iteration. Workers
// started on the env must be stopped first. The test's clean-up calls it
// too; it does its work once.
func (e *Env) Close() {
	e.closeOnce.Do(func() {
		for i := len(e.closers) - 1; i >= 0; i-- {
			e.closers[i]()
		}
	})
}

// Simulator serves a simulator of cfg over HTTP on loopback until tb
// ends, and returns it and its base URL.
func Simulator(tb testing.TB, cfg simulator.Config) (*simulator.Simulator, string) {
	tb.Helper()
	sim, url, stop := serve(tb, cfg)
	tb.Cleanup(stop)
	return sim, url
}

// serve serves a simulator of cfg; stop stops it.
func serve(tb testing.TB, cfg simulator.Config) (sim *simulator.Simulator, url string, stop func()) {
	tb.Helper()
	sim, err := simulator.New(cfg)
	if err != nil {
		tb.Fatalf("testenv: simulator: %v", err)
	}
	srv := httptest.NewServer(sim.Handler())
	return sim, srv.URL, func() { srv.Close(); sim.Close() }
}

// EndToEnd fills in what cfg leaves unset as the end-to-end tests run the
// simulator: its clock 100 times as fast; knowledge that takes an hour of
// it (36 s), so that an onboarding that waits for knowledge waits unless
// the test shortens it; and webhooks delivered to loopback receivers (the
// test's ingress).
func EndToEnd(cfg simulator.Config) simulator.Config {
	if cfg.TimeScale == 0 {
		cfg.TimeScale = 100
	}
	if cfg.KnowledgeDelay == 0 {
		cfg.KnowledgeDelay = time.Hour
	}
	cfg.AllowLoopbackReceivers = true
	return cfg
}

// quietSDK is the Temporal SDK's logger for the env's client: the tests
// read what they need from the server, not from the SDK's log.
func quietSDK() tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func dialect(d store.Dialect) store.Dialect {
	if d == "" {
		return store.SQLite
	}
	return d
}
