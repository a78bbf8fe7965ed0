package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/release"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
)

// TestFinalizeChecksItCannotMakeFail runs `siteops release finalize` as an
// operator would, beside one versioned worker of this release. A Worker
// Deployment that does not exist (a wrong --deployment-name) makes its
// routing, drained and pollers checks fail (exit 1), never "unverified",
// unless --unversioned says the workers are unversioned; --unversioned
// beside a versioned deployment fails too. A dry run says first that
// nothing changed, then what would; without --yes, where it cannot ask,
// it refuses naming --yes (exit 2); with --yes it finalizes; none of the
// others does.
func TestFinalizeChecksItCannotMakeFail(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	log := e.startWorkerProcess(t, "AGENTSITE_BASE_URL="+e.SimURL, "AGENTSITE_API_KEY="+apiKey, "SITEOPS_METRICS_ADDR=",
		"SITEOPS_WORKER_VERSIONING=true", "SITEOPS_BUILD_ID=final-build")
	siteopstest.Eventually(t, 30*time.Second, "the worker's build to become current", func() bool {
		return strings.Contains(log.String(), "this build is now current")
	})
	finalized := func(t *testing.T) int {
		t.Helper()
		n, err := e.Store.FinalizedRelease(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	this := "release " + itoa(release.Number)

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"a deployment that does not exist", []string{"--deployment-name", "no-such-deployment"}, 1,
			[]string{"FAIL routing   cannot be checked: the Worker Deployment no-such-deployment does not exist", "--unversioned", "FAIL drained", "FAIL pollers", "not finalized"}},
		{"a dry run with a deployment that does not exist", []string{"--deployment-name", "no-such-deployment", "--dry-run"}, 1,
			[]string{"nothing changed (dry run); siteops release finalize would refuse: the routing, drained, pollers check(s) failed"}},
		{"--unversioned beside a versioned deployment", []string{"--unversioned", "--dry-run"}, 1,
			[]string{"FAIL routing   deployment siteops has the current build final-build, so its workers are versioned: drop --unversioned"}},
		{"unversioned workers, said so", []string{"--deployment-name", "no-such-deployment", "--unversioned", "--dry-run"}, 0,
			[]string{"nothing changed (dry run); siteops release finalize would run " + this + "'s contract steps", "the workers are unversioned (--unversioned)", "ok   registry"}},
		{"a dry run", []string{"--dry-run"}, 0,
			[]string{"nothing changed (dry run); siteops release finalize would run " + this + "'s contract steps", "record " + this + " as finalized",
				"ok   routing   the current build final-build is a worker of " + this, "ok   drained", "ok   pollers", "ok   registry"}},
		{"without --yes where it cannot ask", nil, 2,
			[]string{"siteops release finalize asks before it changes anything, and standard input is not a terminal to ask on: add --yes", "nothing changed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := e.run(t, nil, append([]string{"release", "finalize"}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s", code, tc.code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("the output lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "dry run") && !strings.HasPrefix(out, "nothing changed (dry run)") {
				t.Errorf("a dry run does not say first that nothing changed:\n%s", out)
			}
			if n := finalized(t); n != 0 {
				t.Fatalf("the store is finalized for release %d after %s", n, tc.name)
			}
		})
	}

	out, code := e.run(t, nil, "release", "finalize", "--yes")
	if code != 0 || !strings.Contains(out, "finalized "+this) {
		t.Fatalf("release finalize --yes: exit %d\n%s", code, out)
	}
	if n := finalized(t); n != release.Number {
		t.Errorf("after finalize --yes the store is finalized for release %d, want %d", n, release.Number)
	}
	out, code = e.run(t, nil, "release", "finalize", "--dry-run")
	if code != 0 || !strings.HasPrefix(out, "nothing changed (dry run); siteops release finalize would change nothing: the store is finalized already") {
		t.Errorf("a dry run after finalize: exit %d\n%s", code, out)
	}
}
