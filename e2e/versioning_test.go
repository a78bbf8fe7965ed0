package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/release"
)

// TestVersionedWorkerRefusesAPlaceholderBuildID starts `siteops worker`
// with a build id that names no build: every build made that way would be
// one Worker Deployment Version, so a release would take over the old
// one's pinned workflows. It refuses before it opens or dials anything
// (exit 2, naming the setting and the fix).
func TestVersionedWorkerRefusesAPlaceholderBuildID(t *testing.T) {
	for _, id := range []string{"dev", "latest"} {
		cmd := exec.CommandContext(t.Context(), binary, "worker")
		cmd.Env = append(os.Environ(), "SITEOPS_WORKER_VERSIONING=true", "SITEOPS_BUILD_ID="+id,
			"AGENTSITE_BASE_URL=http://127.0.0.1:1", "AGENTSITE_API_KEY="+apiKey, "TEMPORAL_ADDRESS=127.0.0.1:1")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "SITEOPS_BUILD_ID") || !strings.Contains(string(out), "names no build") {
			t.Errorf("worker with SITEOPS_BUILD_ID=%s: %v, want exit 2 naming SITEOPS_BUILD_ID\n%s", id, err, out)
		}
	}
	out, err := exec.CommandContext(t.Context(), binary, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "release "+itoa(release.Number)+", build id ") {
		t.Errorf("siteops version: %v\n%s", err, out)
	}
}

// startWorkerProcess runs `siteops worker` until the test ends and returns
// its log.
func (e *env) startWorkerProcess(t *testing.T, extra ...string) *siteopstest.Log {
	t.Helper()
	log := &siteopstest.Log{}
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
	d, err := e.Client.DescribeWorkflow(context.WithoutCancel(t.Context()), workflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	return d.RawResponse.GetWorkflowExecutionInfo().GetVersioningInfo().GetDeploymentVersion().GetBuildId()
}
