package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/telemetry/telemetrytest"
	"github.com/siteops/siteops/workflows"
)

// checkMetrics parses a process's /metrics text and checks it: every family
// of want there with its TYPE (the SDK's counters are counters, not
// gauges), no family named _total that is not a counter, no label value
// with a space. It logs the TYPE lines.
func checkMetrics(t *testing.T, who, text string, want map[string]string) {
	t.Helper()
	mfs := telemetrytest.Families(t, text)
	for name, typ := range want {
		if got := telemetrytest.Type(mfs, name); got != typ {
			t.Errorf("%s /metrics: TYPE %s = %q, want %s", who, name, got, typ)
		}
	}
	for _, p := range telemetrytest.Problems(mfs) {
		t.Errorf("%s /metrics: %s", who, p)
	}
	var types []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "# TYPE siteops_") || strings.HasPrefix(line, "# TYPE temporal_") {
			types = append(types, line)
		}
	}
	t.Logf("%s /metrics:\n%s", who, strings.Join(types, "\n"))
}

// TestWorkerMetrics runs the worker binary and reads its /metrics: the
// Temporal SDK's metrics and siteops' own, in Prometheus format.
func TestWorkerMetrics(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	port, err := devserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "worker")
	cmd.Env = append(e.cliEnv(), "AGENTSITE_BASE_URL="+e.SimURL, "AGENTSITE_API_KEY="+apiKey, "SITEOPS_METRICS_ADDR=127.0.0.1:"+strconv.Itoa(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _, _ = cmd.Process.Wait() })

	site := e.site(t, "metrics")
	if _, err := e.Sim.CreateLeads(site, 30); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Starter.SyncLeads(t.Context(), site, false); err != nil {
		t.Fatal(err)
	}
	siteopstest.Eventually(t, 30*time.Second, "the sync", func() bool {
		n, _ := e.Store.CountLeads(t.Context(), site)
		return n == 30
	})
	// The activity counts its page after the store has it, and the SDK
	// records the activity's latency once it returns: wait for them all.
	wants := []string{
		"siteops_leads_stored_total 30",
		"siteops_lead_pages_read_total 1",
		`siteops_agentsite_requests_total{method="GET",outcome="200",route="/api/v1/sites/{site_id}/leads"`,
		"siteops_agentsite_breaker_state 0",
		"temporal_activity_execution_latency",
		"temporal_workflow_task_execution_latency",
	}
	var body string
	siteopstest.EventuallyNil(t, 20*time.Second, "the worker's metrics", func() error {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/metrics")
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		body = string(b)
		var lacks []string
		for _, want := range wants {
			if !strings.Contains(body, want) {
				lacks = append(lacks, want)
			}
		}
		if len(lacks) > 0 {
			return fmt.Errorf("worker /metrics lacks %q", lacks)
		}
		return nil
	})
	checkMetrics(t, "worker", body, map[string]string{
		"temporal_request_total":                      "counter",
		"temporal_long_request_total":                 "counter",
		"temporal_activity_execution_latency_seconds": "histogram",
		"temporal_worker_task_slots_available":        "gauge",
		"siteops_leads_stored_total":                  "counter",
		"siteops_lead_pages_read_total":               "counter",
		"siteops_agentsite_requests_total":            "counter",
		"siteops_agentsite_breaker_state":             "gauge",
	})
	_ = e.Client.CancelWorkflow(t.Context(), workflows.LeadSyncID(site), "")
}
