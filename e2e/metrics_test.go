package e2e

import (
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// TestWorkerMetrics runs the worker binary and reads its /metrics: the
// Temporal SDK's metrics and siteops' own, in Prometheus format.
func TestWorkerMetrics(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	port, err := devserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "worker")
	cmd.Env = append(e.cliEnv(), "AGENTSITE_BASE_URL="+e.simURL, "AGENTSITE_API_KEY="+apiKey, "SITEOPS_METRICS_ADDR=127.0.0.1:"+strconv.Itoa(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _, _ = cmd.Process.Wait() })

	site := e.site(t, "metrics")
	if _, err := e.sim.CreateLeads(site, 30); err != nil {
		t.Fatal(err)
	}
	if _, err := e.starter.SyncLeads(t.Context(), site, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the sync", func() bool {
		n, _ := e.store.CountLeads(t.Context(), site)
		return n == 30
	})
	var body string
	eventually(t, 20*time.Second, "the worker's metrics", func() bool {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		body = string(b)
		return strings.Contains(body, "siteops_leads_synced_total")
	})
	for _, want := range []string{
		"siteops_leads_synced_total 30",
		`siteops_agentsite_requests_total{method="GET",outcome="200",route="/api/v1/sites/{site_id}/leads"`,
		"siteops_agentsite_breaker_state 0",
		"temporal_activity_execution_latency",
		"temporal_workflow_task_execution_latency",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("worker /metrics lacks %q", want)
		}
	}
	_ = e.client.CancelWorkflow(t.Context(), workflows.LeadSyncID(site), "")
}
