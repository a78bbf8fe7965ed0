package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/workflows"
)

// readme holds the curl commands for callers without an SDK; they are run
// here exactly as written, with the placeholders as environment variables.
const readme = "../docs/nexus-and-http.md"

// Markers of the tested code blocks: an HTML comment on the line before
// the block's opening fence.
const (
	curlStartMarker  = "<!-- e2e: curl-start -->"
	curlStatusMarker = "<!-- e2e: curl-status -->"
)

// RequireCurlEnv, set to 1, makes TestHTTPAPICurlCommands fail instead of
// skipping when bash or curl is missing: CI sets it (.ci/run installs
// curl), so that the docs' curl commands always run there.
const RequireCurlEnv = "SITEOPS_REQUIRE_CURL"

// TestHTTPAPICurlCommands runs docs/nexus-and-http.md's curl commands against the
// HTTP API of a dev server (its --http-port): they start an onboarding
// with inline knowledge through the Nexus endpoint and read its status,
// with no Temporal SDK and no workflow ID in any URL. It checks the
// answers and the status codes the docs promise: 400 for an input that
// breaks a rule (and nothing started), 201 for the start, 200 for the
// status and for the same start again, 404 for the status of an unknown
// slug.
func TestHTTPAPICurlCommands(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv(RequireCurlEnv) == "1" {
				t.Fatalf("the docs' curl commands need %s, which is not on PATH (Debian: apt-get install %s); %s=1 makes this a failure", tool, tool, RequireCurlEnv)
			}
			t.Skipf("SKIP: the docs' curl commands need %s", tool)
		}
	}
	start, status := docBlock(t, readme, curlStartMarker), docBlock(t, readme, curlStatusMarker)

	const ns = "siteops-http"
	ds := startHTTPDevServer(t, ns)
	e := envOn(t, ds.address, ns)
	e.startWorker(t) // it serves the Nexus service too
	_, endpointID := createEndpoint(t, ds.address, ns)
	vars := []string{"TEMPORAL_HTTP_ADDRESS=" + strings.TrimPrefix(ds.httpURL, "http://"), "SITEOPS_ENDPOINT=" + endpointID}
	id := workflows.OnboardingID("lighthouse-bakery")

	// The same command with an input that breaks a rule: 400, the rule in
	// the message, and no onboarding.
	invalid := replaceOnce(t, start, `"title": "Lighthouse Bakery", `, `"title": "", `)
	code, body := runCurl(t, invalid, vars)
	var refused struct {
		Message string `json:"message"`
	}
	if err := json.Unmarshal(body, &refused); err != nil || code != http.StatusBadRequest ||
		!strings.HasPrefix(refused.Message, "the onboarding breaks 1 rule(s): site.title: is required") {
		t.Errorf("an invalid input answered %d %s (%v); the docs promise 400 with the rules", code, body, err)
	}
	if _, err := e.Client.DescribeWorkflow(t.Context(), id, ""); err == nil {
		t.Errorf("an invalid input started %s", id)
	}

	code, body = runCurl(t, start, vars)
	var started struct {
		Token string `json:"token"`
		State string `json:"state"`
	}
	if err := json.Unmarshal(body, &started); err != nil || code != http.StatusCreated || started.Token == "" || started.State != "running" {
		t.Fatalf("the start command answered %d %s (%v); the docs promise 201 with a token, running", code, body, err)
	}
	var st api.Onboarding
	siteopstest.Eventually(t, time.Minute, "the status command to report a completed onboarding", func() bool {
		code, body := runCurl(t, status, vars)
		st = api.Onboarding{}
		return code == http.StatusOK && json.Unmarshal(body, &st) == nil && st.Status == "Completed"
	})
	if st.WorkflowID != id || st.Result == nil || st.Result.Status != "published" || len(st.Result.KnowledgeIDs) != 1 {
		t.Errorf("status = %+v", st)
	}
	// The inline text went to the store; the onboarding saw its hash.
	in := onboardingInput(t, e, st.WorkflowID)
	if len(in.Knowledge) != 1 || in.Knowledge[0].Text != "" || in.Knowledge[0].TextHash == "" {
		t.Errorf("the onboarding's knowledge = %+v, want a hash", in.Knowledge)
	}
	if _, err := e.Store.KnowledgeText(t.Context(), in.Knowledge[0].TextHash); err != nil {
		t.Errorf("the text is not in the store: %v", err)
	}
	// Starting it again answers at once with the finished onboarding's
	// result (200, not 201): a retried curl is safe.
	code, body = runCurl(t, start, vars)
	var res api.OnboardResult
	if err := json.Unmarshal(body, &res); err != nil || code != http.StatusOK || res.SiteID != st.Result.SiteID {
		t.Errorf("the start command again answered %d %s (%v); the docs promise 200 with the result", code, body, err)
	}
	// An unknown slug: 404.
	code, body = runCurl(t, replaceOnce(t, status, `"slug": "lighthouse-bakery"`, `"slug": "nobody-here"`), vars)
	if code != http.StatusNotFound {
		t.Errorf("the status of an unknown slug answered %d %s; the docs promise 404", code, body)
	}
}

