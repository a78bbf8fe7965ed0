package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/siteopstest"
)

var (
	servers   []*devserver.Server
	binary    string // the siteops binary, built once
	namespace atomic.Int32
)

const (
	namespaces = 80
	// shared is how many dev servers the tests share: each holds every
	// shared-th namespace. A dev server keeps its state in one SQLite
	// connection that all its services wait for; two halve the wait, and
	// a test that loads one leaves the other's tests alone.
	shared = 2
)

// TestMain starts the shared dev servers with a namespace per test, so
// that derived workflow IDs (lead-sync/site_1 in every simulator) never
// collide.
//
// The tests that mostly wait (for a CLI's --timeout against a Temporal that
// does not answer, for Retry-After under throttling, for a killed worker's
// activities to time out, for a Temporal that comes up late or slow, for the
// previous release beside this one) call t.Parallel: go test runs them
// after the others, together (make test passes -parallel 4), and the
// package's time is no longer their sum. Each kept 0.2–0.4 of a core busy
// when run alone. A test that may run in parallel uses its own namespace,
// simulator, store and ports (internal/ports never hands out a port twice),
// and never looks at processes it did not start; one that measures
// something the others would disturb (memory, latency, the processes left
// behind) stays sequential.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if _, err := devserver.FindCLI(); err != nil {
		if os.Getenv("SITEOPS_REQUIRE_TEMPORAL") != "" {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "SKIP e2e: %v\n", err)
		return 0
	}
	dir, err := os.MkdirTemp("", "siteops-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	logs := make([]string, shared)
	servers = make([]*devserver.Server, shared)
	errs := make([]error, shared)
	var wg sync.WaitGroup
	for i := range shared {
		var ns []string
		for n := i; n < namespaces; n += shared {
			ns = append(ns, fmt.Sprintf("e2e-%d", n))
		}
		logs[i] = filepath.Join(dir, fmt.Sprintf("devserver-%d.log", i))
		wg.Go(func() { servers[i], errs[i] = startShared(ns, logs[i]) })
	}
	wg.Wait()
	for _, s := range servers {
		if s != nil {
			defer s.Stop()
		}
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if binary, err = siteopstest.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		// What the shared servers said of their own errors: a failure of
		// many tests at once is often a server's, not theirs.
		for i, l := range logs {
			fmt.Fprintf(os.Stderr, "e2e: shared dev server %d (%s)'s last errors:\n%s", i, servers[i].Address, siteopstest.Tail(l, 40, 400))
		}
	}
	return code
}

// startShared starts a shared dev server with namespaces ns, its output
// going to the file logPath.
func startShared(ns []string, logPath string) (*devserver.Server, error) {
	f, err := os.Create(logPath) //nolint:gosec // a file of the test's own directory
	if err != nil {
		return nil, err
	}
	s, err := devserver.Start(context.Background(), devserver.Options{Namespaces: ns, Log: f})
	_ = f.Close() // the server has its own descriptor
	return s, err
}

// nextNamespace hands each test its own namespace, and the address of the
// shared dev server that holds it.
func nextNamespace(t *testing.T) (address, ns string) {
	t.Helper()
	n := int(namespace.Add(1) - 1)
	if n >= namespaces {
		t.Fatalf("more than %d e2e tests: raise namespaces in main_test.go", namespaces)
	}
	return servers[n%shared].Address, fmt.Sprintf("e2e-%d", n)
}
