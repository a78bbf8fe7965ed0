package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/siteopstest"
)

var (
	server    *devserver.Server
	binary    string // the siteops binary, built once
	namespace atomic.Int32
)

const namespaces = 80

// TestMain starts one dev server with a namespace per test, so that derived
// workflow IDs (lead-sync/site_1 in every simulator) never collide.
//
// The tests that mostly wait (for a CLI's --timeout against a Temporal that
// does not answer, for Retry-After under throttling, for a killed worker's
// activities to time out, for a Temporal that comes up late, for the
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
	serverLog, err := os.Create(filepath.Join(dir, "devserver.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() { _ = serverLog.Close() }()
	var ns []string
	for i := range namespaces {
		ns = append(ns, fmt.Sprintf("e2e-%d", i))
	}
	server, err = devserver.Start(context.Background(), devserver.Options{Namespaces: ns, Log: serverLog})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer server.Stop()
	if binary, err = siteopstest.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		// What the shared server said of its own errors: a failure of
		// many tests at once is often the server's, not theirs.
		fmt.Fprintf(os.Stderr, "e2e: the shared dev server's last errors (of %s):\n%s", serverLog.Name(), siteopstest.Tail(serverLog.Name(), 40, 400))
	}
	return code
}

// nextNamespace hands each test its own namespace.
func nextNamespace(t *testing.T) string {
	t.Helper()
	n := namespace.Add(1) - 1
	if n >= namespaces {
		t.Fatalf("more than %d e2e tests: raise namespaces in main_test.go", namespaces)
	}
	return fmt.Sprintf("e2e-%d", n)
}
