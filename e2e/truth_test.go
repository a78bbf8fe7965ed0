package e2e

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/internal/ports"
	"github.com/siteops/siteops/internal/siteopstest"
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

// TestStatusOfEveryKind checks that status reports the kinds of the
// catalogue: a rotation's step; for a running workflow, the activity it
// waits on with its attempt and last failure; a lead sync's progress; an
// endpoint registration's endpoint and receiver. (The incident's status is
// checked in the CLI tests, the reconciliation's in
// TestDeletedEndpointSecretRefusedWithinOneReconcilePeriod.)
func TestStatusOfEveryKind(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	out, code := e.run(t, nil, "secret", "rotate", "--endpoint", "we_404", "--url", "http://127.0.0.1:9/webhooks/v2")
	if code != 0 {
		t.Fatalf("secret rotate: exit %d\n%s", code, out)
	}
	siteopstest.Eventually(t, 30*time.Second, "the rotation of an unknown endpoint to fail", func() bool {
		out, _ = e.run(t, nil, "status", "secret-rotation/we_404")
		return strings.Contains(out, "Failed")
	})
	if !strings.Contains(out, "step reading-old-endpoint") || !strings.Contains(out, "no webhook endpoint we_404") {
		t.Errorf("status of a failed rotation:\n%s", out)
	}

	// A running onboarding whose first call keeps failing: status shows the
	// activity, its attempt and the last failure.
	if err := e.Sim.SetFaults(simulator.Faults{ErrorRate: 1, RetryAfter: simulator.Duration(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if out, code := e.run(t, nil, "onboard", "-f", "../examples/bayside-dental.json"); code != 0 {
		t.Fatalf("onboard: exit %d\n%s", code, out)
	}
	siteopstest.Eventually(t, 30*time.Second, "a failed attempt of CreateSite", func() bool {
		out, _ = e.run(t, nil, "status", "onboarding/bayside-dental")
		return strings.Contains(out, "last failure:")
	})
	if !strings.Contains(out, "Running") || !strings.Contains(out, "waiting on activity CreateSite") || !strings.Contains(out, "step creating-site") {
		t.Errorf("status of a running onboarding:\n%s", out)
	}
	_ = e.Client.TerminateWorkflow(t.Context(), "onboarding/bayside-dental", "", "test over")
	if err := e.Sim.SetFaults(simulator.Faults{}); err != nil {
		t.Fatal(err)
	}

	// A lead sync: its progress line.
	site := e.site(t, "status-leads")
	if _, err := e.Sim.CreateLeads(site, 30); err != nil {
		t.Fatal(err)
	}
	if out, code := e.run(t, nil, "leads", "sync", "--site", site, "--timeout", "1m"); code != 0 {
		t.Fatalf("leads sync: exit %d\n%s", code, out)
	}
	// leads sync returns once the sync is asked for; status shows it
	// syncing, then caught up.
	siteopstest.Eventually(t, 30*time.Second, "the lead sync to catch up", func() bool {
		out, code = e.run(t, nil, "status", workflows.LeadSyncID(site))
		return code != 0 || strings.Contains(out, "caught up")
	})
	if code != 0 || !strings.Contains(out, "Running") || !strings.Contains(out, "30 leads stored") || !strings.Contains(out, "caught up") {
		t.Errorf("status of a lead sync: exit %d\n%s", code, out)
	}
	_ = e.Client.CancelWorkflow(t.Context(), workflows.LeadSyncID(site), "")

	// An endpoint registration: its step, endpoint and fingerprint.
	const hookURL = "http://127.0.0.1:9/webhooks/status"
	out, code = e.run(t, []string{"SITEOPS_SECRET_KEY=" + testSecretKey()}, "webhook", "create", "--url", hookURL, "--events", "lead.created", "-o", "json", "--timeout", "1m")
	if code != 0 {
		t.Fatalf("webhook create: exit %d\n%s", code, out)
	}
	var created struct {
		EndpointID string `json:"endpoint_id"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.EndpointID == "" {
		t.Fatalf("webhook create -o json: %v\n%s", err, out)
	}
	out, code = e.run(t, nil, "status", workflows.EndpointRegistrationID(hookURL, []string{"lead.created"}, "status", ""))
	if code != 0 || !strings.Contains(out, "Completed") || !strings.Contains(out, "endpoint "+created.EndpointID) || !strings.Contains(out, "receiver status") {
		t.Errorf("status of an endpoint registration: exit %d\n%s", code, out)
	}
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
		{[]string{"embed"}, "needs a subcommand: close, list, off, on"},
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
	// No worker: the onboarding waits for one. The command reaches
	// Temporal through a proxy that shows when it waits: once it asks for
	// the run's history after its start.
	proxy := startPlainProxy(t, e.Address)
	cmd := exec.Command(binary, "onboard", "-f", "../examples/bayside-dental.json", "--wait")
	cmd.Env = append(e.cliEnv(), "TEMPORAL_ADDRESS="+proxy.addr)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	siteopstest.Eventually(t, 30*time.Second, "the command to wait for the onboarding it started (GetWorkflowExecutionHistory after StartWorkflowExecution)", func() bool {
		return proxy.calledAfter("StartWorkflowExecution", "GetWorkflowExecutionHistory")
	})
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 130 {
		t.Fatalf("after Ctrl-C: %v\n%s", err, out.String())
	}
	want := "stopped waiting; onboarding/bayside-dental continues — siteops status onboarding/bayside-dental"
	if !strings.Contains(out.String(), want) || strings.Contains(out.String(), "context canceled") {
		t.Errorf("after Ctrl-C:\n%s", out.String())
	}
	d, err := e.Client.DescribeWorkflow(t.Context(), "onboarding/bayside-dental", "")
	if err != nil {
		t.Errorf("the onboarding after Ctrl-C: %v", err)
	} else if st := d.RawResponse.GetWorkflowExecutionInfo().GetStatus(); st.String() != "Running" {
		t.Errorf("the onboarding after Ctrl-C: %v", st)
	}
	_ = e.Client.TerminateWorkflow(t.Context(), "onboarding/bayside-dental", "", "test over")
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
	// The list opened at line 2, column 10 is never closed: the error
	// points there, with line and column.
	if out, code := e.run(t, nil, "onboard", "-f", syntax, "--dry-run"); code != 2 || !strings.Contains(out, syntax+":2:10: (syntax): did not find expected ',' or ']'") {
		t.Errorf("a syntax error: exit %d, want 2 at %s:2:10\n%s", code, syntax, out)
	}
	jsonSyntax := filepath.Join(t.TempDir(), "syntax.json")
	if err := os.WriteFile(jsonSyntax, []byte("{\n  \"site\": {\"title\" \"X\"}\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := e.run(t, nil, "onboard", "-f", jsonSyntax, "--dry-run"); code != 2 || !strings.Contains(out, jsonSyntax+":2:20: (syntax)") {
		t.Errorf("a JSON syntax error: exit %d, want 2 at %s:2:20\n%s", code, jsonSyntax, out)
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
	if _, err := e.Sim.CreateLeads(site, 3000); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := e.runSplit(t, nil, "", "leads", "sync", "--site", site, "--follow")
	if code != 0 || !strings.Contains(stdout, "caught up: 3000 leads stored") || strings.Contains(stderr+stdout, "\r") {
		t.Errorf("--follow in a pipe: exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
	_ = e.Client.CancelWorkflow(t.Context(), workflows.LeadSyncID(site), "")
}

// TestDoctorAndStartUpChecks runs doctor in a good environment and in
// broken ones, and a worker that must refuse to start.
func TestDoctorAndStartUpChecks(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	api := []string{"AGENTSITE_BASE_URL=" + e.SimURL, "AGENTSITE_API_KEY=" + apiKey, "SITEOPS_SECRET_KEY=" + testSecretKey(),
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
	bare := "e2e-bare-" + strings.ReplaceAll(e.Namespace, "e2e-", "")
	if _, err := e.Client.WorkflowService().RegisterNamespace(t.Context(), &workflowservice.RegisterNamespaceRequest{
		Namespace: bare, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	siteopstest.Eventually(t, 30*time.Second, "the new namespace", func() bool {
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

// TestFollowEndsWhateverTheSyncDid follows a site's lead sync after the
// previous one was terminated — the new run starts its counters at zero,
// below what the terminated one reached, and the follow must still end
// when it has caught up — and then a follow whose sync is terminated under
// it, which ends at once with exit 1 and the cause.
func TestFollowEndsWhateverTheSyncDid(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	site := e.site(t, "followed")
	if _, err := e.Sim.CreateLeads(site, 40); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if out, code := e.run(t, nil, "leads", "sync", "--site", site, "--follow", "--timeout", "1m"); code != 0 || !strings.Contains(out, "caught up:") {
			t.Fatalf("follow %d: exit %d\n%s", i+1, code, out)
		}
	}
	id := workflows.LeadSyncID(site)
	if err := e.Client.TerminateWorkflow(t.Context(), id, "", "on-call stopped it"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, code := e.run(t, nil, "leads", "sync", "--site", site, "--follow", "--timeout", "1m")
	if code != 0 || !strings.Contains(out, "caught up:") || time.Since(start) > 30*time.Second {
		t.Errorf("follow after the sync was terminated: exit %d after %s, want 0 and caught up at once\n%s", code, time.Since(start), out)
	}

	// Every call to the API now fails: the sync the follow asks for retries
	// and never catches up, until on-call terminates it.
	if err := e.Sim.SetFaults(simulator.Faults{ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		out  string
		code int
	}
	done := make(chan result, 1)
	go func() {
		cmd := exec.CommandContext(t.Context(), binary, "leads", "sync", "--site", site, "--follow", "--timeout", "2m")
		cmd.Env = e.cliEnv()
		out, err := cmd.CombinedOutput()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		}
		done <- result{string(out), code}
	}()
	siteopstest.Eventually(t, 30*time.Second, "the requested sync to fail and retry", func() bool {
		d, err := e.Client.DescribeWorkflow(t.Context(), id, "")
		if err != nil {
			return false
		}
		for _, pa := range d.RawResponse.GetPendingActivities() {
			if pa.GetAttempt() >= 2 {
				return true
			}
		}
		return false
	})
	if err := e.Client.TerminateWorkflow(t.Context(), id, "", "on-call stopped it again"); err != nil {
		t.Fatal(err)
	}
	terminated := time.Now()
	select {
	case r := <-done:
		// Progress comes first, as plain lines in a pipe; the error is the
		// last line.
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		if last := lines[len(lines)-1]; r.code != 1 || !strings.Contains(last, id+" terminated") || !strings.Contains(last, "[Terminated]") {
			t.Errorf("follow of a sync terminated under it: exit %d, want 1 and a last line naming the termination\n%s", r.code, r.out)
		}
		if took := time.Since(terminated); took > 10*time.Second {
			t.Errorf("the follow ended %s after the termination, want at once", took)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the follow did not end within 30 s of its sync's termination")
	}
}

// TestCLITellsTheOutcome checks, through the binary and without a worker,
// that an expired --timeout exits 1 and says the workflow goes on, that a
// different spec for an onboarded slug exits 2 naming the difference, and
// that --namespace wins over TEMPORAL_NAMESPACE.
func TestCLITellsTheOutcome(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	// No worker: the onboarding starts and waits for one. The wait ends at
	// --timeout with exit 1; twice it ended with exit 5 ("no answer within"
	// the timeout): the SDK's call, under a context of its own with the
	// same deadline, ended a moment before the command's context said so
	// (starter.IsUnavailable now counts a passed deadline as the caller's).
	// --timeout also bounds the start, so a loaded machine gets 5 s.
	start := time.Now()
	out, code := e.run(t, nil, "onboard", "-f", "../examples/bayside-dental.json", "--wait", "--timeout", "5s")
	want := "stopped waiting after 5s (--timeout); onboarding/bayside-dental continues — siteops status onboarding/bayside-dental"
	if code != 1 || !strings.Contains(out, want) || time.Since(start) > 30*time.Second {
		t.Errorf("onboard --wait --timeout 5s: exit %d after %s, want 1 and %q\n%s", code, time.Since(start), want, out)
	}

	spec, err := os.ReadFile("../examples/bayside-dental.json")
	if err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(t.TempDir(), "bayside-dental.json")
	if err := os.WriteFile(changed, []byte(strings.Replace(string(spec), `"title": "Bayside Dental"`, `"title": "Bayside Dental Care"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = e.run(t, nil, "onboard", "-f", changed)
	if code != 2 || !strings.Contains(out, "different spec") || !strings.Contains(out, "site.title") {
		t.Errorf("a different spec for the same slug: exit %d, want 2 naming site.title\n%s", code, out)
	}

	elsewhere := []string{"TEMPORAL_NAMESPACE=e2e-no-such-namespace"}
	if out, code := e.run(t, elsewhere, "status", "onboarding/bayside-dental"); code == 0 {
		t.Errorf("status in a namespace that does not exist: exit 0\n%s", out)
	}
	out, code = e.run(t, elsewhere, "status", "onboarding/bayside-dental", "--namespace", e.Namespace)
	if code != 0 || !strings.Contains(out, "Running") {
		t.Errorf("--namespace over TEMPORAL_NAMESPACE: exit %d, want 0 and the running onboarding\n%s", code, out)
	}
	_ = e.Client.TerminateWorkflow(t.Context(), "onboarding/bayside-dental", "", "test over")
}

// TestSignatureVerifyWithStoredSecrets checks `signature verify --receiver
// NAME` against the secrets stored for that receiver: valid with the key,
// a mismatch exits 1, a receiver without secrets 3, and no
// SITEOPS_SECRET_KEY 2 with what is missing for reading them.
func TestSignatureVerifyWithStoredSecrets(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	const secret = "whsec_stored_for_v1" //nolint:gosec // made up for the test
	if err := e.Store.PutSecret(t.Context(), "we_v1", "v1", agentsite.NewSigningSecret(secret)); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"evt_sig_1","type":"lead.created","created_at":"2026-11-22T09:00:00.000Z","data":{"site_id":"site_1","lead_id":"lead_1"}}`)
	path := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	header := webhook.Sign(secret, time.Now(), body)
	withKey := []string{"SITEOPS_SECRET_KEY=" + testSecretKey()}

	out, code := e.run(t, withKey, "signature", "verify", "--receiver", "v1", "--body", path, "--header", header)
	if code != 0 || !strings.Contains(out, "valid: signed with secret 1 of 1") || !strings.Contains(out, "endpoint we_v1") || strings.Contains(out, secret) {
		t.Errorf("verify --receiver v1: exit %d\n%s", code, out)
	}
	forged := webhook.Sign("whsec_someone_else", time.Now(), body)
	if out, code := e.run(t, withKey, "signature", "verify", "--receiver", "v1", "--body", path, "--header", forged); code != 1 || !strings.Contains(out, "stored for receiver v1") {
		t.Errorf("verify a signature of another secret: exit %d, want 1\n%s", code, out)
	}
	if out, code := e.run(t, withKey, "signature", "verify", "--receiver", "default", "--body", path, "--header", header); code != 3 || !strings.Contains(out, "no active secret is stored for receiver default") {
		t.Errorf("verify --receiver default without secrets: exit %d, want 3\n%s", code, out)
	}
	out, code = e.run(t, []string{"SITEOPS_SECRET_KEY="}, "signature", "verify", "--receiver", "v1", "--body", path, "--header", header)
	if code != 2 || !strings.Contains(out, "SITEOPS_SECRET_KEY is not set") || !strings.Contains(out, "receiver v1") || strings.Contains(out, "cannot be stored") {
		t.Errorf("verify --receiver without SITEOPS_SECRET_KEY: exit %d, want 2 saying what reading needs\n%s", code, out)
	}
}

// TestProcessLogsAndStartUp checks the worker's log settings and start-up
// line through the binary: where the default store is, said before
// anything can fail; SITEOPS_LOG_LEVEL; SITEOPS_LOG_FORMAT=json with one
// JSON object per line and snake_case keys.
func TestProcessLogsAndStartUp(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	api := []string{"AGENTSITE_BASE_URL=" + e.SimURL, "AGENTSITE_API_KEY=" + apiKey, "SITEOPS_METRICS_ADDR="}

	// The default store, with Temporal unreachable: the start-up line says
	// where the store is before the worker says it waits for Temporal.
	state := t.TempDir()
	defaultStore := []string{"SITEOPS_DATABASE_URL=", "XDG_STATE_HOME=" + state}
	// doctor changes nothing: the default store that no worker made yet
	// fails its check with the fix, and is not created by the look.
	out, code := e.run(t, defaultStore, "doctor")
	if code != 3 || !strings.Contains(out, "fail  database") || !strings.Contains(out, "no siteops database at sqlite://"+filepath.Join(state, "siteops", "siteops.db")) ||
		!strings.Contains(out, "start the worker") {
		t.Errorf("doctor before any worker: exit %d, want 3 and the missing database with its fix\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(state, "siteops")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("doctor created the store's directory (%v)", err)
	}
	// Temporal not answering is transient (issue 21): the worker does not
	// exit, it says that it waits, and stops when told to.
	unreachable := slices.Concat(api, defaultStore, []string{"TEMPORAL_ADDRESS=127.0.0.1:1"})
	const waits = "Temporal does not answer; the worker waits for it"
	waiting := func(extra ...string) string {
		t.Helper()
		p := startProcess(t, append(append(e.cliEnv(), unreachable...), extra...), "worker")
		siteopstest.Eventually(t, 30*time.Second, "the worker to say it waits for Temporal", func() bool { return strings.Contains(p.log.String(), waits) })
		p.alive(t, "the worker waiting for Temporal")
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			t.Errorf("the worker waiting for Temporal did not stop within 20 s of SIGTERM:\n%s", p.log.String())
		}
		return p.log.String()
	}
	out = waiting()
	wantStore := "store=sqlite://" + filepath.Join(state, "siteops", "siteops.db")
	if !strings.Contains(out, `msg="worker starting"`) || !strings.Contains(out, wantStore) {
		t.Errorf("worker with the default store and no Temporal: want %q\n%s", wantStore, out)
	}
	if i, j := strings.Index(out, "worker starting"), strings.Index(out, "cannot reach Temporal"); i < 0 || j < i {
		t.Errorf("the start-up line does not come before the wait:\n%s", out)
	}
	// The worker migrated the store before it dialled: doctor finds it ready.
	if out, _ := e.run(t, defaultStore, "doctor"); !strings.Contains(out, "ok    database") {
		t.Errorf("doctor after the worker migrated the default store:\n%s", out)
	}
	if out := waiting("SITEOPS_LOG_LEVEL=warn"); strings.Contains(out, "worker starting") || !strings.Contains(out, "cannot reach Temporal") {
		t.Errorf("worker with SITEOPS_LOG_LEVEL=warn: want no info line\n%s", out)
	}
	if out, code := e.run(t, append(unreachable, "SITEOPS_LOG_FORMAT=xml"), "worker"); code != 2 || !strings.Contains(out, "SITEOPS_LOG_FORMAT") {
		t.Errorf("worker with SITEOPS_LOG_FORMAT=xml: exit %d, want 2\n%s", code, out)
	}

	// JSON logs of a worker that runs: every line one object, every key
	// snake_case, the SDK's own lines too.
	log := &siteopstest.Log{}
	cmd := exec.Command(binary, "worker")
	cmd.Env = append(e.cliEnv(), append(api, "SITEOPS_LOG_FORMAT=json", "SITEOPS_LOG_LEVEL=info", "SITEOPS_WORKER_VERSIONING=false")...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	siteopstest.Eventually(t, 30*time.Second, "the worker to start", func() bool { return strings.Contains(log.String(), `"msg":"worker started"`) })
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_, _ = cmd.Process.Wait()
	snake := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	levels := map[string]bool{}
	for line := range strings.SplitSeq(strings.TrimSpace(log.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("a log line is not JSON: %q", line)
			continue
		}
		for k := range rec {
			if !snake.MatchString(k) {
				t.Errorf("log key %q is not snake_case: %s", k, line)
			}
		}
		level, _ := rec["level"].(string)
		levels[level] = true
	}
	if !levels["INFO"] || !levels["WARN"] {
		t.Errorf("levels logged: %v, want INFO and WARN (Worker Versioning is off)", levels)
	}
}

// TestIngressStartUpChecks checks that the ingress refuses to start beside
// a stored secret that SITEOPS_SECRET_KEY cannot decrypt (exit 4), starts
// anyway with --skip-checks saying so loudly, and starts while Temporal is
// down, which only warns.
func TestIngressStartUpChecks(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	if err := e.Store.PutSecret(t.Context(), "we_old", "", agentsite.NewSigningSecret("whsec_under_the_old_key")); err != nil {
		t.Fatal(err)
	}
	otherKey := []string{"SITEOPS_SECRET_KEY=" + base64.StdEncoding.EncodeToString([]byte("another-siteops-secret-key-32byt")),
		"SITEOPS_INGRESS_ADDR=127.0.0.1:0", "SITEOPS_INGRESS_ADMIN_ADDR="}
	out, code := e.run(t, otherKey, "ingress")
	if code != 4 || !strings.Contains(out, "the ingress does not start: secret key check failed") || !strings.Contains(out, "we_old (receiver default)") || !strings.Contains(out, "--skip-checks") {
		t.Errorf("ingress beside a secret it cannot decrypt: exit %d, want 4 and the refusal\n%s", code, out)
	}

	// Its admin address may answer ready before the checks have logged.
	_, _, log := e.startIngressProcessFlags(t, []string{"--skip-checks"}, otherKey[0])
	siteopstest.EventuallyNil(t, 20*time.Second, "the ingress started with --skip-checks to say so loudly", func() error {
		if !strings.Contains(log.String(), "level=ERROR") || !strings.Contains(log.String(), "CHECK FAILED; starting anyway (--skip-checks)") {
			return fmt.Errorf("its log has no ERROR line with \"CHECK FAILED; starting anyway (--skip-checks)\":\n%s", log.String())
		}
		return nil
	})

	_, _, log = e.startIngressProcessFlags(t, nil, "SITEOPS_SECRET_KEY="+testSecretKey(), "TEMPORAL_ADDRESS=127.0.0.1:1")
	siteopstest.Eventually(t, 30*time.Second, "the ingress to say it runs degraded while Temporal is down", func() bool {
		return strings.Contains(log.String(), "STARTING DEGRADED") && strings.Contains(log.String(), "check=temporal") &&
			strings.Contains(log.String(), "the ingress accepts and records deliveries meanwhile")
	})
	if strings.Contains(log.String(), "CHECK FAILED") {
		t.Errorf("the ingress counts Temporal being down as a failed check:\n%s", log.String())
	}
}
