package workflows_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/workflows"
)

// TestReplay replays histories recorded from real runs on a Temporal dev
// server (SITEOPS_RECORD_HISTORIES=1 go test ./e2e/) against the current
// workflow code. A change that would break running workflows fails here.
func TestReplay(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("found %d recorded histories, want one per workflow and path; record them with SITEOPS_RECORD_HISTORIES=1 go test ./e2e/", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(workflows.Onboarding, workflow.RegisterOptions{Name: workflows.OnboardingWorkflowName})
			r.RegisterWorkflowWithOptions(workflows.LeadSync, workflow.RegisterOptions{Name: workflows.LeadSyncWorkflowName})
			r.RegisterWorkflowWithOptions(workflows.EmbedIncident, workflow.RegisterOptions{Name: workflows.EmbedIncidentWorkflowName})
			r.RegisterWorkflowWithOptions(workflows.SecretRotation, workflow.RegisterOptions{Name: workflows.SecretRotationWorkflowName})
			logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
			if err := r.ReplayWorkflowHistoryFromJSONFile(logger, f); err != nil {
				t.Fatalf("replaying %s: %v", f, err)
			}
		})
	}
}
