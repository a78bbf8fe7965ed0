package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/ports"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// process is a siteops process of the built binary that the test watches.
type process struct {
	cmd    *exec.Cmd
	log    *siteopstest.Log
	exited chan struct{}
	err    error
}

// startProcess runs `siteops args...` with env until the test ends.
func startProcess(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	p := &process{log: &siteopstest.Log{}, exited: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(40 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// alive fails the test when the process has exited.
func (p *process) alive(t *testing.T, what string) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("%s exited (%v):\n%s", what, p.err, p.log.String())
	default:
	}
}

// readyz reads a process's /readyz: its status code and the checks.
func readyz(url string) (int, map[string]string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Checks []struct {
			Check  string `json:"check"`
			Status string `json:"status"`
		} `json:"checks"`
	}
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &body)
	states := map[string]string{}
	for _, c := range body.Checks {
		states[c.Check] = c.Status
	}
	return resp.StatusCode, states
}

// TestWorkerStartsThroughTransientAPIFaults starts `siteops worker` while
// the Agent-Site API answers 20 % 5xx and 10 % 429: it starts (degraded at
// worst, never exiting) and onboards; with a wrong API key it still
// refuses at once, naming the key.
func TestWorkerStartsThroughTransientAPIFaults(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{Faults: simulator.Faults{ErrorRate: 0.2, RateLimitRate: 0.1}})
	metrics, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	env := append(e.cliEnv(), "AGENTSITE_BASE_URL="+e.SimURL, "AGENTSITE_API_KEY="+apiKey, "SITEOPS_METRICS_ADDR=127.0.0.1:"+strconv.Itoa(metrics),
		"SITEOPS_SECRET_KEY="+testSecretKey(), "SITEOPS_WORKER_VERSIONING=false")
	w := startProcess(t, env, "worker")
	siteopstest.Eventually(t, 90*time.Second, "the worker to start through the faults", func() bool {
		w.alive(t, "the worker")
		return strings.Contains(w.log.String(), "worker started")
	})
	if code, checks := readyz("http://127.0.0.1:" + strconv.Itoa(metrics)); code != http.StatusOK || checks["agent-site api"] == "" {
		t.Errorf("/readyz = %d %v; want 200 with the agent-site api check's state", code, checks)
	}
	res := e.onboard(t, prepare(t, "../examples/acme-anvils.yaml", "faulty-start"), 3*time.Minute)
	if res.Status != "published" {
		t.Errorf("onboarding through the faults = %+v", res)
	}

	start := time.Now()
	wrong := startProcess(t, append(env[:len(env):len(env)], "AGENTSITE_API_KEY=svc_live_wrong", "SITEOPS_METRICS_ADDR="), "worker")
	select {
	case <-wrong.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("a worker with a wrong API key still runs after 30 s:\n%s", wrong.log.String())
	}
	var exit *exec.ExitError
	if !errors.As(wrong.err, &exit) || exit.ExitCode() != 4 || !strings.Contains(wrong.log.String(), "AGENTSITE_API_KEY") {
		t.Errorf("a wrong API key: %v after %s; want exit 4 naming AGENTSITE_API_KEY:\n%s", wrong.err, time.Since(start), wrong.log.String())
	}
}

