package e2e

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// TestWorkerVersioningMovesOnlyWhatMayMove ships a second build of the
// worker the way the README says: build A is the deployment's first
// version and becomes current by itself; build B starts beside it, and an
// operator makes it current with the temporal CLI. New onboardings run on
// B, the onboarding A started stays pinned to A and finishes there, and
// the lead sync (AutoUpgrade) moves to B.
func TestWorkerVersioningMovesOnlyWhatMayMove(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	common := []string{"AGENTSITE_BASE_URL=" + e.simURL, "AGENTSITE_API_KEY=" + apiKey, "SITEOPS_METRICS_ADDR=", "SITEOPS_WORKER_VERSIONING=true"}
	a := e.startWorkerProcess(t, append(common, "SITEOPS_BUILD_ID=build-a")...)
	eventually(t, 30*time.Second, "build A to become current", func() bool {
		return strings.Contains(a.String(), "this build is now current")
	})

	// An onboarding that waits for its knowledge: pinned to A.
	waiting := prepare(t, "../examples/bayside-dental.json", "pinned")
	waiting.Input.WaitForKnowledge = true
	waiting.Input.KnowledgeTimeout = workflows.Duration(10 * time.Minute)
	o, err := e.starter.Onboard(t.Context(), waiting)
	if err != nil {
		t.Fatal(err)
	}
	site := e.site(t, "autoupgrade")
	if _, err := e.starter.SyncLeads(t.Context(), site, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the pinned onboarding to wait for knowledge on A", func() bool {
		st, err := e.starter.Status(t.Context(), o.WorkflowID)
		d, _ := st.Detail.(*workflows.OnboardingStatus)
		return err == nil && d != nil && d.Step == workflows.StepWaitingKnowledge
	})
	if got := e.buildOf(t, o.WorkflowID); got != "build-a" {
		t.Fatalf("the waiting onboarding runs on %q, want build-a", got)
	}

	b := e.startWorkerProcess(t, append(common, "SITEOPS_BUILD_ID=build-b")...)
	eventually(t, 30*time.Second, "build B to see that A is current", func() bool {
		return strings.Contains(b.String(), "another build is the deployment's current version")
	})
	cli, err := devserver.FindCLI()
	if err != nil {
		t.Fatal(err)
	}
	// The server refuses to make a version current until it has seen that
	// version poll every task queue the current one serves ("missing
	// active task queues"); build B's pollers reach them one by one, so an
	// operator (and this test) tries again for a while.
	var out []byte
	eventually(t, 30*time.Second, "set-current-version to build-b to succeed", func() bool {
		set := exec.CommandContext(t.Context(), cli, "worker", "deployment", "set-current-version", "--address", server.Address, "--namespace", e.ns,
			"--deployment-name", "siteops", "--build-id", "build-b", "--yes")
		var err error
		out, err = set.CombinedOutput()
		if err != nil && !strings.Contains(string(out), "missing active task queues") {
			t.Fatalf("set-current-version: %v\n%s", err, out)
		}
		return err == nil
	})

	fresh := e.onboard(t, prepare(t, "../examples/acme-anvils.yaml", "fresh"), time.Minute)
	if got := e.buildOf(t, "onboarding/fresh"); got != "build-b" || fresh.Status != "published" {
		t.Errorf("a new onboarding after the switch: %s on %q, want published on build-b", fresh.Status, got)
	}
	// The pinned one finishes on A once its knowledge is ready.
	st, err := e.starter.Status(t.Context(), o.WorkflowID)
	if err != nil {
		t.Fatal(err)
	}
	d := st.Detail.(*workflows.OnboardingStatus)
	var res workflows.OnboardingResult
	for _, id := range knowledgeIDs(t, e, d.SiteID) {
		if err := e.client.SignalWorkflow(t.Context(), o.WorkflowID, "", workflows.SignalKnowledgeReady, workflows.KnowledgeReadySignal{EventID: "evt_" + id, KnowledgeID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.starter.Wait(ctxWithin(t, time.Minute), o.Run, &res); err != nil || res.Status != "published" {
		t.Fatalf("the pinned onboarding: %+v, %v", res, err)
	}
	if got := e.buildOf(t, o.WorkflowID); got != "build-a" {
		t.Errorf("the pinned onboarding finished on %q, want build-a", got)
	}
	// The lead sync moves to B at its next task.
	if _, err := e.starter.SyncLeads(t.Context(), site, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the lead sync to move to build-b", func() bool { return e.buildOf(t, workflows.LeadSyncID(site)) == "build-b" })
	desc, _ := e.client.DescribeWorkflowExecution(t.Context(), workflows.LeadSyncID(site), "")
	if b := desc.GetWorkflowExecutionInfo().GetVersioningInfo().GetBehavior(); b != enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE {
		t.Errorf("the lead sync's behaviour = %v, want AutoUpgrade", b)
	}
	_ = e.client.CancelWorkflow(t.Context(), workflows.LeadSyncID(site), "")
}

// startWorkerProcess runs `siteops worker` until the test ends and returns
// its log.
func (e *env) startWorkerProcess(t *testing.T, extra ...string) *syncBuffer {
	t.Helper()
	log := &syncBuffer{}
	cmd := exec.Command(binary, "worker")
	cmd.Env = append(e.cliEnv(), extra...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _, _ = cmd.Process.Wait() })
	return log
}

// buildOf returns the build ID a workflow's latest run is on.
func (e *env) buildOf(t *testing.T, workflowID string) string {
	t.Helper()
	d, err := e.client.DescribeWorkflowExecution(context.WithoutCancel(t.Context()), workflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	return d.GetWorkflowExecutionInfo().GetVersioningInfo().GetDeploymentVersion().GetBuildId()
}

// knowledgeIDs lists the knowledge sources of a site through the
// simulator's summary: it numbers sources kn_1, kn_2, ... in the order
// they are created, and this test's first onboarding creates the first.
func knowledgeIDs(t *testing.T, e *env, site string) []string {
	t.Helper()
	for _, s := range e.sim.Sites() {
		if s.ID == site {
			ids := make([]string, s.Knowledge)
			for i := range ids {
				ids[i] = "kn_" + itoa(i+1)
			}
			return ids
		}
	}
	t.Fatalf("no site %s in the simulator", site)
	return nil
}