// replaceOnce returns s with old, which must occur exactly once, replaced.
func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if n := strings.Count(s, old); n != 1 {
		t.Fatalf("the docs' command holds %q %d times, want once:\n%s", old, n, s)
	}
	return strings.Replace(s, old, new, 1)
}

// runCurl runs a documented block as runShell does, with curl made to
// print the HTTP status on a line of its own after the body, and returns
// the status and the body of its last request.
func runCurl(t *testing.T, script string, vars []string) (int, []byte) {
	t.Helper()
	const status = "curl() { command curl -w '\\n%{http_code}\\n' \"$@\"; }\n"
	out := bytes.TrimSpace(runShell(t, status+script, vars))
	i := bytes.LastIndexByte(out, '\n')
	code, err := strconv.Atoi(string(out[i+1:]))
	if i < 0 || err != nil {
		t.Fatalf("no status after the answer:\n%s", out)
	}
	return code, lastLine(out[:i])
}

// docBlock returns the fenced code block that follows marker in the file.
func docBlock(t *testing.T, path, marker string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	var block []string
	state := 0 // 0 before the marker, 1 before the fence, 2 in the block
	for sc.Scan() {
		line := sc.Text()
		switch {
		case state == 0 && strings.TrimSpace(line) == marker:
			state = 1
		case state == 1 && strings.HasPrefix(line, "```"):
			state = 2
		case state == 2 && strings.HasPrefix(line, "```"):
			return strings.Join(block, "\n") + "\n"
		case state == 2:
			block = append(block, line)
		}
	}
	t.Fatalf("%s has no code block after %s", path, marker)
	return ""
}

// runShell runs a documented block with bash, the placeholders set in its
// environment, and returns its standard output.
func runShell(t *testing.T, script string, vars []string) []byte {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-c", script)
	cmd.Env = append(os.Environ(), vars...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the documented commands failed: %v\n%s%s", err, out, stderr.String())
	}
	return out
}

func lastLine(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return lines[len(lines)-1]
}

type httpDevServer struct {
	address string // gRPC HOST:PORT
	httpURL string // the HTTP API, http://HOST:PORT
}

// startHTTPDevServer starts a dev server of its own whose HTTP API listens
// on a known port (the shared one's is random) with namespace ns, which
// has siteops' search attributes (the worker checks them at start).
func startHTTPDevServer(t *testing.T, ns string) httpDevServer {
	t.Helper()
	cli, err := devserver.FindCLI()
	if err != nil {
		t.Fatal(err)
	}
	port, err := devserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	httpPort, err := devserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"server", "start-dev", "--ip", "127.0.0.1", "--port", strconv.Itoa(port),
		"--http-port", strconv.Itoa(httpPort), "--headless", "--log-level", "error", "--namespace", ns}
	args = append(args, devserver.DynamicArgs()...)
	for name, kind := range devserver.SearchAttributes {
		args = append(args, "--search-attribute", name+"="+kind)
	}
	cmd := exec.Command(cli, args...) //nolint:gosec // the pinned CLI
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	s := httpDevServer{address: fmt.Sprintf("127.0.0.1:%d", port), httpURL: fmt.Sprintf("http://127.0.0.1:%d", httpPort)}
	// Ready when the HTTP API describes the namespace.
	siteopstest.Eventually(t, time.Minute, "the dev server's HTTP API", func() bool {
		select {
		case <-done:
			t.Fatalf("the dev server exited:\n%s", log.String())
		default:
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.httpURL+"/api/v1/namespaces/"+ns, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}
