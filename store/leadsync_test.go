package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

func cursor(t *testing.T, token string) *agentsite.Cursor {
	t.Helper()
	var c agentsite.Cursor
	if err := json.Unmarshal(fmt.Appendf(nil, `{"site_id":"site_1","token":%q}`, token), &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

func leads(ids ...string) []agentsite.Lead {
	out := make([]agentsite.Lead, len(ids))
	for i, id := range ids {
		out[i] = agentsite.Lead{ID: id, Raw: json.RawMessage(`{"id":"` + id + `"}`)}
	}
	return out
}

// TestLeadSyncPositionIsStoredWithItsPage: the position is written with
// the page, in its transaction, and only with it.
func TestLeadSyncPositionIsStoredWithItsPage(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		at := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
		first := store.LeadSyncPosition{Resume: cursor(t, "p1"), Next: cursor(t, "p2"), Pages: 1, Leads: 2, LastPageAt: at}
		fresh, err := s.UpsertLeadsAt(t.Context(), "site_1", "sync-a", leads("lead_1", "lead_2"), first)
		if err != nil || fresh != 2 {
			t.Fatalf("first page: %d new, %v; want 2 new", fresh, err)
		}
		// The second page holds a lead already stored: New grows by one.
		second := store.LeadSyncPosition{Resume: cursor(t, "p2"), Next: nil, Done: true, Pages: 2, Leads: 4, New: 2, LastPageAt: at.Add(time.Second)}
		if fresh, err := s.UpsertLeadsAt(t.Context(), "site_1", "sync-a", leads("lead_2", "lead_3"), second); err != nil || fresh != 1 {
			t.Fatalf("second page: %d new, %v; want 1 new", fresh, err)
		}
		got, err := s.LeadSyncPosition(t.Context(), "site_1", "sync-a")
		if err != nil {
			t.Fatal(err)
		}
		want := second
		want.New = 3
		if got.Pages != want.Pages || got.Leads != want.Leads || got.New != want.New || !got.Done || got.Next != nil ||
			got.Resume == nil || *got.Resume != *want.Resume || !got.LastPageAt.Equal(want.LastPageAt) {
			t.Errorf("position = %+v; want %+v", got, want)
		}

		// A page that fails to store leaves the position where it was.
		broken := store.LeadSyncPosition{Resume: cursor(t, "p3"), Next: cursor(t, "p4"), Pages: 3, Leads: 5, New: 3}
		if _, err := s.UpsertLeadsAt(t.Context(), "site_1", "sync-a", []agentsite.Lead{{ID: "lead_4", Raw: json.RawMessage(`{}`)}, {Raw: json.RawMessage(`{}`)}}, broken); err == nil {
			t.Fatal("a page with a lead without an id was stored")
		}
		if got, err := s.LeadSyncPosition(t.Context(), "site_1", "sync-a"); err != nil || got.Pages != 2 {
			t.Errorf("after a failed page the position is %+v, %v; want the second page's", got, err)
		}
		if n, _ := s.CountLeads(t.Context(), "site_1"); n != 3 {
			t.Errorf("store holds %d leads; want 3 (the failed page's lead_4 rolled back)", n)
		}

		// Another sync's key finds nothing; its first page replaces the
		// site's position.
		if _, err := s.LeadSyncPosition(t.Context(), "site_1", "sync-b"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("position of sync-b before it stored a page: %v; want ErrNotFound", err)
		}
		if _, err := s.UpsertLeadsAt(t.Context(), "site_1", "sync-b", nil, store.LeadSyncPosition{Next: cursor(t, "p9"), Pages: 1}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.LeadSyncPosition(t.Context(), "site_1", "sync-b"); err != nil || got.Pages != 1 || got.New != 0 {
			t.Errorf("position of sync-b = %+v, %v; want its empty first page", got, err)
		}
		if _, err := s.LeadSyncPosition(t.Context(), "site_1", "sync-a"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("position of sync-a after sync-b's page: %v; want ErrNotFound", err)
		}
		if _, err := s.UpsertLeadsAt(t.Context(), "site_1", "", nil, store.LeadSyncPosition{}); err == nil {
			t.Error("a position without a sync key was stored; want an error naming the key")
		}
	})
}
