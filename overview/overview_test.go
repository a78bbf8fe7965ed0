package overview

import (
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// Without Temporal or the API, the overview still reads the store and
// names what it could not read, with why.
func TestGatherWithTheStoreAlone(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		now := time.Now()
		if _, err := st.RecordEvent(ctx, store.InboxEvent{EventID: "evt_dead", EventType: "lead.created", ReceivedAt: now.Add(-time.Hour), Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if err := st.MarkDispatchedBatch(ctx, map[string][]string{store.OutcomeDead: {"evt_dead"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.UpsertLeadsAt(ctx, "site_1", "k1", nil, store.LeadSyncPosition{}); err != nil {
			t.Fatal(err)
		}
		r := Gather(ctx, Options{Store: st, NoTemporal: "Temporal at 127.0.0.1:1 is unavailable", Now: func() time.Time { return now.Add(2 * time.Hour) }})
		if r.Inbox == nil || r.Inbox.Dead != 1 || !strings.Contains(r.Inbox.Next, "siteops events replay --outcome dead") {
			t.Errorf("inbox = %+v", r.Inbox)
		}
		// Without Temporal a stale position cannot be checked against a
		// running workflow: it is listed.
		if len(r.LeadSyncs.Lagging) != 1 || r.LeadSyncs.Lagging[0].SiteID != "site_1" || r.LeadSyncs.Stale != 1 {
			t.Errorf("lead syncs = %+v", r.LeadSyncs)
		}
		parts := map[string]string{}
		for _, u := range r.Unavailable {
			parts[u.Part] = u.Reason
		}
		for _, p := range []string{"incidents", "rotations", "lead syncs", "endpoints"} {
			if parts[p] == "" {
				t.Errorf("%s not named unavailable: %v", p, r.Unavailable)
			}
		}
		if !strings.Contains(parts["incidents"], "127.0.0.1:1") {
			t.Errorf("the reason does not say why: %q", parts["incidents"])
		}
		if r.Clear() {
			t.Error("a report with a dead letter is clear")
		}
	})
}

// A secret list tells active, retiring and retired secrets apart and
// filters by state and receiver.
func TestListSecretsStates(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		for _, id := range []string{"we_active", "we_retiring", "we_retired"} {
			if err := st.PutSecret(ctx, id, "main", agentsite.NewSigningSecret("whsec_"+id+"_0123456789")); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.RetireSecret(ctx, "we_retiring", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Retire(ctx, "we_retired", time.Now().Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		all, err := ListSecrets(ctx, Options{Store: st}, SecretFilter{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, s := range all {
			got[s.EndpointID] = s.State
		}
		want := map[string]string{"we_active": SecretActive, "we_retiring": SecretRetiring, "we_retired": SecretRetired}
		for id, state := range want {
			if got[id] != state {
				t.Errorf("%s is %q, want %q (all: %v)", id, got[id], state, got)
			}
		}
		only, err := ListSecrets(ctx, Options{Store: st}, SecretFilter{State: SecretRetiring})
		if err != nil || len(only) != 1 || only[0].EndpointID != "we_retiring" {
			t.Errorf("--state retiring = %+v, %v", only, err)
		}
		if none, err := ListSecrets(ctx, Options{Store: st}, SecretFilter{Receiver: "other"}); err != nil || len(none) != 0 {
			t.Errorf("--receiver other = %+v, %v", none, err)
		}
		if _, err := ListSecrets(ctx, Options{Store: st}, SecretFilter{State: "bogus"}); err == nil {
			t.Error("an unknown state was accepted")
		}
	})
}

// The sites the lead sweep could not read in the last day are listed with
// their reason and the command to run next, and keep the report from
// being clear; one whose last failure is older is not.
func TestGatherShowsTheSitesTheSweepCannotRead(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
		if err := st.RecordLeadSweepFailure(ctx, "site_bad", "http_500", now.Add(-2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := st.RecordLeadSweepFailure(ctx, "site_bad", "http_500", now.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := st.RecordLeadSweepFailure(ctx, "site_long_ago", "network", now.Add(-48*time.Hour)); err != nil {
			t.Fatal(err)
		}
		r := Gather(ctx, Options{Store: st, Now: func() time.Time { return now }})
		got := r.LeadSyncs.SweepFailing
		if len(got) != 1 || r.LeadSyncs.SweepFailingTotal != 1 {
			t.Fatalf("sweep failing = %+v (%d in all); want site_bad alone", got, r.LeadSyncs.SweepFailingTotal)
		}
		f := got[0]
		if f.SiteID != "site_bad" || f.Reason != "http_500" || f.Failures != 2 || !f.Since.Equal(now.Add(-2*time.Hour)) || !strings.Contains(f.Next, "siteops leads sync --site site_bad") {
			t.Errorf("site_bad = %+v", f)
		}
		if r.Clear() {
			t.Error("a report with a site the sweep cannot read is clear")
		}
	})
}
