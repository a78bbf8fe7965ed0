package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/internal/cluster"
	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/worker"
	"github.com/siteops/siteops/workflows"
)

// ClusterEnv names the directory of a running cluster of `localcluster up`
// (`make cluster`): with it set, the benchmarks run against that cluster
// instead of a dev server of their own.
const ClusterEnv = "SITEOPS_BENCH_CLUSTER"

// temporalAddress is the frontend every benchmark dials (namespace
// "default"); serverPIDs are the Temporal server's processes, whose CPU
// time BenchmarkOnboarding reads: the dev server, or the cluster's four
// services.
var (
	temporalAddress string
	serverPIDs      []int
)

// world is the benchmarks' directory and their Temporal server.
var world testenv.Shared

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run()) // no benchmark asked for: no server needed
	}
	os.Exit(world.Main(m, testenv.MainOptions{Name: "bench", Start: startServer}))
}

// startServer points the benchmarks at the cluster ClusterEnv names, or
// starts a dev server of their own.
func startServer(ctx context.Context, w *testenv.Shared) error {
	if dir := os.Getenv(ClusterEnv); dir != "" {
		if err := useCluster(dir); err != nil {
			return fmt.Errorf("%s=%s: %w", ClusterEnv, dir, err)
		}
		fmt.Fprintf(os.Stderr, "bench: on the Temporal cluster in %s at %s\n", dir, temporalAddress)
		return nil
	}
	server, err := devserver.Start(ctx, devserver.Options{})
	if err != nil {
		return err
	}
	w.Stop(server.Stop)
	temporalAddress = server.Address
	serverPIDs = []int{server.PID()}
	return nil
}

// useCluster points the benchmarks at the cluster recorded in dir, which
// must be running every service and serve plain gRPC (the benchmarks'
// clients and the siteops processes they start dial without TLS).
func useCluster(dir string) error {
	c, err := cluster.Attach(dir, "", nil)
	if err != nil {
		return fmt.Errorf("%w; start one with `go run ./internal/cluster/cmd/localcluster up --dir %s`", err, dir)
	}
	if running := c.Running(); len(running) != len(cluster.Services) {
		return fmt.Errorf("only %v of the cluster's services are running; restart it (localcluster down, then up)", running)
	}
	// The state file is package cluster's; the benchmarks read only what
	// Cluster does not export: whether it serves TLS and its processes.
	b, err := os.ReadFile(filepath.Join(c.Dir, "cluster.json"))
	if err != nil {
		return err
	}
	var st struct {
		TLS  json.RawMessage         `json:"tls"`
		PIDs map[cluster.Service]int `json:"pids"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("reading %s: %w", filepath.Join(c.Dir, "cluster.json"), err)
	}
	if len(st.TLS) > 0 && string(st.TLS) != "null" {
		return fmt.Errorf("the cluster serves TLS; the benchmarks dial without it: start one without TLS (localcluster up)")
	}
	pids := make([]int, 0, len(st.PIDs))
	for _, pid := range st.PIDs {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	temporalAddress = c.Address
	serverPIDs = pids
	return nil
}

// benchCount is the count in the environment variable env, def when it is
// unset: how many workers or relays a benchmark runs side by side.
func benchCount(b *testing.B, env string, def int) int {
	b.Helper()
	v := os.Getenv(env)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 8 {
		b.Fatalf("%s=%q: want a count from 1 to 8", env, v)
	}
	return n
}

// maxScenarioRuns bounds b.N for the benchmarks whose every iteration is a
// whole scenario (seconds to minutes): under -benchtime 5000x they would
// repeat it 5,000 times.
const maxScenarioRuns = 20

// scenario fails b at once when b.N asks for more runs of a whole scenario
// than anyone means to wait for, and says what to pass instead.
func scenario(b *testing.B) {
	b.Helper()
	if b.N > maxScenarioRuns {
		b.Fatalf("%s runs a whole scenario per iteration; -benchtime asked for %d of them: run it with -benchtime 1x (and -count N for more runs)", b.Name(), b.N)
	}
}

// siteopsWorker runs an SDK worker of every siteops workflow and activity,
// the activities over api and st, on queue of c, with extra registered
// beside them (a baseline's no-op workflow), and stops it when b ends.
// The benchmarks that time parts of the worker use it; the ones that time
// the worker as the binary runs it use testenv.Env.StartWorker.
func siteopsWorker(b *testing.B, c client.Client, queue string, api activities.API, st activities.Store, extra func(sdkworker.Worker)) {
	b.Helper()
	w := sdkworker.New(c, queue, sdkworker.Options{})
	worker.Register(w, activities.New(activities.Options{API: api, Store: st, Classes: workflows.ClassOf}))
	if extra != nil {
		extra(w)
	}
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.Stop)
}
