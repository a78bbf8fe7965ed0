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
