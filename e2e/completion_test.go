package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
)

// TestCompletionNamesRecentRuns asks the binary for completions as a
// shell does (siteops __complete) against a real Temporal: --site offers
// the sites of recent lead syncs, embed on only those with an open
// incident, and status the ids of recent workflows.
func TestCompletionNamesRecentRuns(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	if _, err := e.Starter.SyncLeads(t.Context(), "site_completed", false); err != nil {
		t.Fatal(err)
	}
	complete := func(args ...string) []string {
		out, code := e.run(t, nil, append([]string{"__complete"}, args...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) < 2 || lines[len(lines)-2] != ":4" {
			t.Fatalf("__complete %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
		return lines[:len(lines)-2]
	}
	siteopstest.Eventually(t, 30*time.Second, "visibility to list the lead sync", func() bool {
		return slices.Contains(complete("embed", "off", "--site", "site_c"), "site_completed")
	})
	if got := complete("status", "lead-sync/"); !slices.Contains(got, "lead-sync/site_completed") {
		t.Errorf("status completes %q", got)
	}
	if got := complete("embed", "on", "--site", ""); len(got) != 0 {
		t.Errorf("embed on offers %q, with no incident open", got)
	}
}
