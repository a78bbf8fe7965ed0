package workflows_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	tlog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/siteops/siteops/worker"
)

// TestReplay replays histories recorded from real runs on a Temporal dev
// server against the current workflow code: one folder per release
// (workflows/testdata/histories/<release>/), recorded with
// `make histories RELEASE=<release>`. Every release's histories must
// replay, so a change that would break workflows still running on an
// older build fails here with a non-determinism error.
func TestReplay(t *testing.T) {
	releases, err := filepath.Glob(filepath.Join("testdata", "histories", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(releases) == 0 {
		t.Fatal("no recorded histories; record them with `make histories RELEASE=<release>`")
	}
	for _, dir := range releases {
		files, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) < 4 {
			t.Fatalf("%s holds %d histories, want one per workflow and path", dir, len(files))
		}
		for _, f := range files {
			t.Run(filepath.Base(dir)+"/"+filepath.Base(f), func(t *testing.T) {
				r := sdkworker.NewWorkflowReplayer()
				worker.RegisterWorkflows(r)
				logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
				if err := r.ReplayWorkflowHistoryFromJSONFile(logger, f); err != nil {
					t.Fatalf("replaying %s: %v", f, err)
				}
			})
		}
	}
}
