package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
)

// BenchmarkWorkerMemory starts 10,000 lead syncs, each of which syncs its
// (empty) site once and then idles waiting for lead.created, on a real
// `siteops worker` process, and reports the process's resident memory once
// they are all idle: with the default sticky cache (2,000 workflows) and
// with one large enough to keep them all (10,000). The difference divided
// by 8,000 is what a cached idle workflow costs. One run per size; use
// -benchtime 1x.
func BenchmarkWorkerMemory(b *testing.B) {
	const workflows = 10_000
	bin, err := siteopstest.Build(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	// One simulator for every run: it numbers sites from site_1, and each
	// run needs sites (and so lead-sync workflow ids) of its own.
	const apiKey = "svc_live_bench"
	sim, simURL := testenv.Simulator(b, simulator.Config{Keys: map[string][]string{apiKey: {simulator.ScopeAll}}, Seed: 5})
	for _, cache := range []int{2000, 10_000} {
		b.Run(fmt.Sprintf("cache=%d", cache), func(b *testing.B) {
			scenario(b)
			for range b.N {
				rss, hwm := idleWorkerRSS(b, bin, sim, simURL, apiKey, cache, workflows)
				b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
				b.ReportMetric(float64(hwm)/(1<<20), "peak-rss-MiB")
			}
		})
	}
}

func idleWorkerRSS(b *testing.B, bin string, sim *simulator.Simulator, simURL, apiKey string, cache, n int) (rss, hwm int64) {
	b.Helper()
	before := sim.RequestStats().Requests // the earlier runs'
	api, err := agentsite.NewClient(simURL, apiKey)
	if err != nil {
		b.Fatal(err)
	}
	queue := fmt.Sprintf("siteops-mem-%d-%d", cache, time.Now().UnixNano())
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	sites := make([]string, n)
	parallel(b, n, 32, func(i int) error {
		slug := fmt.Sprintf("m%s-%d", run, i)
		cs, err := api.CreateSite(b.Context(), "mem-"+slug, agentsite.NewSite{Title: slug, Slug: slug, Type: "business", Template: "minimal"})
		if err == nil {
			sites[i] = cs.Site.ID
		}
		return err
	})

	cmd := exec.Command(bin, "worker", "--skip-checks")
	cmd.Env = append(os.Environ(),
		"TEMPORAL_ADDRESS="+temporalAddress, "TEMPORAL_NAMESPACE=default", "SITEOPS_TASK_QUEUE="+queue,
		"AGENTSITE_BASE_URL="+simURL, "AGENTSITE_API_KEY="+apiKey,
		"SITEOPS_DATABASE_URL=sqlite://"+filepath.Join(b.TempDir(), "mem.db"),
		"SITEOPS_METRICS_ADDR=", "SITEOPS_WORKER_VERSIONING=false", "SITEOPS_LOG_LEVEL=warn",
		"SITEOPS_WORKFLOW_CACHE_SIZE="+strconv.Itoa(cache))
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()

	st := starter.New(starter.Options{Client: dial(b), Namespace: "default", TaskQueue: queue})
	b.ResetTimer()
	parallel(b, n, 32, func(i int) error {
		_, err := st.SyncLeads(b.Context(), sites[i], false)
		return err
	})
	// Idle: every sync has listed its site's leads once (the site's
	// creation was one request, its first sync at least one more) and
	// waits for lead.created or its poll timer (5 minutes). The worker
	// then holds the workflows its cache keeps; the rest are evicted and
	// replay on their next task.
	deadline := time.Now().Add(10 * time.Minute)
	for sim.RequestStats().Requests < before+2*n {
		if time.Now().After(deadline) {
			b.Fatalf("the lead syncs did not all sync in 10 minutes (%d API requests); worker log:\n%s", sim.RequestStats().Requests-before, logs.String())
		}
		time.Sleep(time.Second)
	}
	time.Sleep(10 * time.Second)
	b.StopTimer()
	return procStatus(b, cmd.Process.Pid, "VmRSS"), procStatus(b, cmd.Process.Pid, "VmHWM")
}

// parallel runs f(0..n-1) on workers goroutines and fails b on the first
// error.
func parallel(b *testing.B, n, workers int, f func(i int) error) {
	b.Helper()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}

// procStatus reads a memory field (in kB) of /proc/PID/status, in bytes.
func procStatus(b *testing.B, pid int, field string) int64 {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
