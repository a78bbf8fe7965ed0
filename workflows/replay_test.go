package workflows_test

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	tlog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/siteops/siteops/worker"
	"github.com/siteops/siteops/workflows"
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
	// The newest release records every kind of workflow, so each one's
	// current code paths (its version markers among them) are replayed.
	newest := slices.MaxFunc(releases, func(a, b string) int { return releaseNumber(a) - releaseNumber(b) })
	recorded := map[string]bool{}
	newestFiles, err := filepath.Glob(filepath.Join(newest, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range newestFiles {
		recorded[workflowType(t, f)] = true
	}
	for _, k := range workflows.Catalogue {
		if !recorded[k.Name] {
			t.Errorf("%s holds no %s history; record one with `make histories RELEASE=%s` (add its test to the Makefile's list)", newest, k.Name, filepath.Base(newest))
		}
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

// releaseNumber is the number at the end of a release folder's name
// (release-12 → 12), so that release-10 sorts after release-9.
func releaseNumber(dir string) int {
	base := filepath.Base(dir)
	n, _ := strconv.Atoi(base[strings.LastIndexAny(base, "-_")+1:])
	return n
}

// workflowType reads the workflow type name from a recorded history's
// first event.
func workflowType(t *testing.T, file string) string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Events []struct {
			Started struct {
				WorkflowType struct {
					Name string `json:"name"`
				} `json:"workflowType"`
			} `json:"workflowExecutionStartedEventAttributes"`
		} `json:"events"`
	}
	if err := json.Unmarshal(raw, &h); err != nil || len(h.Events) == 0 {
		t.Fatalf("%s is not a recorded history: %v", file, err)
	}
	return h.Events[0].Started.WorkflowType.Name
}