// TestWorkerStartsThroughASlowTemporal starts `siteops worker` against a
// Temporal that passes its start-up checks and then, for 12 s, refuses
// the SDK worker's first calls and the secret reconciliation's schedule
// (DescribeNamespace and CreateSchedule answering Unavailable, as an
// overloaded frontend does, for longer than the SDK's own 10 s of
// retries): the worker does not exit; it says it tries again, /readyz
// answers 503 naming the check "polling" while it does, and once Temporal
// answers it polls, schedules the reconciliation and onboards.
func TestWorkerStartsThroughASlowTemporal(t *testing.T) {
	t.Parallel() // it mostly waits (main_test.go)
	e := newEnv(t, store.SQLite, simulator.Config{})
	const outage = 12 * time.Second
	var describes atomic.Int32
	var describeEnds, scheduleEnds atomic.Int64 // when each outage ends, in Unix nanoseconds
	refused := func(ends *atomic.Int64) bool {
		ends.CompareAndSwap(0, time.Now().Add(outage).UnixNano())
		return time.Now().UnixNano() <= ends.Load()
	}
	// The start-up check's DescribeNamespace passes; the outage starts
	// with the next one. The schedule's starts with the first create.
	p := startOutageProxy(t, e.Address, refuse, 0, func(method string) bool {
		switch {
		case strings.HasSuffix(method, "/DescribeNamespace"):
			return describes.Add(1) == 1 || !refused(&describeEnds)
		case strings.HasSuffix(method, "/CreateSchedule"):
			return !refused(&scheduleEnds)
		}
		return true
	})
	metrics, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	admin := "http://127.0.0.1:" + strconv.Itoa(metrics)
	env := append(e.cliEnv(), "TEMPORAL_ADDRESS="+p.addr, "AGENTSITE_BASE_URL="+e.SimURL, "AGENTSITE_API_KEY="+apiKey,
		"SITEOPS_METRICS_ADDR=127.0.0.1:"+strconv.Itoa(metrics), "SITEOPS_SECRET_KEY="+testSecretKey(), "SITEOPS_WORKER_VERSIONING=false")
	w := startProcess(t, env, "worker")
	sawPolling := false
	siteopstest.Eventually(t, 60*time.Second, "the worker to start once Temporal answers", func() bool {
		w.alive(t, "the worker")
		if code, checks := readyz(admin); code == http.StatusServiceUnavailable && checks["polling"] == "fail" {
			sawPolling = true
		}
		return strings.Contains(w.log.String(), "worker started")
	})
	log := w.log.String()
	if !strings.Contains(log, "the worker could not start polling; it tries again") {
		t.Errorf("the worker did not say it tries again:\n%s", log)
	}
	if !strings.Contains(log, "the worker's start went through after all; no longer degraded by it") {
		t.Errorf("the worker did not say it recovered:\n%s", log)
	}
	siteopstest.Eventually(t, 30*time.Second, "the secret reconciliation's schedule once Temporal answers", func() bool {
		_, err := e.Client.ScheduleClient().GetHandle(t.Context(), workflows.SecretReconcileScheduleID).Describe(t.Context())
		return err == nil
	})
	// The worker logs the schedule made once CreateSchedule's answer has
	// come back through the proxy, which may be after the server shows it.
	siteopstest.EventuallyNil(t, 10*time.Second, "the worker to say the schedule waits, then that it is made", func() error {
		if log := w.log.String(); !strings.Contains(log, "the secret reconciliation is not scheduled yet") || !strings.Contains(log, `check="secret reconcile schedule"`) {
			return fmt.Errorf("its log:\n%s", log)
		}
		return nil
	})
	if !sawPolling { // from the SDK's giving up (10 s) to the outage's end
		t.Error("/readyz never answered 503 naming the check polling while the worker retried")
	}
	if code, checks := readyz(admin); code != http.StatusOK || checks["polling"] != "ok" {
		t.Errorf("/readyz after the start = %d %v; want 200 with polling ok", code, checks)
	}
	res := e.onboard(t, prepare(t, "../examples/acme-anvils.yaml", "slow-temporal"), 2*time.Minute)
	if res.Status != "published" {
		t.Errorf("onboarding after a slow start = %+v", res)
	}
}

