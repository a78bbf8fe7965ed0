package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

func TestLeadSiteSyncsCountEachSyncOnceAndKeepTheLatest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		if _, err := s.LeadSiteSyncs(ctx, "site_1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("LeadSiteSyncs of a site never synced = %v; want ErrNotFound", err)
		}
		at := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
		// The record counts the site's leads in the store.
		if _, err := s.UpsertLeads(ctx, "site_1", []agentsite.Lead{{ID: "lead_1", SiteID: "site_1", Raw: []byte(`{"id":"lead_1"}`)}}); err != nil {
			t.Fatal(err)
		}
		first := store.LeadSiteSync{SiteID: "site_1", Key: "k1", Order: 1, Events: 3, Duplicates: 1, CaughtUp: true, At: at}
		// The second record of k1 is a retried activity's: it counts once.
		for range 2 {
			if err := s.RecordLeadSiteSync(ctx, first); err != nil {
				t.Fatal(err)
			}
		}
		failed := store.LeadSiteSync{SiteID: "site_1", Key: "k2", Order: 3, Events: 2, Error: "throttled", At: at.Add(time.Minute)}
		if err := s.RecordLeadSiteSync(ctx, failed); err != nil {
			t.Fatal(err)
		}
		// An attempt of a sync scheduled before k2 that records late (it
		// outlived its timeout) changes nothing.
		late := store.LeadSiteSync{SiteID: "site_1", Key: "k1b", Order: 2, Events: 9, CaughtUp: true, At: at.Add(2 * time.Minute)}
		if err := s.RecordLeadSiteSync(ctx, late); err != nil {
			t.Fatal(err)
		}
		got, err := s.LeadSiteSyncs(ctx, "site_1")
		if err != nil {
			t.Fatal(err)
		}
		want := store.LeadSiteSyncs{Events: 5, Duplicates: 1, Syncs: 1, Leads: 1, LastError: "throttled", LastSyncAt: at.Add(time.Minute)}
		if got != want {
			t.Errorf("LeadSiteSyncs = %+v; want %+v", got, want)
		}
		if err := s.RecordLeadSiteSync(ctx, store.LeadSiteSync{SiteID: "site_1"}); err == nil {
			t.Error("a sync without a key was recorded")
		}
	})
}

func TestLeadSyncFromIsThePositionOfWhicheverSyncWroteLast(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		if c, err := s.LeadSyncFrom(ctx, "site_1"); err != nil || c != nil {
			t.Fatalf("LeadSyncFrom of a site never synced = %v, %v; want the start", c, err)
		}
		last, next := cursor(t, "c_last"), cursor(t, "c_next")
		lead := []agentsite.Lead{{ID: "lead_1", SiteID: "site_1", Raw: []byte(`{"id":"lead_1"}`)}}
		// Mid-way: the first page not stored.
		if _, err := s.UpsertLeadsAt(ctx, "site_1", "a", lead, store.LeadSyncPosition{Resume: last, Next: next}); err != nil {
			t.Fatal(err)
		}
		if c, err := s.LeadSyncFrom(ctx, "site_1"); err != nil || c == nil || *c != *next {
			t.Errorf("LeadSyncFrom mid-way = %v, %v; want %v", c, err, next)
		}
		// At the end, by another sync: the last page stored, read again.
		if _, err := s.UpsertLeadsAt(ctx, "site_1", "b", nil, store.LeadSyncPosition{Resume: last, Done: true}); err != nil {
			t.Fatal(err)
		}
		if c, err := s.LeadSyncFrom(ctx, "site_1"); err != nil || c == nil || *c != *last {
			t.Errorf("LeadSyncFrom at the end = %v, %v; want %v", c, err, last)
		}
	})
}
