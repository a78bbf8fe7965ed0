package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/workflows"
)

func (e *env) cliEnv() []string {
	return append(os.Environ(), "TEMPORAL_ADDRESS="+e.Address, "TEMPORAL_NAMESPACE="+e.Namespace,
		"SITEOPS_TASK_QUEUE="+taskQueue, "SITEOPS_DATABASE_URL="+e.DBURL, "SITEOPS_OPERATOR=oncall-e2e",
		"SITEOPS_ALLOW_LOOPBACK_RECEIVERS=true") // the simulator's test mode: endpoints on loopback
}

// siteops runs the built binary against the test's namespace.
func (e *env) siteops(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return e.siteopsWith(t, nil, args...)
}

// siteopsWith runs the binary with extra environment variables.
func (e *env) siteopsWith(t *testing.T, extra []string, args ...string) (string, error) {
	t.Helper()
	// A command that waits (e.g. --wait) must not outlive its test's budget.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(e.cliEnv(), extra...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

func TestCLIPlaybooks(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)

	out, err := e.siteops(t, "onboard", "-f", "../examples/bayside-dental.json", "--wait", "-o", "json")
	if err != nil {
		t.Fatalf("onboard: %v\n%s", err, out)
	}
	var res workflows.OnboardingResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Status != "published" {
		t.Fatalf("onboard printed %s (%v)", out, err)
	}
	site := res.SiteID
	if out, err := e.siteops(t, "onboard", "-f", "../examples/bayside-dental.json"); err != nil || !strings.Contains(out, "already onboarded") || !strings.Contains(out, site) {
		t.Errorf("a second onboard of the same spec: %v\n%s", err, out)
	}

	if _, err := e.Sim.CreateLeads(site, 1234); err != nil {
		t.Fatal(err)
	}
	out, err = e.siteops(t, "leads", "sync", "--site", site, "--follow")
	if err != nil || !strings.Contains(out, "caught up: 1234 leads") {
		t.Fatalf("leads sync --follow: %v\n%s", err, out)
	}
	if n, _ := e.Store.CountLeads(t.Context(), site); n != 1234 {
		t.Errorf("store holds %d leads", n)
	}

	out, err = e.siteops(t, "embed", "off", "--site", site, "--reason", "widget shows on a phishing site")
	if err != nil || !strings.Contains(out, "is off") || !strings.Contains(out, "oncall-e2e") {
		t.Fatalf("embed off: %v\n%s", err, out)
	}
	out, err = e.siteops(t, "embed", "off", "--site", site, "--reason", "again")
	if err != nil || !strings.Contains(out, "already open") {
		t.Fatalf("second embed off: %v\n%s", err, out)
	}
	out, err = e.siteops(t, "embed", "on", "--site", site, "--origin", "https://baysidedental.example/")
	if err == nil || !strings.Contains(out, "allowed_origins") {
		t.Fatalf("embed on with a bad origin was not refused: %v\n%s", err, out)
	}
	out, err = e.siteops(t, "embed", "on", "--site", site, "--origin", "https://baysidedental.example")
	if err != nil || !strings.Contains(out, "back on") {
		t.Fatalf("embed on: %v\n%s", err, out)
	}
	if ps := patches(e); len(ps) != 3 { // onboarding's configure-agent, off, on
		t.Errorf("%d PATCHes, want 3", len(ps))
	}

	out, err = e.siteops(t, "status", "embed-incident/"+site)
	if err != nil || !strings.Contains(out, "Completed") || !strings.Contains(out, "restore by oncall-e2e") {
		t.Errorf("status: %v\n%s", err, out)
	}
	out, err = e.siteops(t, "status", "onboarding/bayside-dental", "-o", "json")
	if err != nil || !strings.Contains(out, `"step": "done"`) {
		t.Errorf("status -o json: %v\n%s", err, out)
	}
	if out, err := e.siteops(t, "status", "onboarding/nope"); err == nil || !strings.Contains(out, "no workflow with ID") {
		t.Errorf("status of an unknown workflow: %v\n%s", err, out)
	}
	if out, err := e.siteops(t, "embed", "on", "--site", "site_404"); err == nil || !strings.Contains(out, "no open embed incident") {
		t.Errorf("embed on without an incident: %v\n%s", err, out)
	}
}

