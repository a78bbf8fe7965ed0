package store_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

func TestSiteEventsReadsOneSitesEvents(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		at := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
		record := func(id, typ, body string, lane store.Lane, after time.Duration) {
			t.Helper()
			ev := store.InboxEvent{EventID: id, EventType: typ, Lane: lane, EndpointID: "we_1", ReceivedAt: at.Add(after), Body: []byte(body)}
			if _, err := s.RecordEvent(t.Context(), ev); err != nil {
				t.Fatal(err)
			}
		}
		envelope := func(id, typ, data string) string {
			return fmt.Sprintf(`{"id":%q,"type":%q,"created_at":"2026-11-21T09:00:00.000Z","data":%s}`, id, typ, data)
		}
		// Recorded out of order: the answer is oldest first.
		record("evt_pub", "site.published", envelope("evt_pub", "site.published", `{"site_id":"site_1","status":"published"}`), store.LanePriority, 3*time.Second)
		record("evt_k1", "knowledge.ready", envelope("evt_k1", "knowledge.ready", `{"site_id":"site_1","knowledge_id":"kn_1"}`), store.LanePriority, time.Second)
		// Spaced JSON, as another sender may write it.
		record("evt_k2", "knowledge.ready", `{"id": "evt_k2", "type": "knowledge.ready", "data": {"knowledge_id": "kn_2", "site_id": "site_1"}}`, store.LanePriority, 2*time.Second)
		// Another site whose id contains this one's, and one that only
		// mentions it elsewhere.
		record("evt_other", "knowledge.ready", envelope("evt_other", "knowledge.ready", `{"site_id":"site_10","knowledge_id":"kn_9"}`), store.LanePriority, 0)
		record("evt_mention", "knowledge.ready", envelope("evt_mention", "knowledge.ready", `{"site_id":"site_2","knowledge_id":"site_1"}`), store.LanePriority, 0)
		// Types nothing waits on, and a body that is not an envelope.
		record("evt_lead", "lead.created", envelope("evt_lead", "lead.created", `{"site_id":"site_1","lead_id":"lead_1"}`), store.LaneBulk, 0)
		if _, err := s.RecordHandled(t.Context(), store.InboxEvent{EventID: "evt_bad", EventType: "knowledge.ready", EndpointID: "we_1", ReceivedAt: at, Body: []byte(`"site_1"`)}, "malformed", "not an envelope"); err != nil {
			t.Fatal(err)
		}

		got, err := s.SiteEvents(t.Context(), "site_1")
		if err != nil {
			t.Fatal(err)
		}
		want := []store.SiteEvent{
			{EventID: "evt_k1", EventType: "knowledge.ready", KnowledgeID: "kn_1"},
			{EventID: "evt_k2", EventType: "knowledge.ready", KnowledgeID: "kn_2"},
			{EventID: "evt_pub", EventType: "site.published", Status: "published"},
		}
		if len(got) != len(want) {
			t.Fatalf("SiteEvents(site_1) = %+v; want %d events: %+v", got, len(want), want)
		}
		for i := range want {
			g := got[i]
			g.ReceivedAt = time.Time{}
			if g != want[i] {
				t.Errorf("event %d = %+v; want %+v", i, g, want[i])
			}
		}
		if !got[0].ReceivedAt.Equal(at.Add(time.Second)) {
			t.Errorf("received_at of evt_k1 = %s; want %s", got[0].ReceivedAt, at.Add(time.Second))
		}
		if none, err := s.SiteEvents(t.Context(), "site_404"); err != nil || len(none) != 0 {
			t.Errorf("SiteEvents(site_404) = %+v, %v; want none", none, err)
		}
		if _, err := s.SiteEvents(t.Context(), ""); err == nil {
			t.Error("SiteEvents(\"\") answered; want an error naming the missing id")
		}
	})
}

// TestSiteEventTypesAreTheIndexs checks that the types SiteEvents reads are
// those the partial index inbox_site_events holds, in both dialects'
// migrations: a type added to SiteEventTypes without a migration that
// rebuilds the index would be read by a scan of the whole inbox.
func TestSiteEventTypesAreTheIndexs(t *testing.T) {
	in := regexp.MustCompile(`WHERE event_type IN \(([^)]*)\)`)
	for _, dialect := range []string{"sqlite", "postgres"} {
		path := filepath.Join("migrations", dialect, "00007_inbox_site_events.sql")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m := in.FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s: no IN list of event types", path)
		}
		var indexed []string
		for _, q := range strings.Split(string(m[1]), ",") {
			indexed = append(indexed, strings.Trim(strings.TrimSpace(q), "'"))
		}
		if !slices.Equal(indexed, store.SiteEventTypes) {
			t.Errorf("%s indexes %q; SiteEvents reads %q", path, indexed, store.SiteEventTypes)
		}
	}
}
