package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/siteops/siteops/internal/ports"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// These tests run the built binary as on-call would, and check what it
// tells them: the outcome, the cause, and the exit code.

// TestFailuresEndWaitsAtOnce checks that a workflow that fails ends every
// wait on it at once, with its cause and the exit code of the cause.
func TestFailuresEndWaitsAtOnce(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)

	start := time.Now()
	out, code := e.run(t, nil, "embed", "off", "--site", "site_998", "--reason", "no such site")
	if code != 3 || !strings.Contains(out, "site_not_found") || !strings.Contains(out, "embed-incident/site_998") || time.Since(start) > 20*time.Second {
		t.Errorf("embed off for an unknown site: exit %d after %s\n%s", code, time.Since(start), out)
	}
	if strings.Contains(out, "(type:") || strings.Contains(out, "wrapError") || strings.Count(strings.TrimSpace(out), "\n") > 0 {
		t.Errorf("the error is not one clean line:\n%s", out)
	}

	start = time.Now()
	out, code = e.run(t, nil, "leads", "sync", "--site", "site_404", "--follow")
	if code != 3 || !strings.Contains(out, "lead-sync/site_404") || !strings.Contains(out, "site_not_found") || time.Since(start) > 20*time.Second {
		t.Errorf("leads sync --follow of an unknown site: exit %d after %s\n%s", code, time.Since(start), out)
	}

	out, code = e.run(t, nil, "status", "embed-incident/site_998")
	if code != 0 || !strings.Contains(out, "Failed") || !strings.Contains(out, "cause:") || !strings.Contains(out, "site_not_found") || !strings.Contains(out, "[NotFound]") {
		t.Errorf("status of the failed incident: exit %d\n%s", code, out)
	}
	var st struct {
		Failure struct {
			Type      string `json:"type"`
			Status    int    `json:"status"`
			RequestID string `json:"request_id"`
		} `json:"failure"`
	}
	jsonOut, code := e.run(t, nil, "status", "embed-incident/site_998", "-o", "json")
	if err := json.Unmarshal([]byte(jsonOut), &st); err != nil || code != 0 || st.Failure.Type != "NotFound" || st.Failure.Status != 404 || !strings.HasPrefix(st.Failure.RequestID, "req_") {
		t.Errorf("status -o json of the failed incident: exit %d, %v\n%s", code, err, jsonOut)
	}
}

// TestStatusOfEveryKind checks that status reports every kind of the
// catalogue: a rotation's step and, for a running workflow, the activity
// it waits on with its attempt and last failure.
func TestStatusOfEveryKind(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	out, code := e.run(t, nil, "secret", "rotate", "--endpoint", "we_404", "--url", "http://127.0.0.1:9/webhooks/v2")
	if code != 0 {
		t.Fatalf("secret rotate: exit %d\n%s", code, out)
	}
	eventually(t, 30*time.Second, "the rotation of an unknown endpoint to fail", func() bool {
		out, _ = e.run(t, nil, "status", "secret-rotation/we_404")
		return strings.Contains(out, "Failed")
	})
	if !strings.Contains(out, "step reading-old-endpoint") || !strings.Contains(out, "no webhook endpoint we_404") {
		t.Errorf("status of a failed rotation:\n%s", out)
	}

	// A running onboarding whose first call keeps failing: status shows the
	// activity, its attempt and the last failure.
	if err := e.sim.SetFaults(simulator.Faults{ErrorRate: 1, RetryAfter: simulator.Duration(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if out, code := e.run(t, nil, "onboard", "-f", "../examples/bayside-dental.json"); code != 0 {
		t.Fatalf("onboard: exit %d\n%s", code, out)
	}
	eventually(t, 30*time.Second, "a failed attempt of CreateSite", func() bool {
		out, _ = e.run(t, nil, "status", "onboarding/bayside-dental")
		return strings.Contains(out, "last failure:")
	})
	if !strings.Contains(out, "Running") || !strings.Contains(out, "waiting on activity CreateSite") || !strings.Contains(out, "step creating-site") {
		t.Errorf("status of a running onboarding:\n%s", out)
	}
	_ = e.client.TerminateWorkflow(t.Context(), "onboarding/bayside-dental", "", "test over")
}

// TestUsageErrorsAndVersion checks exit code 2 and suggestions for
// mistakes, --version, and JSON errors with -o json.
func TestUsageErrorsAndVersion(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"leads", "snyc"}, `did you mean sync`},
		{[]string{"embed", "of"}, `did you mean off`},
		{[]string{"embed"}, "needs a subcommand: close, off, on"},
		{[]string{"stauts"}, "did you mean status"},
		{[]string{"embed", "off", "--site", "s"}, `"reason" not set`},
		{[]string{"status"}, "accepts 1 arg"},
		{[]string{"onboard", "-f", "nope.yaml"}, "no such file"},
		{[]string{"leads", "sync", "--site", "s", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"status", "x", "-o", "yaml"}, `--output "yaml"`},
	} {
		out, code := e.run(t, nil, tc.args...)
		if code != 2 || !strings.Contains(out, tc.want) || strings.Count(strings.TrimSpace(out), "\n") > 0 {
			t.Errorf("siteops %v: exit %d, want 2 and one line with %q\n%s", tc.args, code, tc.want, out)
		}
	}
	out, code := e.run(t, nil, "--version")
	if code != 0 || !strings.HasPrefix(out, "siteops ") || !strings.Contains(out, "go1.") {
		t.Errorf("--version: exit %d\n%s", code, out)
	}
	stdout, stderr, code := e.runSplit(t, nil, "", "status", "onboarding/none", "-o", "json")
	var je struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(stderr), &je); err != nil || code != 3 || je.ExitCode != 3 || !strings.Contains(je.Error, "no workflow with ID") || stdout != "" {
		t.Errorf("-o json error: exit %d, %v\nstdout %q\nstderr %q", code, err, stdout, stderr)
	}
}

