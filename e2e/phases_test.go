package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// TestWaitsShowTheirPhase onboards with --wait through an API that answers
// each call after a second, in a pipe: standard error gets one line per
// step of the onboarding once the wait has lasted two seconds, standard
// output only the result; with -o json standard error stays empty (it is
// for the one JSON error) and standard output is one JSON document.
func TestWaitsShowTheirPhase(t *testing.T) {
	t.Parallel() // it mostly waits (main_test.go)
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	if err := e.Sim.SetFaults(simulator.Faults{Latency: simulator.Duration(time.Second)}); err != nil {
		t.Fatal(err)
	}
	spec := func(slug string) string {
		b, err := os.ReadFile("../examples/bayside-dental.json")
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), slug+".json")
		if err := os.WriteFile(p, []byte(strings.Replace(string(b), `"bayside-dental"`, `"`+slug+`"`, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	stdout, stderr, code := e.runSplit(t, nil, "", "onboard", "-f", spec("phases-text"), "--wait")
	id := workflows.OnboardingID("phases-text")
	if code != 0 || !strings.HasPrefix(stdout, id+": onboarded; ") || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("onboard --wait: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	var steps []string
	for _, l := range lines {
		rest, ok := strings.CutPrefix(l, "siteops: "+id+": step ")
		if !ok {
			t.Errorf("a line of standard error is no phase of %s: %q", id, l)
			continue
		}
		steps = append(steps, strings.Fields(rest)[0])
	}
	if len(steps) < 2 || steps[len(steps)-1] != workflows.StepPublishing {
		t.Errorf("the phases in a pipe were %q, want at least two steps ending with %s\n%s", steps, workflows.StepPublishing, stderr)
	}

	stdout, stderr, code = e.runSplit(t, nil, "", "onboard", "-f", spec("phases-json"), "--wait", "-o", "json")
	var res workflows.OnboardingResult
	if code != 0 || json.Unmarshal([]byte(stdout), &res) != nil || res.Status != "published" || stderr != "" {
		t.Errorf("onboard --wait -o json: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