// TestCLIWithoutTemporal runs a command where no Temporal listens: it
// retries until --timeout, then ends with exit 5 and one line (standard
// error is not a terminal: no notice of the retries) naming the address,
// the setting and the cause.
func TestCLIWithoutTemporal(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), binary, "status", "onboarding/x", "--timeout", "2s")
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS=127.0.0.1:1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 5 {
		t.Fatalf("unreachable Temporal: %v, want exit 5\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != 1 {
		t.Errorf("standard error has %d lines, want the error alone:\n%s", len(lines), stderr.String())
	}
	last := lines[len(lines)-1]
	for _, want := range []string{"siteops: Temporal at 127.0.0.1:1 (namespace default) is unavailable", "connecting failed", "connection refused", "TEMPORAL_ADDRESS"} {
		if !strings.Contains(last, want) {
			t.Errorf("the error lacks %q:\n%s", want, last)
		}
	}
	if stdout.String() != "" {
		t.Errorf("standard output: %q, want nothing", stdout.String())
	}
}

func TestCLIWebhooksIngressAndRotation(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	port, err := devserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	adminPort, err := devserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ingressURL := "http://127.0.0.1:" + strconv.Itoa(port)
	adminURL := "http://127.0.0.1:" + strconv.Itoa(adminPort)
	extra := []string{
		"SITEOPS_SECRET_KEY=" + base64.StdEncoding.EncodeToString(storetest.TestKey),
		"SITEOPS_INGRESS_ADDR=127.0.0.1:" + strconv.Itoa(port),
		"SITEOPS_INGRESS_ADMIN_ADDR=127.0.0.1:" + strconv.Itoa(adminPort),
		"AGENTSITE_BASE_URL=" + e.SimURL, "AGENTSITE_API_KEY=" + apiKey, "SITEOPS_ALLOW_LOOPBACK_RECEIVERS=true",
	}
	ing := exec.Command(binary, "ingress")
	ing.Env = append(e.cliEnv(), extra...)
	ingLog := &siteopstest.Log{}
	ing.Stdout, ing.Stderr = ingLog, ingLog
	ing.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := ing.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ing.Process.Signal(syscall.SIGTERM); _, _ = ing.Process.Wait() })
	siteopstest.Eventually(t, 20*time.Second, "the ingress to be ready", func() bool {
		resp, err := http.Get(adminURL + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == 200
	})

	out, err := e.siteopsWith(t, extra, "webhook", "create", "--url", ingressURL+"/webhooks/v1", "--events", "lead.created", "-o", "json")
	if err != nil {
		t.Fatalf("webhook create: %v\n%s", err, out)
	}
	var created struct {
		EndpointID  string `json:"endpoint_id"`
		Receiver    string `json:"receiver"`
		Fingerprint string `json:"fingerprint"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.Receiver != "v1" || len(created.Fingerprint) != 12 {
		t.Fatalf("webhook create printed %s", out)
	}
	if strings.Contains(out, "whsec_") {
		t.Fatal("webhook create printed the secret")
	}
	site := e.site(t, "cli-hooks")
	if _, err := e.Sim.CreateLeads(site, 5); err != nil {
		t.Fatal(err)
	}
	siteopstest.Eventually(t, 30*time.Second, "the ingress process to relay the leads", func() bool {
		n, _ := e.Store.CountLeads(t.Context(), site)
		return n == 5
	})
	out, err = e.siteopsWith(t, extra, "webhook", "list")
	if err != nil || !strings.Contains(out, created.EndpointID) || !strings.Contains(out, "succeeded") || strings.Contains(out, "whsec_") {
		t.Fatalf("webhook list: %v\n%s", err, out)
	}
	resp, err := http.Get(adminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, want := range []string{`siteops_webhook_deliveries_total{outcome="accepted",reason=""}`, `siteops_relay_dispatched_total{outcome="signalled",type="lead.created"}`, "siteops_relay_lag_seconds", "temporal_request"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("ingress /metrics lacks %s", want)
		}
	}
	checkMetrics(t, "ingress", string(metrics), map[string]string{
		"siteops_webhook_deliveries_total": "counter",
		"siteops_relay_dispatched_total":   "counter",
		"siteops_relay_lag_seconds":        "gauge",
		"siteops_relay_pending_events":     "gauge",
		"temporal_request_total":           "counter",
	})

	// Rotate while leads keep coming.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		// Until the rotation is over, bounded: 6,000 leads at most (a minute).
		for i := 0; i < 6000; i++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				_, _ = e.Sim.CreateLeads(site, 1)
			}
		}
	})
	out, err = e.siteopsWith(t, extra, "secret", "rotate", "--endpoint", created.EndpointID, "--url", ingressURL+"/webhooks/v2", "--wait", "--verify-timeout", "1m")
	close(stop)
	wg.Wait()
	if err != nil || !strings.Contains(out, "done") || !strings.Contains(out, "deleted") {
		st, _ := e.siteopsWith(t, extra, "status", "secret-rotation/"+created.EndpointID)
		t.Fatalf("secret rotate: %v\n%s\nthe rotation's status:\n%s\nthe ingress's log:\n%s", err, out, st, ingLog.String())
	}
	siteopstest.Eventually(t, 30*time.Second, "the store to hold every lead", func() bool {
		n, _ := e.Store.CountLeads(t.Context(), site)
		return n == len(e.Sim.LeadIDs(site))
	})
	for _, d := range e.Sim.Deliveries() {
		if d.Outcome != "succeeded" {
			t.Errorf("a delivery was refused during the rotation: %+v", d)
			break
		}
	}
	out, _ = e.siteopsWith(t, extra, "webhook", "list")
	if strings.Contains(out, created.EndpointID+" ") || !strings.Contains(out, "/webhooks/v2") {
		t.Errorf("after the rotation: %s", out)
	}
	if out, err := e.siteopsWith(t, extra, "secret", "proceed", "--endpoint", "we_404"); err == nil || !strings.Contains(out, "no rotation") {
		t.Errorf("deciding an unknown rotation: %v\n%s", err, out)
	}
	_ = e.Client.CancelWorkflow(t.Context(), workflows.LeadSyncID(site), "")
}

// TestCLIStatusWithoutAWorker asks for the status of workflows no worker
// serves any more (a kept history), and of one no worker ever ran: the
// status query needs a worker, so status says that none answered and on
// which task queue one should run, and still shows what Temporal keeps —
// the state and a completed run's result.
func TestCLIStatusWithoutAWorker(t *testing.T) {
	t.Parallel() // it mostly waits (main_test.go)
	e := newEnv(t, store.SQLite, simulator.Config{})
	w := e.startWorker(t)
	out, err := e.siteops(t, "onboard", "-f", "../examples/bayside-dental.json", "--wait", "-o", "json")
	_ = w.Stop() // an error fails the test at its end
	var res workflows.OnboardingResult
	if err != nil || json.Unmarshal([]byte(out), &res) != nil || res.SiteID == "" {
		t.Fatalf("onboard: %v\n%s", err, out)
	}
	// A lead sync started now runs, but no worker ever picks it up.
	if _, err := e.Starter.SyncLeads(t.Context(), "site_nobody", false); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		id   string
		want []string
	}{
		{"onboarding/bayside-dental", []string{"Completed", "result (from history): site " + res.SiteID + " is published"}},
		{workflows.LeadSyncID("site_nobody"), []string{"Running"}},
	} {
		t.Run(tc.id, func(t *testing.T) {
			out, code := e.run(t, nil, "status", tc.id)
			want := append([]string{"no status from the workflow: no worker answered the status query within", "is a siteops worker running on task queue " + taskQueue + "?"}, tc.want...)
			for _, w := range want {
				if code != 0 || !strings.Contains(out, w) {
					t.Errorf("status %s (exit %d) lacks %q:\n%s", tc.id, code, w, out)
				}
			}
			stdout, stderr, code := e.runSplit(t, nil, "", "status", tc.id, "-o", "json")
			var st struct {
				Status        string          `json:"status"`
				TaskQueue     string          `json:"task_queue"`
				Detail        json.RawMessage `json:"detail"`
				DetailMissing string          `json:"detail_missing"`
				Result        json.RawMessage `json:"result"`
			}
			if err := json.Unmarshal([]byte(stdout), &st); code != 0 || err != nil {
				t.Fatalf("status -o json: exit %d (%v)\n%s%s", code, err, stdout, stderr)
			}
			if st.TaskQueue != taskQueue || st.Detail != nil || !strings.Contains(st.DetailMissing, "no worker answered") {
				t.Errorf("status -o json: task_queue %q, detail %s, detail_missing %q; want %q, none and why\n%s", st.TaskQueue, st.Detail, st.DetailMissing, taskQueue, stdout)
			}
			if (st.Status == "Completed") != (st.Result != nil) {
				t.Errorf("status -o json of a %s run: result %s", st.Status, st.Result)
			}
		})
	}
}
