package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/overview"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
)

// TestOverviewShowsEverythingOpen puts one of each thing on-call must see
// in a namespace and a store — an open embed incident, a lead sync that
// stored nothing for an hour, a dead letter and an event pending for ten
// minutes (no relay runs here), a stored secret, refused deliveries — and
// reads them with the
// built binary: `siteops overview` in text and JSON, each list in JSON
// lines, and the overview again with Temporal out of reach, which still
// shows what the store holds and names what it could not read.
func TestOverviewShowsEverythingOpen(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	ctx := t.Context()
	api, err := agentsite.NewClient(e.SimURL, e.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	site := func(slug string) string {
		cs, err := api.CreateSite(ctx, "overview-"+slug, agentsite.NewSite{Title: slug, Slug: slug, Type: "business", Template: "minimal"})
		if err != nil {
			t.Fatal(err)
		}
		return cs.Site.ID
	}
	incidentSite, leadSite := site("incident"), site("leads")
	if out, err := e.siteops(t, "embed", "off", "--site", incidentSite, "--reason", "found on an unknown site"); err != nil {
		t.Fatalf("embed off: %v\n%s", err, out)
	}
	if _, err := e.Sim.CreateLeads(leadSite, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Starter.SyncLeads(ctx, leadSite, false); err != nil {
		t.Fatal(err)
	}
	siteopstest.EventuallyNil(t, time.Minute, "the lead sync to store its page", func() error {
		_, err := e.Store.LeadSyncLastSeen(ctx, leadSite)
		return err
	})
	twoHoursAgo := time.Now().Add(-2 * time.Hour).UTC() // past the default lag-after of 90 minutes
	if _, err := e.Store.DB().ExecContext(ctx, `UPDATE lead_sync_positions SET updated_at = $1 WHERE site_id = $2`, twoHoursAgo, leadSite); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []store.InboxEvent{
		{EventID: "evt_overview_dead", EventType: "lead.created", ReceivedAt: time.Now().Add(-2 * time.Hour), Body: []byte(`{}`)},
		{EventID: "evt_overview_pending", EventType: "lead.created", ReceivedAt: time.Now().Add(-10 * time.Minute), Body: []byte(`{}`)},
	} {
		if _, err := e.Store.RecordEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Store.MarkDispatchedBatch(ctx, map[string][]string{store.OutcomeDead: {"evt_overview_dead"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.PutSecret(ctx, "we_overview", "main", agentsite.NewSigningSecret("whsec_overview_test_secret_value")); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := e.Store.RecordRefusals(ctx, []store.RefusedDelivery{{Minute: now.Truncate(time.Minute), Receiver: "v2", Reason: "invalid_signature", Status: 401, Count: 7, FirstAt: now, LastAt: now}}); err != nil {
		t.Fatal(err)
	}
	withKey := []string{"SITEOPS_SECRET_KEY=" + testSecretKey()}

	text, code := e.run(t, withKey, "overview")
	for _, want := range []string{
		"EMBED INCIDENTS OPEN (1)", incidentSite, "off", "siteops embed on --site " + incidentSite,
		"LEAD SYNCS LAGGING OR FAILED", leadSite, "lagging", "siteops leads sync --site " + leadSite,
		"1 dead letters", "siteops events replay --outcome dead", "events pending",
		"DELIVERIES REFUSED IN THE LAST HOUR", "invalid_signature", "siteops events list --refused --receiver v2",
		"UNAVAILABLE", "endpoints",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("siteops overview lacks %q:\n%s", want, text)
		}
	}
	if code != 0 {
		t.Errorf("siteops overview exited %d, want 0:\n%s", code, text)
	}

	stdout, stderr, code := e.runSplit(t, withKey, "", "overview", "-o", "json")
	var r overview.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || code != 0 {
		t.Fatalf("overview -o json: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	if len(r.Incidents) != 1 || r.Incidents[0].SiteID != incidentSite || r.Incidents[0].State != "off" || r.Incidents[0].Operator != "oncall-e2e" ||
		r.Incidents[0].Reason != "found on an unknown site" || r.Incidents[0].Next == "" {
		t.Errorf("incidents = %+v", r.Incidents)
	}
	if len(r.LeadSyncs.Lagging) != 1 || r.LeadSyncs.Lagging[0].SiteID != leadSite || r.LeadSyncs.Lagging[0].LastSyncedAt.Sub(twoHoursAgo).Abs() > time.Millisecond || r.LeadSyncs.Running != 1 {
		t.Errorf("lead syncs = %+v; want %s lagging since %s, 1 running", r.LeadSyncs, leadSite, twoHoursAgo)
	}
	if len(r.Refused) != 1 || r.Refused[0].Receiver != "v2" || r.Refused[0].Count != 7 || r.Refused[0].Reason != "invalid_signature" {
		t.Errorf("refused = %+v", r.Refused)
	}
	if r.Inbox == nil || r.Inbox.Dead != 1 || r.Inbox.Pending != 1 || !r.Inbox.Behind {
		t.Errorf("inbox = %+v; want 1 dead letter, 1 event pending, behind", r.Inbox)
	}
	if strings.Contains(stdout, "0001-01-01") {
		t.Errorf("an empty time is written as the zero time:\n%s", stdout)
	}

	lines := func(args ...string) []map[string]any {
		t.Helper()
		stdout, stderr, code := e.runSplit(t, withKey, "", append(args, "-o", "jsonl")...)
		if code != 0 {
			t.Fatalf("siteops %v -o jsonl: exit %d\n%s%s", args, code, stdout, stderr)
		}
		var out []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
			if l == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("siteops %v -o jsonl: line %q is not one JSON object: %v", args, l, err)
			}
			out = append(out, m)
		}
		return out
	}
	if l := lines("embed", "list"); len(l) != 1 || l[0]["site_id"] != incidentSite || l[0]["state"] != "off" {
		t.Errorf("embed list = %v", l)
	}
	if l := lines("secret", "list"); len(l) != 1 || l[0]["endpoint_id"] != "we_overview" || l[0]["state"] != "active" || l[0]["receiver"] != "main" {
		t.Errorf("secret list = %v", l)
	}
	if l := lines("leads", "list"); len(l) != 1 || l[0]["site_id"] != leadSite || l[0]["state"] != "lagging" {
		t.Errorf("leads list = %v", l)
	}
	if out, _, _ := e.runSplit(t, withKey, "", "secret", "list", "-o", "json"); strings.Contains(out, "whsec_") {
		t.Error("secret list printed a secret")
	}

	// Temporal out of reach: the store's parts are still shown, and what
	// could not be read is named.
	down := append(withKey, "TEMPORAL_ADDRESS=127.0.0.1:1")
	text, code = e.run(t, down, "overview")
	for _, want := range []string{"1 dead letters", "UNAVAILABLE", "incidents", "127.0.0.1:1"} {
		if !strings.Contains(text, want) {
			t.Errorf("siteops overview with Temporal down lacks %q:\n%s", want, text)
		}
	}
	if code != 0 {
		t.Errorf("siteops overview with Temporal down exited %d, want 0 (a view, not a check):\n%s", code, text)
	}
}