// TestInterruptedWaitLeavesTheWorkflowRunning sends Ctrl-C to a waiting
// onboard: it exits 130 and says the workflow goes on, and where to look.
func TestInterruptedWaitLeavesTheWorkflowRunning(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	// No worker: the onboarding waits for one.
	cmd := exec.Command(binary, "onboard", "-f", "../examples/bayside-dental.json", "--wait")
	cmd.Env = e.cliEnv()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the onboarding to start", func() bool {
		_, err := e.client.DescribeWorkflowExecution(t.Context(), "onboarding/bayside-dental", "")
		return err == nil
	})
	time.Sleep(200 * time.Millisecond) // into the wait
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	exit, _ := err.(*exec.ExitError)
	if exit == nil || exit.ExitCode() != 130 {
		t.Fatalf("after Ctrl-C: %v\n%s", err, out.String())
	}
	want := "stopped waiting; onboarding/bayside-dental continues — siteops status onboarding/bayside-dental"
	if !strings.Contains(out.String(), want) || strings.Contains(out.String(), "context canceled") {
		t.Errorf("after Ctrl-C:\n%s", out.String())
	}
	d, err := e.client.DescribeWorkflowExecution(t.Context(), "onboarding/bayside-dental", "")
	if err != nil || d.GetWorkflowExecutionInfo().GetStatus().String() != "Running" {
		t.Errorf("the onboarding after Ctrl-C: %v %v", d.GetWorkflowExecutionInfo().GetStatus(), err)
	}
	_ = e.client.TerminateWorkflow(t.Context(), "onboarding/bayside-dental", "", "test over")
}

