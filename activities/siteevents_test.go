package activities

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

func TestSiteEventsAnswersWhatTheInboxHolds(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	a := New(Options{Store: st, Now: time.Now})
	at := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	for i, ev := range []struct{ id, typ, data string }{
		{"evt_k2", "knowledge.ready", `{"site_id":"site_1","knowledge_id":"kn_2"}`},
		{"evt_k2_again", "knowledge.ready", `{"site_id":"site_1","knowledge_id":"kn_2"}`}, // sent again under a new id
		{"evt_pub", "site.published", `{"site_id":"site_1","status":"published"}`},
		{"evt_unpub", "site.unpublished", `{"site_id":"site_1","status":"draft"}`},
		{"evt_k3", "knowledge.ready", `{"site_id":"site_1","knowledge_id":"kn_3"}`}, // not this run's source
		{"evt_k1_other", "knowledge.ready", `{"site_id":"site_2","knowledge_id":"kn_1"}`},
	} {
		body := fmt.Sprintf(`{"id":%q,"type":%q,"created_at":"2026-11-21T09:00:00.000Z","data":%s}`, ev.id, ev.typ, ev.data)
		rec := store.InboxEvent{EventID: ev.id, EventType: ev.typ, EndpointID: "we_1", ReceivedAt: at.Add(time.Duration(i) * time.Second), Body: []byte(body)}
		if _, err := st.RecordEvent(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name      string
		in        SiteEventsInput
		wantReady []string
		wantLast  string
	}{
		{"the asked sources, in the order asked, each once", SiteEventsInput{SiteID: "site_1", KnowledgeIDs: []string{"kn_1", "kn_2", "", "kn_2"}}, []string{"kn_2"}, "evt_unpub"},
		{"another site's events are not this one's", SiteEventsInput{SiteID: "site_2", KnowledgeIDs: []string{"kn_1", "kn_2"}}, []string{"kn_1"}, ""},
		{"a site with no events", SiteEventsInput{SiteID: "site_3", KnowledgeIDs: []string{"kn_1"}}, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := a.SiteEvents(t.Context(), tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Ready, tc.wantReady) || got.LastSiteEventID != tc.wantLast {
				t.Errorf("SiteEvents(%+v) = %+v; want ready %v, last site event %q", tc.in, got, tc.wantReady, tc.wantLast)
			}
			if tc.wantLast == "evt_unpub" && got.LastSiteEvent != "site.unpublished" {
				t.Errorf("last site event type = %q; want site.unpublished", got.LastSiteEvent)
			}
		})
	}
}

// TestSiteEventsTakesEveryTypeItReads checks that each type the store
// reads for an onboarding (store.SiteEventTypes) changes SiteEvents'
// answer: a type added to that list without its case here would be read
// and dropped.
func TestSiteEventsTakesEveryTypeItReads(t *testing.T) {
	for i, typ := range store.SiteEventTypes {
		t.Run(typ, func(t *testing.T) {
			st := storetest.Open(t, store.SQLite)
			a := New(Options{Store: st, Now: time.Now})
			id := fmt.Sprintf("evt_%d", i)
			body := fmt.Sprintf(`{"id":%q,"type":%q,"created_at":"2026-11-21T09:00:00.000Z","data":{"site_id":"site_1","knowledge_id":"kn_1","status":"published"}}`, id, typ)
			if _, err := st.RecordEvent(t.Context(), store.InboxEvent{EventID: id, EventType: typ, EndpointID: "we_1", ReceivedAt: time.Now(), Body: []byte(body)}); err != nil {
				t.Fatal(err)
			}
			got, err := a.SiteEvents(t.Context(), SiteEventsInput{SiteID: "site_1", KnowledgeIDs: []string{"kn_1"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Ready) == 0 && got.LastSiteEventID == "" {
				t.Errorf("an inbox holding only a %s of the site: SiteEvents answered %+v, as if it held nothing", typ, got)
			}
		})
	}
}
