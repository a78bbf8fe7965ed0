package main

import (
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/overview"
)

// TestOverviewShowsTheSitesTheSweepCannotRead: the text overview lists a
// site the lead sweep cannot read with its reason and the command to run
// next, and says how many more there are.
func TestOverviewShowsTheSitesTheSweepCannotRead(t *testing.T) {
	now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	r := overview.Report{At: now, LeadSyncs: overview.LeadSyncs{
		SweepFailing:      []overview.SweepFailure{{SiteID: "site_bad", Reason: "http_500", Since: now.Add(-2 * time.Hour), LastAt: now.Add(-time.Hour), Failures: 2, Next: "siteops leads sync --site site_bad --follow"}},
		SweepFailingTotal: 3,
	}}
	var b strings.Builder
	if err := writeOverview(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"site_bad", "the lead sweep cannot read it (http_500, 2 sweeps", "siteops leads sync --site site_bad", "2 more sites the lead sweep cannot read"} {
		if !strings.Contains(out, want) {
			t.Errorf("the overview does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "all clear") {
		t.Errorf("the overview says all clear:\n%s", out)
	}
}
