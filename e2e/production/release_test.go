package production

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/internal/ports"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/rollout"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/workflows"
)

// TestReleaseOnTheCluster runs the release steps of the Kubernetes runbook
// (docs/kubernetes.md, steps 7 and 8, and rolling back) with the commands
// deploy/kubernetes/rollout.sh runs, against the cluster over mutual TLS,
// with work in flight: build-a's worker makes itself current and starts
// an onboarding that waits for its knowledge (pinned to build-a); build-b's
// worker starts beside it and `siteops release promote` makes it current
// while the onboarding stays; `release drained` names the onboarding
// until it publishes on build-a; `release rollback` makes build-a current
// again and a second promote moves forward; the knowledge arrives through
// the ingress, the onboarding publishes on build-a, `release drained` then
// exits 0, and once build-a is stopped `release finalize --dry-run` finds
// the routing and the drain right, refuses while build-a's pollers are
// fresh, and changes nothing.
func TestReleaseOnTheCluster(t *testing.T) {
	world.Need(t)
	_, simURL := newSimulator(t, simulator.Config{Seed: 7})
	dbURL := storetest.PostgresSchemaURL(t)
	ps, err := ports.FreeN(2)
	if err != nil {
		t.Fatal(err)
	}
	ingressURL := fmt.Sprintf("http://127.0.0.1:%d", ps[0])
	// A deployment and task queue of its own: the package's other tests
	// run workers on the same namespace.
	deployment := fmt.Sprintf("siteops-release-%d", time.Now().UnixNano())
	env := slices.Clip(append(clusterEnv(), "SITEOPS_DATABASE_URL="+dbURL, "SITEOPS_SECRET_KEY="+secretKey(),
		"AGENTSITE_BASE_URL="+simURL, "AGENTSITE_API_KEY="+apiKey, "SITEOPS_TASK_QUEUE="+deployment,
		"SITEOPS_DEPLOYMENT_NAME="+deployment, "SITEOPS_WEBHOOK_SECRETS="+generatorSecret, "SITEOPS_METRICS_ADDR=",
		fmt.Sprintf("SITEOPS_INGRESS_ADDR=127.0.0.1:%d", ps[0]), fmt.Sprintf("SITEOPS_INGRESS_ADMIN_ADDR=127.0.0.1:%d", ps[1]),
		"SITEOPS_OPERATOR=release-drill"))
	with := func(extra ...string) []string { return slices.Concat(env, extra) }
	run := func(args ...string) (string, int) { t.Helper(); return siteops(t, env, args...) }
	cl, err := temporal.Dial(t.Context(), namespace)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	buildOf := func(id string) string {
		d, err := cl.DescribeWorkflow(t.Context(), id, "")
		if err != nil {
			return ""
		}
		return d.RawResponse.GetWorkflowExecutionInfo().GetVersioningInfo().GetDeploymentVersion().GetBuildId()
	}

	// Step 7: the first release.
	a := startProc(t, "worker build-a", with("SITEOPS_BUILD_ID=build-a"), "worker")
	waitLog(t, a, "this build is now current")
	in := startProc(t, "ingress", env, "ingress")
	ready(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", ps[1]))

	spec := filepath.Join(t.TempDir(), "drill.json")
	b, err := os.ReadFile("../../examples/bayside-dental.json")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), `"slug": "bayside-dental"`, `"slug": "release-drill"`, 1)
	s = strings.Replace(s, `"faqs": [`, `"wait_for_knowledge": true, "knowledge_timeout": "10m", "faqs": [`, 1)
	if err := os.WriteFile(spec, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := run("onboard", "-f", spec); code != 0 {
		t.Fatalf("onboard: exit %d\n%s", code, out)
	}
	drill := workflows.OnboardingID("release-drill")
	var status workflows.OnboardingStatus
	siteopstest.Eventually(t, time.Minute, drill+" to wait for its knowledge", func() bool {
		v, err := cl.QueryWorkflow(t.Context(), drill, "", workflows.QueryStatus)
		return err == nil && v.Get(&status) == nil && status.Step == workflows.StepWaitingKnowledge
	})
	if got := buildOf(drill); got != "build-a" {
		t.Fatalf("%s runs on %q, want build-a", drill, got)
	}

	// Step 8: the next release, with the onboarding in flight.
	bw := startProc(t, "worker build-b", with("SITEOPS_BUILD_ID=build-b"), "worker")
	waitLog(t, bw, "siteops release promote --build-id build-b")
	promote := func() rollout.PromoteResult {
		t.Helper()
		out, code := siteops(t, with("SITEOPS_BUILD_ID=build-b"), "release", "promote", "--build-id", "build-b", "-o", "json")
		var p rollout.PromoteResult
		if code != 0 || json.Unmarshal([]byte(out), &p) != nil {
			t.Fatalf("release promote: exit %d\n%s", code, out)
		}
		return p
	}
	if p := promote(); p.Previous != "build-a" || !slices.ContainsFunc(p.StayPinned, func(r rollout.Run) bool { return r.WorkflowID == drill }) {
		t.Errorf("promote = %+v; want build-a before it and %s staying on it", p, drill)
	}
	if out, code := run("release", "drained", "--build-id", "build-a"); code != 1 || !strings.Contains(out, drill) {
		t.Errorf("drained while %s is pinned to build-a: exit %d, want 1 naming it\n%s", drill, code, out)
	}
	if out, code := run("release", "status"); code != 0 || !strings.Contains(out, "current build-b") {
		t.Errorf("release status after the promote: exit %d\n%s", code, out)
	}

	// Rolling back before finalize, then forward again.
	if out, code := siteops(t, with("SITEOPS_BUILD_ID=build-b"), "release", "rollback", "--to-build-id", "build-a"); code != 0 {
		t.Fatalf("release rollback: exit %d\n%s", code, out)
	}
	if out, code := run("release", "status"); code != 0 || !strings.Contains(out, "current build-a") {
		t.Errorf("release status after the rollback: exit %d\n%s", code, out)
	}
	if p := promote(); p.Previous != "build-a" {
		t.Errorf("promote after the rollback = %+v; want build-a before it", p)
	}

	// The knowledge arrives through the ingress; the onboarding publishes
	// on the build it is pinned to.
	for _, k := range []string{"kn_1", "kn_2"} {
		if code := deliverEvent(t, ingressURL, "evt_drill_"+k, "knowledge.ready", fmt.Sprintf(`{"site_id":%q,"knowledge_id":%q}`, status.SiteID, k)); code/100 != 2 {
			t.Fatalf("knowledge.ready %s answered %d\ningress log:\n%s", k, code, in.log.String())
		}
	}
	var res workflows.OnboardingResult
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := cl.GetWorkflow(ctx, drill, "").Get(ctx, &res); err != nil || res.Status != "published" {
		t.Fatalf("%s: %+v, %v\nworker build-a log:\n%s", drill, res, err, a.log.String())
	}
	if got := buildOf(drill); got != "build-a" {
		t.Errorf("%s finished on %q, want build-a (it is pinned)", drill, got)
	}
	var drained string
	siteopstest.Eventually(t, time.Minute, "release drained --build-id build-a to exit 0", func() bool {
		out, code := run("release", "drained", "--build-id", "build-a")
		drained = out
		return code == 0
	})
	if !strings.Contains(drained, "drained") {
		t.Errorf("drained printed %s", drained)
	}
	a.stop()

	// What finalize would do; the dry run changes nothing. build-a's
	// workers polled moments ago, so it refuses until two minutes have
	// passed, as the runbook says.
	out, code := run("release", "finalize", "--dry-run")
	for _, want := range []string{"nothing changed (dry run)", "ok   routing", "ok   drained", "FAIL pollers", "build-a"} {
		if !strings.Contains(out, want) {
			t.Errorf("release finalize --dry-run lacks %q:\n%s", want, out)
		}
	}
	if code != 1 {
		t.Errorf("release finalize --dry-run with build-a's pollers fresh: exit %d, want 1\n%s", code, out)
	}
}

// waitLog waits until p's log says want.
func waitLog(t *testing.T, p *proc, want string) {
	t.Helper()
	siteopstest.Eventually(t, time.Minute, p.name+" to log "+want, func() bool { return strings.Contains(p.log.String(), want) })
}