// TestSpecsAndStandardInput checks spec errors with their lines, every
// problem at once, exit 2, and -f - .
func TestSpecsAndStandardInput(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	spec := "site:\n  title: X\n  slug: x\n  titel: typo\nagent:\n  embed_enabled: true\n  allowed_origins: [\"https://x.example/\"]\nfaqs:\n  - question: q\n"
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := e.run(t, nil, "onboard", "-f", path, "--dry-run")
	if code != 2 || !strings.Contains(out, path+":4:3: site.titel: unknown field \"titel\"; did you mean \"title\"?") {
		t.Errorf("an unknown field: exit %d\n%s", code, out)
	}
	syntax := filepath.Join(t.TempDir(), "syntax.yaml")
	if err := os.WriteFile(syntax, []byte("site:\n  title: [unclosed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := e.run(t, nil, "onboard", "-f", syntax, "--dry-run"); code != 2 || !strings.Contains(out, syntax+":") {
		t.Errorf("a syntax error: exit %d\n%s", code, out)
	}
	fixed := strings.Replace(spec, "  titel: typo\n", "", 1)
	stdout, stderr, code := e.runSplit(t, nil, fixed, "onboard", "-f", "-", "--dry-run", "-o", "json")
	var res struct {
		Valid    bool `json:"valid"`
		Problems []struct {
			Field string `json:"field"`
			Line  int    `json:"line"`
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 2 || res.Valid || len(res.Problems) < 4 {
		t.Fatalf("every problem of a spec on standard input: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	lines := map[string]int{}
	for _, p := range res.Problems {
		lines[p.Field] = p.Line
	}
	if lines["site.type"] != 2 || lines["agent.allowed_origins[0]"] != 6 || lines["faqs[0].answer"] != 8 {
		t.Errorf("problem lines = %v", lines)
	}
	good, err := os.ReadFile("../examples/bayside-dental.json")
	if err != nil {
		t.Fatal(err)
	}
	if out, _, code := e.runSplit(t, nil, string(good), "onboard", "-f", "-", "--dry-run"); code != 0 || !strings.Contains(out, "<stdin> is valid") {
		t.Errorf("a good spec on standard input: exit %d\n%s", code, out)
	}
}

// TestProgressIsPlainInAPipe checks that --follow writes plain lines, not
// carriage returns, when its output is not a terminal.
func TestProgressIsPlainInAPipe(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	site := e.site(t, "piped")
	if _, err := e.sim.CreateLeads(site, 3000); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := e.runSplit(t, nil, "", "leads", "sync", "--site", site, "--follow")
	if code != 0 || !strings.Contains(stdout, "caught up: 3000 leads stored") || strings.Contains(stderr+stdout, "\r") {
		t.Errorf("--follow in a pipe: exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
	_ = e.client.CancelWorkflow(t.Context(), workflows.LeadSyncID(site), "")
}

// TestDoctorAndStartUpChecks runs doctor in a good environment and in
// broken ones, and a worker that must refuse to start.
func TestDoctorAndStartUpChecks(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	api := []string{"AGENTSITE_BASE_URL=" + e.simURL, "AGENTSITE_API_KEY=" + apiKey, "SITEOPS_SECRET_KEY=" + testSecretKey(),
		"SITEOPS_METRICS_ADDR=127.0.0.1:0", "SITEOPS_INGRESS_ADDR=127.0.0.1:0"}
	out, code := e.run(t, api, "doctor")
	if code != 0 {
		t.Fatalf("doctor in a good environment: exit %d\n%s", code, out)
	}
	for _, check := range []string{"temporal", "search attributes", "agent-site api", "database", "secret key", "address SITEOPS_METRICS_ADDR", "address SITEOPS_INGRESS_ADDR"} {
		if !strings.Contains(out, "ok    "+check) {
			t.Errorf("doctor does not pass %q:\n%s", check, out)
		}
	}

	// A wrong API key: doctor exits 4; the worker refuses to start, unless
	// told to start anyway.
	wrong := slices.Concat(api, []string{"AGENTSITE_API_KEY=svc_live_wrong"})
	if out, code := e.run(t, wrong, "doctor"); code != 4 || !strings.Contains(out, "fail  agent-site api") || strings.Contains(out, "svc_live_wrong") {
		t.Errorf("doctor with a wrong key: exit %d\n%s", code, out)
	}
	if out, code := e.run(t, append(wrong, "SITEOPS_METRICS_ADDR="), "worker"); code != 4 || !strings.Contains(out, "the worker does not start: agent-site api check failed") {
		t.Errorf("worker with a wrong key: exit %d\n%s", code, out)
	}

	// A namespace without siteops' search attributes.
	bare := "e2e-bare-" + strings.ReplaceAll(e.ns, "e2e-", "")
	if _, err := e.client.WorkflowService().RegisterNamespace(t.Context(), &workflowservice.RegisterNamespaceRequest{
		Namespace: bare, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the new namespace", func() bool {
		_, code := e.run(t, nil, "status", "x/y", "--namespace", bare)
		return code == 3
	})
	if out, code := e.run(t, api, "doctor", "--namespace", bare); code == 0 || !strings.Contains(out, "fail  search attributes") || !strings.Contains(out, "SiteopsSiteID") {
		t.Errorf("doctor without the search attributes: exit %d\n%s", code, out)
	}

	// A busy metrics port stops the worker at once.
	port, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	busy := "127.0.0.1:" + itoa(port)
	ln, err := listen(busy)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	if out, code := e.run(t, append(api, "SITEOPS_METRICS_ADDR="+busy), "worker"); code != 2 || !strings.Contains(out, "SITEOPS_METRICS_ADDR="+busy) {
		t.Errorf("worker on a busy metrics port: exit %d\n%s", code, out)
	}
	if out, code := e.run(t, append(api, "SITEOPS_METRICS_ADDR="+busy), "doctor"); code == 0 || !strings.Contains(out, "fail  address SITEOPS_METRICS_ADDR") {
		t.Errorf("doctor with a busy metrics port: exit %d\n%s", code, out)
	}
}
