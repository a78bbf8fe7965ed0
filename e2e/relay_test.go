package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/relay"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// TestRelayOutcomes routes one event of each kind through the relay to the
// real Temporal server and checks how each was handled.
func TestRelayOutcomes(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	// A finished onboarding owns site_1; nothing owns site_9.
	res := e.onboard(t, prepare(t, "../examples/bayside-dental.json", "bayside"), time.Minute)
	events := []struct {
		id, typ, data, want string
	}{
		{"evt_r1", "lead.created", `{"site_id":"site_1","lead_id":"lead_1"}`, store.OutcomeSignalled},
		{"evt_r2", "knowledge.ready", `{"site_id":"site_9","knowledge_id":"kn_1"}`, store.OutcomeNoTarget},
		{"evt_r3", "knowledge.ready", `{"site_id":"` + res.SiteID + `","knowledge_id":"kn_1"}`, store.OutcomeTargetGone},
		{"evt_r4", "site.unpublished", `{"site_id":"` + res.SiteID + `","status":"draft"}`, store.OutcomeTargetGone},
		{"evt_r5", "conversation.started", `{"site_id":"site_1","conversation_id":"conv_1"}`, store.OutcomeIgnored},
		{"evt_r6", "broadcast.sent", `{"site_id":"site_1"}`, store.OutcomeIgnored},
		{"evt_r7", "domain.activated", `{}`, store.OutcomeIgnored},
		{"evt_r8", "lead.scored", `{"site_id":"site_1"}`, store.OutcomeIgnored},
		{"evt_r9", "lead.created", `{"lead_id":"lead_2"}`, store.OutcomeMalformed},
	}
	for _, ev := range events {
		body := fmt.Sprintf(`{"id":%q,"type":%q,"created_at":"2026-11-21T09:00:00.000Z","data":%s}`, ev.id, ev.typ, ev.data)
		rec := store.InboxEvent{EventID: ev.id, EventType: ev.typ, Lane: relay.LaneFor(ev.typ), EndpointID: "env", ReceivedAt: time.Now().Add(-time.Second), Body: []byte(body)}
		if _, err := e.Store.RecordEvent(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
	}
	// An endpoint verification that no rotation waits for.
	if err := e.Store.PutSecret(t.Context(), "we_7", "v7", agentsite.NewSigningSecret("whsec_7")); err != nil {
		t.Fatal(err)
	}
	if first, err := e.Store.MarkEndpointVerified(t.Context(), "we_7", "evt_x", store.LanePriority); err != nil || !first {
		t.Fatal(first, err)
	}
	events = append(events, struct{ id, typ, data, want string }{"verified:we_7", "", "", store.OutcomeNoTarget})
	rl := relay.New(relay.Options{Store: e.Store, Temporal: e.Client, TaskQueue: taskQueue})
	n := 0
	for _, lane := range []store.Lane{store.LanePriority, store.LaneBulk} {
		k, err := rl.DispatchOnce(t.Context(), lane)
		if err != nil {
			t.Fatal(err)
		}
		n += k
	}
	if n != len(events) {
		t.Fatalf("dispatched %d, want %d", n, len(events))
	}
	for _, ev := range events {
		got, attempts, err := e.Store.InboxOutcome(t.Context(), ev.id)
		if err != nil || got != ev.want || attempts != 1 {
			t.Errorf("%s (%s): outcome %q after %d attempts, %v; want %q", ev.id, ev.typ, got, attempts, err, ev.want)
		}
	}
	_ = e.Client.TerminateWorkflow(t.Context(), workflows.LeadSyncID("site_1"), "", "test over")
}
