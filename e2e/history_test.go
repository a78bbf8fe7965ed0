package e2e

import (
	"os"
	"path/filepath"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// recordEnv, when set to a release's name, makes e2e tests write the
// histories of their workflows to workflows/testdata/histories/<release>/
// for the replay check (make histories RELEASE=<release>):
//
//	SITEOPS_RECORD_HISTORIES=release-2 go test ./e2e/
const recordEnv = "SITEOPS_RECORD_HISTORIES"

// recordHistory saves the history of a closed workflow's latest run as
// name.json.
func recordHistory(t *testing.T, e *env, workflowID, name string) {
	t.Helper()
	recordRunHistory(t, e, workflowID, "", name)
}

// recordRunHistory saves the history of one closed run as name.json.
func recordRunHistory(t *testing.T, e *env, workflowID, runID, name string) {
	t.Helper()
	release := os.Getenv(recordEnv)
	if release == "" {
		return
	}
	it := e.Client.GetWorkflowHistory(t.Context(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var h historypb.History
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, ev)
	}
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&h)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "workflows", "testdata", "histories", filepath.Base(release), name+".json")
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d events of %s in %s", len(h.Events), workflowID, path)
}
