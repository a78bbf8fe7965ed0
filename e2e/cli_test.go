package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// siteops runs the built binary against the test's namespace.
func (e *env) siteops(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), binary, args...)
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+server.Address, "TEMPORAL_NAMESPACE="+e.ns,
		"SITEOPS_TASK_QUEUE="+taskQueue, "SITEOPS_DATABASE_URL="+e.dbURL, "SITEOPS_OPERATOR=oncall-e2e")
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

	if out, err := e.siteops(t, "onboard", "-f", "../examples/bayside-dental.json"); err == nil || !strings.Contains(out, "already") {
		t.Errorf("a second onboard: %v\n%s", err, out)
	}

	if _, err := e.sim.CreateLeads(site, 1234); err != nil {
		t.Fatal(err)
	}
	out, err = e.siteops(t, "leads", "sync", "--site", site, "--follow")
	if err != nil || !strings.Contains(out, "caught up: 1234 leads") {
		t.Fatalf("leads sync --follow: %v\n%s", err, out)
	}
	if n, _ := e.store.CountLeads(t.Context(), site); n != 1234 {
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

func TestCLIWithoutTemporal(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), binary, "status", "onboarding/x")
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS=127.0.0.1:1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "cannot reach Temporal at 127.0.0.1:1") || strings.Count(strings.TrimSpace(string(out)), "\n") > 0 {
		t.Errorf("unreachable Temporal: %v\n%s", err, out)
	}
}
