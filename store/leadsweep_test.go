package store_test

import (
	"testing"
	"time"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// TestLeadSweepReadsPositionsAndRecordsItsChecks: the sweep pages through
// the sites with a position in id order, learns which leads are stored,
// and a check moves a site's last-seen time forward only for the sync it
// read and only forward.
func TestLeadSweepReadsPositionsAndRecordsItsChecks(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		for _, site := range []string{"site_c", "site_a", "site_b"} {
			pos := store.LeadSyncPosition{Resume: cursor(t, "p1"), Done: true, Pages: 1, Leads: 2, LastPageAt: time.Now()}
			if _, err := s.UpsertLeadsAt(ctx, site, "sync-"+site, leads(site+"_lead_1", site+"_lead_2"), pos); err != nil {
				t.Fatal(err)
			}
		}
		first, err := s.LeadSweepSites(ctx, "", 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(first) != 2 || first[0].SiteID != "site_a" || first[1].SiteID != "site_b" {
			t.Fatalf("first batch = %+v; want site_a, site_b", first)
		}
		if first[0].SyncKey != "sync-site_a" || !first[0].Position.Done || first[0].Position.Resume == nil || first[0].Undecodable {
			t.Errorf("site_a's row = %+v; want its key and decoded position", first[0])
		}
		rest, err := s.LeadSweepSites(ctx, first[1].SiteID, 2)
		if err != nil || len(rest) != 1 || rest[0].SiteID != "site_c" {
			t.Fatalf("second batch = %+v, %v; want site_c alone", rest, err)
		}
		if none, err := s.LeadSweepSites(ctx, "site_c", 2); err != nil || len(none) != 0 {
			t.Fatalf("after the last site: %+v, %v; want nothing", none, err)
		}

		if n, err := s.KnownLeads(ctx, "site_a", []string{"site_a_lead_1", "site_a_lead_9", "site_b_lead_1"}); err != nil || n != 1 {
			t.Errorf("known leads of site_a = %d, %v; want 1 (another site's lead is not site_a's)", n, err)
		}
		if n, err := s.KnownLeads(ctx, "site_a", nil); err != nil || n != 0 {
			t.Errorf("known of no ids = %d, %v; want 0", n, err)
		}

		before, err := s.LeadSyncLastSeen(ctx, "site_a")
		if err != nil {
			t.Fatal(err)
		}
		later := before.Add(time.Hour)
		if err := s.LeadSyncChecked(ctx, "site_a", "another-sync", later); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.LeadSyncLastSeen(ctx, "site_a"); !got.Equal(before) {
			t.Errorf("a check of another sync moved the position to %s; want it left at %s", got, before)
		}
		if err := s.LeadSyncChecked(ctx, "site_a", "sync-site_a", later); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.LeadSyncLastSeen(ctx, "site_a"); !got.Equal(later) {
			t.Errorf("after the check the site was last seen %s; want %s", got, later)
		}
		if err := s.LeadSyncChecked(ctx, "site_a", "sync-site_a", before); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.LeadSyncLastSeen(ctx, "site_a"); !got.Equal(later) {
			t.Errorf("an older check moved the position back to %s; want %s", got, later)
		}
		if stale, total, err := s.StaleLeadSyncs(ctx, later, 10); err != nil || total != 2 || len(stale) != 2 {
			t.Errorf("stale before the check's time: %+v (%d), %v; want site_b and site_c, not the checked site_a", stale, total, err)
		}
	})
}

// TestLeadSweepFailures: a failing site is recorded with its reason, a
// second failure keeps its first time and counts, the sweep's listing of
// sites says which are failing, a successful read clears it, and the
// overview's read lists the recent ones, the longest failing first.
func TestLeadSweepFailures(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		t0 := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
		for _, site := range []string{"site_a", "site_b", "site_c"} {
			if _, err := s.UpsertLeadsAt(ctx, site, "sync-"+site, nil, store.LeadSyncPosition{Done: true, LastPageAt: t0}); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range []struct {
			site, reason string
			at           time.Time
		}{
			{"site_b", "http_500", t0},
			{"site_c", "network", t0.Add(time.Minute)},
			{"site_b", "timeout", t0.Add(time.Hour)},
			{"site_gone", "http_500", t0.Add(-48 * time.Hour)},
		} {
			if err := s.RecordLeadSweepFailure(ctx, f.site, f.reason, f.at); err != nil {
				t.Fatal(err)
			}
		}
		sites, err := s.LeadSweepSites(ctx, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		failing := map[string]bool{}
		for _, site := range sites {
			failing[site.SiteID] = site.Failing
		}
		if len(sites) != 3 || failing["site_a"] || !failing["site_b"] || !failing["site_c"] {
			t.Errorf("the sweep's sites say failing %v; want site_b and site_c", failing)
		}
		got, total, err := s.LeadSweepFailures(ctx, t0.Add(-24*time.Hour), 10)
		if err != nil {
			t.Fatal(err)
		}
		want := []store.LeadSweepFailure{
			{SiteID: "site_b", Reason: "timeout", Since: t0, LastAt: t0.Add(time.Hour), Failures: 2},
			{SiteID: "site_c", Reason: "network", Since: t0.Add(time.Minute), LastAt: t0.Add(time.Minute), Failures: 1},
		}
		if total != 2 || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("the recent failures: %+v (%d in all);\nwant %+v (2)", got, total, want)
		}
		if got, total, err := s.LeadSweepFailures(ctx, t0.Add(-24*time.Hour), 1); err != nil || total != 2 || len(got) != 1 || got[0].SiteID != "site_b" {
			t.Errorf("one of them: %+v (%d in all), %v; want site_b of 2", got, total, err)
		}
		if err := s.ClearLeadSweepFailure(ctx, "site_b"); err != nil {
			t.Fatal(err)
		}
		if got, total, err := s.LeadSweepFailures(ctx, t0.Add(-24*time.Hour), 10); err != nil || total != 1 || len(got) != 1 || got[0].SiteID != "site_c" {
			t.Errorf("after site_b read again: %+v (%d in all), %v; want site_c alone", got, total, err)
		}
	})
}
