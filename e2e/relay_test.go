package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/webhookingress"
	"github.com/siteops/siteops/workflows"
)

// TestRelayOutcomes routes one event of each kind through the relay to the
// real Temporal server and checks how each was handled.
func TestRelayOutcomes(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	// A finished onboarding owns site_1; nothing owns site_9.
	run, err := e.starter.Onboard(t.Context(), prepare(t, "../examples/bayside-dental.json", "bayside"))
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.OnboardingResult
	if err := run.Get(ctxWithin(t, time.Minute), &res); err != nil {
		t.Fatal(err)
	}
	events := []struct {
		id, typ, data, want string
	}{
		{"evt_r1", "lead.created", `{"site_id":"site_1","lead_id":"lead_1"}`, webhookingress.OutcomeSignalled},
		{"evt_r2", "knowledge.ready", `{"site_id":"site_9","knowledge_id":"kn_1"}`, webhookingress.OutcomeNoTarget},
		{"evt_r3", "knowledge.ready", `{"site_id":"` + res.SiteID + `","knowledge_id":"kn_1"}`, webhookingress.OutcomeTargetGone},
		{"evt_r4", "site.unpublished", `{"site_id":"` + res.SiteID + `","status":"draft"}`, webhookingress.OutcomeTargetGone},
		{"evt_r5", "conversation.started", `{"site_id":"site_1","conversation_id":"conv_1"}`, webhookingress.OutcomeIgnored},
		{"evt_r6", "broadcast.sent", `{"site_id":"site_1"}`, webhookingress.OutcomeIgnored},
		{"evt_r7", "domain.activated", `{}`, webhookingress.OutcomeIgnored},
		{"evt_r8", "lead.scored", `{"site_id":"site_1"}`, webhookingress.OutcomeIgnored},
		{"evt_r9", "lead.created", `{"lead_id":"lead_2"}`, webhookingress.OutcomeMalformed},
		{"verified:we_7", store.EndpointVerifiedType, `{"endpoint_id":"we_7","event_id":"evt_x"}`, webhookingress.OutcomeNoTarget},
	}
	for _, ev := range events {
		body := fmt.Sprintf(`{"id":%q,"type":%q,"created_at":"2026-11-21T09:00:00.000Z","data":%s}`, ev.id, ev.typ, ev.data)
		endpoint := "env"
		if ev.typ == store.EndpointVerifiedType {
			endpoint = "we_7"
		}
		if _, err := e.store.RecordEvent(t.Context(), store.InboxEvent{EventID: ev.id, EventType: ev.typ, EndpointID: endpoint, ReceivedAt: time.Now().Add(-time.Second), Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	relay := &webhookingress.Relay{Store: e.store, Temporal: e.client, TaskQueue: taskQueue}
	if n, err := relay.DispatchOnce(t.Context()); err != nil || n != len(events) {
		t.Fatalf("DispatchOnce = %d, %v", n, err)
	}
	for _, ev := range events {
		got, attempts, err := e.store.InboxOutcome(t.Context(), ev.id)
		if err != nil || got != ev.want || attempts != 1 {
			t.Errorf("%s (%s): outcome %q after %d attempts, %v; want %q", ev.id, ev.typ, got, attempts, err, ev.want)
		}
	}
	_ = e.client.TerminateWorkflow(t.Context(), workflows.LeadSyncID("site_1"), "", "test over")
}