// TestProcessesWaitForALateTemporal starts `siteops worker` and `siteops
// ingress` 20 s before Temporal: neither exits, both say what they wait
// for (the worker on /readyz), the ingress accepts a delivery meanwhile,
// and once Temporal is up the worker onboards and the relay dispatches.
func TestProcessesWaitForALateTemporal(t *testing.T) {
	t.Parallel() // it mostly waits (main_test.go)
	e := newEnv(t, store.SQLite, simulator.Config{})
	port, err := devserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ps, err := ports.FreeN(3)
	if err != nil {
		t.Fatal(err)
	}
	address := "127.0.0.1:" + strconv.Itoa(port)
	const secret = "whsec_late_temporal" //nolint:gosec // made up for the test
	vars := append(e.cliEnv(), "TEMPORAL_ADDRESS="+address, "TEMPORAL_NAMESPACE=default", "AGENTSITE_BASE_URL="+e.SimURL, "AGENTSITE_API_KEY="+apiKey,
		"SITEOPS_SECRET_KEY="+testSecretKey(), "SITEOPS_WORKER_VERSIONING=false", "SITEOPS_WEBHOOK_SECRETS="+secret)
	metrics := "http://127.0.0.1:" + strconv.Itoa(ps[0])
	w := startProcess(t, append(vars[:len(vars):len(vars)], "SITEOPS_METRICS_ADDR=127.0.0.1:"+strconv.Itoa(ps[0])), "worker")
	ingressURL, admin := "http://127.0.0.1:"+strconv.Itoa(ps[1]), "http://127.0.0.1:"+strconv.Itoa(ps[2])
	in := startProcess(t, append(vars[:len(vars):len(vars)], "SITEOPS_INGRESS_ADDR=127.0.0.1:"+strconv.Itoa(ps[1]),
		"SITEOPS_INGRESS_ADMIN_ADDR=127.0.0.1:"+strconv.Itoa(ps[2])), "ingress")

	siteopstest.Eventually(t, 30*time.Second, "the worker to say it waits for Temporal on /readyz", func() bool {
		w.alive(t, "the worker")
		code, checks := readyz(metrics)
		return code == http.StatusServiceUnavailable && checks["temporal"] == "fail"
	})
	siteopstest.Eventually(t, 30*time.Second, "the ingress to be ready", func() bool {
		in.alive(t, "the ingress")
		code, _ := readyz(admin)
		return code == http.StatusOK
	})
	if code := deliver(t, ingressURL, "/webhooks", "evt_late_1", secret); code != http.StatusOK {
		t.Errorf("a delivery while Temporal is down = %d, want 200", code)
	}
	// Temporal comes up 20 s after them; both must still run then.
	select {
	case <-w.exited:
		t.Fatalf("the worker exited while Temporal was down (%v):\n%s", w.err, w.log.String())
	case <-in.exited:
		t.Fatalf("the ingress exited while Temporal was down (%v):\n%s", in.err, in.log.String())
	case <-time.After(20 * time.Second):
	}
	if !strings.Contains(w.log.String(), "Temporal does not answer; the worker waits for it") {
		t.Errorf("the worker's log does not say it waits for Temporal:\n%s", w.log.String())
	}
	testenv.DevServer(t, devserver.Options{Port: port})
	siteopstest.Eventually(t, 90*time.Second, "the worker to start once Temporal is up", func() bool {
		w.alive(t, "the worker")
		return strings.Contains(w.log.String(), "worker started")
	})
	c, err := client.Dial(client.Options{HostPort: address, Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	late := &env{&testenv.Env{Sim: e.Sim, SimURL: e.SimURL, APIKey: apiKey, Store: e.Store, DBURL: e.DBURL,
		Address: address, Namespace: "default", TaskQueue: taskQueue, Client: c,
		Starter: starter.New(starter.Options{Client: c, Texts: e.Store, TaskQueue: taskQueue, Namespace: "default"})}}
	if res := late.onboard(t, prepare(t, "../examples/acme-anvils.yaml", "late-temporal"), 2*time.Minute); res.Status != "published" {
		t.Errorf("onboarding once Temporal came up = %+v", res)
	}
	siteopstest.Eventually(t, 60*time.Second, "the relay to dispatch the delivery it accepted while Temporal was down", func() bool {
		in.alive(t, "the ingress")
		out, _, _ := e.Store.InboxOutcome(t.Context(), "evt_late_1")
		return out == store.OutcomeSignalled
	})
	_ = c.TerminateWorkflow(context.WithoutCancel(t.Context()), workflows.LeadSyncID("site_x"), "", "test over")
}
