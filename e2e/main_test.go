package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/siteopstest"
)

var (
	servers   []*devserver.Server
	world     testenv.Shared // the package's directory and servers
	binary    string         // the siteops binary, built once
	namespace atomic.Int32
)

const (
	namespaces = 120
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
// after the others, together (make test passes -parallel 6), and the
// package's time is no longer their sum. Each kept 0.2–0.4 of a core busy
// when run alone. A test that may run in parallel uses its own namespace,
// simulator, store and ports (internal/ports never hands out a port twice),
// and never looks at processes it did not start; one that measures
// something the others would disturb (memory, latency, the processes left
// behind) stays sequential.
func TestMain(m *testing.M) {
	os.Exit(world.Main(m, testenv.MainOptions{Name: "e2e", Start: startServers, Binary: &binary, Failed: serversSaid}))
}

// startServers starts the shared dev servers, each with its slot's
// namespaces.
func startServers(ctx context.Context, w *testenv.Shared) error {
	if _, err := devserver.FindCLI(); err != nil {
		return err
	}
	servers = make([]*devserver.Server, shared)
	errs := make([]error, shared)
	var wg sync.WaitGroup
	for i := range shared {
		logs[i] = filepath.Join(w.Dir, fmt.Sprintf("devserver-%d.log", i))
		wg.Go(func() { servers[i], errs[i] = startShared(ctx, slotNamespaces(i), logs[i]) })
	}
	wg.Wait()
	for _, s := range servers {
		if s != nil {
			w.Stop(s.Stop)
		}
	}
	return errors.Join(errs...)
}

// serversSaid prints what the shared servers said of their own errors: a
// failure of many tests at once is often a server's, not theirs.
func serversSaid() {
	for i, l := range logs {
		fmt.Fprintf(os.Stderr, "e2e: shared dev server %d (%s)'s last errors:\n%s", i, server(i).Address, siteopstest.Tail(l, 40, 400))
	}
}

// startShared starts a shared dev server with namespaces ns, its output
// going to the file logPath (left open while it runs).
func startShared(ctx context.Context, ns []string, logPath string) (*devserver.Server, error) {
	f, err := os.Create(logPath) //nolint:gosec // a file of the test's own directory
	if err != nil {
		return nil, err
	}
	return devserver.Start(ctx, devserver.Options{Namespaces: ns, Log: f})
}

// stuck is how a dev server answers every call once its one SQLite
// connection is stuck: SQLite's sqlite3_interrupt, which the driver calls
// when a query's context ends, interrupts every statement that starts
// until none is running, and a server that always has one running never
// gets there. The last CI run of stop 30 saw a server answer so for its
// last 13 minutes, failing every test after it.
const stuck = "interrupted (9)"

// slots guards the shared servers: servers[i] is the one that holds the
// namespaces of slot i for the tests that start from now on, logs[i] the
// file of its output. A server replaced since keeps running until the
// package's tests end.
var (
	slots [shared]sync.Mutex
	logs  [shared]string
)

// server is the shared server that holds slot i's namespaces now.
func server(i int) *devserver.Server {
	slots[i].Lock()
	defer slots[i].Unlock()
	return servers[i]
}

// healthy makes sure that the shared server holding namespace ns answers
// it, before a test starts on it. A server stuck on its SQLite connection
// (stuck) is replaced: a new server takes slot i's namespaces for the
// tests that start from now on, said on standard error and in the test's
// log, while the stuck one keeps running until the package's tests end. A
// check never stops or restarts a server that tests are running on, so no
// test loses its workflows to another test's check; a test already on the
// stuck server sees the server's own answers. Other failures are left to
// the test.
func healthy(t *testing.T, i int, ns string) {
	t.Helper()
	slots[i].Lock()
	defer slots[i].Unlock()
	var err error
	for range 3 {
		if err = describeNamespace(t, servers[i].Address, ns); err == nil || !strings.Contains(err.Error(), stuck) {
			return
		}
		time.Sleep(time.Second)
	}
	old := servers[i]
	msg := fmt.Sprintf("e2e: shared dev server %d (%s) answers %q to everything (%v): the tests from now on use a new one; the tests on it keep it", i, old.Address, stuck, err)
	fmt.Fprintln(os.Stderr, msg)
	t.Log(msg)
	logs[i] += ".next"
	next, err := startShared(t.Context(), slotNamespaces(i), logs[i])
	if err != nil {
		t.Fatalf("replacing shared dev server %d: %v", i, err)
	}
	world.Stop(next.Stop)
	servers[i] = next
}

// slotNamespaces are the namespaces of slot i: every shared-th one.
func slotNamespaces(i int) []string {
	var ns []string
	for n := i; n < namespaces; n += shared {
		ns = append(ns, fmt.Sprintf("e2e-%d", n))
	}
	return ns
}

// describeNamespace asks the server at address for namespace ns.
func describeNamespace(t *testing.T, address, ns string) error {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: address, Namespace: ns, Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
	return err
}

// nextNamespace hands each test its own namespace, and the address of the
// shared dev server that holds it, once that server answers (healthy).
func nextNamespace(t *testing.T) (address, ns string) {
	t.Helper()
	n := int(namespace.Add(1) - 1)
	if n >= namespaces {
		t.Fatalf("more than %d e2e tests: raise namespaces in main_test.go", namespaces)
	}
	ns = fmt.Sprintf("e2e-%d", n)
	healthy(t, n%shared, ns)
	return server(n % shared).Address, ns
}
