package store_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// webhookEvent is a recorded delivery of typ about site, received at at.
func webhookEvent(id, typ, site string, at time.Time) store.InboxEvent {
	body := fmt.Sprintf(`{"id":%q,"type":%q,"created_at":"2026-11-21T09:00:00.000Z","data":{"site_id":%q}}`, id, typ, site)
	return store.InboxEvent{EventID: id, EventType: typ, Lane: store.LaneBulk, EndpointID: "env", ReceivedAt: at, Body: []byte(body)}
}

func record(t *testing.T, s *store.Store, evs ...store.InboxEvent) {
	t.Helper()
	for _, ev := range evs {
		if _, err := s.RecordEvent(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
}

func recordIDs(rs []store.EventRecord) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.EventID
	}
	return out
}

// TestRecordDispatchesMarksAndKeepsHistory records a batch with every kind
// of result in one call and reads back the marks and each event's history.
func TestRecordDispatchesMarksAndKeepsHistory(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		ctx := t.Context()
		t0 := c.Now()
		record(t, s,
			webhookEvent("evt_a", "lead.created", "site_1", t0),
			webhookEvent("evt_b", "lead.created", "site_1", t0),
			webhookEvent("evt_c", "knowledge.ready", "site_2", t0),
			webhookEvent("evt_d", "knowledge.ready", "site_3", t0),
			webhookEvent("evt_e", "site.published", "site_4", t0),
		)
		if _, err := s.ClaimEvents(ctx, store.LaneBulk, 10, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		next := t0.Add(2 * time.Second)
		err := s.RecordDispatches(ctx, []store.Dispatch{
			{EventID: "evt_a", Outcome: "signalled", WorkflowID: "lead-sync/site_1", RunID: "run-1"},
			{EventID: "evt_b", Outcome: "signalled", WorkflowID: "lead-sync/site_1", RunID: "run-1"},
			{EventID: "evt_c", Outcome: "no-target"},
			{EventID: "evt_d", Error: "signalling onboarding/x: unavailable", WorkflowID: "onboarding/x", Next: next},
			{EventID: "evt_e", Error: "signalling onboarding/y: unavailable", WorkflowID: "onboarding/y", Dead: true},
			{EventID: "evt_purged", Outcome: "signalled"}, // not in the inbox: no row, no error
		})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]struct {
			status   string
			attempts int
			failures int
		}{
			"evt_a": {"signalled", 1, 0},
			"evt_c": {"no-target", 1, 0},
			"evt_d": {store.StatusFailing, 1, 1},
			"evt_e": {store.OutcomeDead, 1, 1},
		}
		for id, w := range want {
			d, err := s.Event(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if d.Status() != w.status || d.Attempts != w.attempts || d.Failures != w.failures {
				t.Errorf("%s: status %s, %d attempts, %d failures; want %s, %d, %d", id, d.Status(), d.Attempts, d.Failures, w.status, w.attempts, w.failures)
			}
			if len(d.History) != 1 || d.History[0].Kind != store.HistoryAttempt || d.History[0].Attempt != 1 || !d.History[0].At.Equal(t0) {
				t.Errorf("%s: history = %+v, want attempt 1 at %s", id, d.History, t0)
			}
		}
		d, _ := s.Event(ctx, "evt_b")
		if wf, run := d.Target(); wf != "lead-sync/site_1" || run != "run-1" || d.History[0].Outcome != "signalled" {
			t.Errorf("evt_b reached %s %s (%+v); want lead-sync/site_1 run-1", wf, run, d.History)
		}
		d, _ = s.Event(ctx, "evt_d")
		if h := d.History[0]; h.Outcome != store.OutcomeFailed || h.Error == "" || h.WorkflowID != "onboarding/x" || !d.NextAttemptAt.Equal(next) || d.LastError != h.Error {
			t.Errorf("the failed attempt: %+v, next %s, last error %q", h, d.NextAttemptAt, d.LastError)
		}
		d, _ = s.Event(ctx, "evt_e")
		if d.History[0].Outcome != store.OutcomeDead || d.LastError == "" || d.DispatchedAt.IsZero() {
			t.Errorf("the dead letter: %+v", d)
		}
		st, err := s.InboxStatus(ctx)
		if err != nil || st.Dead != 1 || st.Undispatched != 1 {
			t.Errorf("status = %+v, %v; want 1 dead letter and 1 undispatched (evt_d)", st, err)
		}
		// A dead letter is never claimed; the failed event is, when due,
		// and its second attempt is numbered 2.
		c.Add(time.Minute)
		got, _ := s.ClaimEvents(ctx, store.LaneBulk, 10, 30*time.Second)
		if len(got) != 1 || got[0].EventID != "evt_d" || got[0].Failures != 1 || got[0].Attempts != 1 {
			t.Fatalf("claimed %+v; want evt_d after one failure", got)
		}
		if err := s.RecordDispatches(ctx, []store.Dispatch{{EventID: "evt_d", Outcome: "signalled", WorkflowID: "onboarding/x"}}); err != nil {
			t.Fatal(err)
		}
		d, _ = s.Event(ctx, "evt_d")
		if len(d.History) != 2 || d.History[1].Attempt != 2 || d.Status() != "signalled" || d.LastError != "" {
			t.Errorf("after the second attempt: %+v", d)
		}
		// Retention purges handled events and their history, never a dead
		// letter.
		c.Add(31 * 24 * time.Hour)
		n, err := s.PurgeInbox(ctx, c.Now().Add(-30*24*time.Hour))
		if err != nil || n != 4 {
			t.Fatalf("purged %d, %v; want 4", n, err)
		}
		if _, err := s.Event(ctx, "evt_e"); err != nil {
			t.Errorf("the dead letter was purged: %v", err)
		}
		if _, err := s.Event(ctx, "evt_a"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a purged event: %v, want ErrNotFound", err)
		}
		var left int
		if err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM inbox_history`).Scan(&left); err != nil || left != 1 {
			t.Errorf("%d history rows left (%v); want the dead letter's one", left, err)
		}
	})
}

func TestListEventsFiltersAndPages(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		ctx := t.Context()
		t0 := c.Now()
		// 7 events share one received time, so that paging must break ties
		// by event id.
		for i := range 12 {
			at := t0.Add(time.Duration(i) * time.Second)
			if i < 7 {
				at = t0
			}
			typ := "lead.created"
			if i%3 == 0 {
				typ = "knowledge.ready"
			}
			record(t, s, webhookEvent(fmt.Sprintf("evt_%02d", i), typ, fmt.Sprintf("site_%d", i%2), at))
		}
		// A body that is not JSON and a record siteops made have no site,
		// and must not break a listing by site.
		record(t, s, store.InboxEvent{EventID: "evt_raw", EventType: "lead.created", EndpointID: "env", ReceivedAt: t0.Add(-time.Hour), Body: []byte("\xff not json")})
		if err := s.PutSecret(ctx, "we_1", "v1", agentsite.NewSigningSecret("whsec_1")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MarkEndpointVerified(ctx, "we_1", "evt_00", store.LanePriority); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordDispatches(ctx, []store.Dispatch{
			{EventID: "evt_01", Outcome: "signalled"},
			{EventID: "evt_03", Outcome: "no-target"},
			{EventID: "evt_04", Error: "boom", Next: t0.Add(time.Hour)},
			{EventID: "evt_05", Error: "boom", Dead: true},
		}); err != nil {
			t.Fatal(err)
		}

		var all []string
		f := store.EventFilter{Limit: 5}
		for pages := 0; ; pages++ {
			if pages > 5 {
				t.Fatal("paging does not end")
			}
			page, err := s.ListEvents(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, recordIDs(page.Events)...)
			if page.Next == "" {
				break
			}
			f.Page = page.Next
		}
		// The verification record was made at t0 too.
		want := []string{"evt_11", "evt_10", "evt_09", "evt_08", "evt_07", "verified:we_1", "evt_06", "evt_05", "evt_04", "evt_03", "evt_02", "evt_01", "evt_00", "evt_raw"}
		if !slices.Equal(all, want) {
			t.Errorf("paged through\n %v\nwant\n %v", all, want)
		}

		for _, tc := range []struct {
			name string
			f    store.EventFilter
			want []string
		}{
			{"type", store.EventFilter{Type: "knowledge.ready"}, []string{"evt_09", "evt_06", "evt_03", "evt_00"}},
			{"site", store.EventFilter{SiteID: "site_1", Since: t0.Add(8 * time.Second)}, []string{"evt_11", "evt_09"}},
			{"outcome", store.EventFilter{Status: "no-target"}, []string{"evt_03"}},
			{"dead", store.EventFilter{Status: store.OutcomeDead}, []string{"evt_05"}},
			{"failing", store.EventFilter{Status: store.StatusFailing}, []string{"evt_04"}},
			{"pending", store.EventFilter{Status: store.StatusPending, Since: t0.Add(9 * time.Second)}, []string{"evt_11", "evt_10", "evt_09"}},
			{"type and status", store.EventFilter{Type: "lead.created", Status: store.StatusPending, SiteID: "site_0", Limit: 2}, []string{"evt_10", "evt_08"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				page, err := s.ListEvents(ctx, tc.f)
				if got := recordIDs(page.Events); err != nil || !slices.Equal(got, tc.want) {
					t.Errorf("got %v, %v; want %v", got, err, tc.want)
				}
			})
		}
		page, _ := s.ListEvents(ctx, store.EventFilter{Status: store.StatusFailing})
		if r := page.Events[0]; r.SiteID != "site_0" || r.LastError != "boom" || r.Attempts != 1 || r.Status() != store.StatusFailing {
			t.Errorf("failing record = %+v", r)
		}
		if _, err := s.ListEvents(ctx, store.EventFilter{Page: "not-a-token"}); !errors.Is(err, store.ErrBadPage) {
			t.Errorf("a bad page token: %v, want ErrBadPage", err)
		}
		oldest, err := s.OldestEvent(ctx)
		if err != nil || !oldest.Equal(t0.Add(-time.Hour)) {
			t.Errorf("oldest = %s, %v; want %s", oldest, err, t0.Add(-time.Hour))
		}
		ids, more, err := s.MatchingEventIDs(ctx, store.EventFilter{Type: "lead.created"}, 3)
		if err != nil || !more || !slices.Equal(ids, []string{"evt_11", "evt_10", "evt_08"}) {
			t.Errorf("matching = %v, more %v, %v", ids, more, err)
		}
		ids, more, _ = s.MatchingEventIDs(ctx, store.EventFilter{Type: "knowledge.ready"}, 4)
		if more || len(ids) != 4 {
			t.Errorf("matching all 4 = %v, more %v", ids, more)
		}
	})
}

func TestEmptyInbox(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, _ *clock) {
		page, err := s.ListEvents(t.Context(), store.EventFilter{})
		if err != nil || len(page.Events) != 0 || page.Next != "" {
			t.Errorf("empty inbox = %+v, %v", page, err)
		}
		if oldest, err := s.OldestEvent(t.Context()); err != nil || !oldest.IsZero() {
			t.Errorf("oldest of nothing = %s, %v", oldest, err)
		}
	})
}

func TestEventShowsItsVerification(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		ctx := t.Context()
		secret := agentsite.NewSigningSecret("whsec_shown_never")
		if err := s.PutSecret(ctx, "we_9", "v2", secret); err != nil {
			t.Fatal(err)
		}
		ev := webhookEvent("evt_s", "lead.created", "site_1", c.Now())
		ev.EndpointID, ev.Receiver = "we_9", "v2"
		record(t, s, ev, webhookEvent("evt_env", "lead.created", "site_1", c.Now()))
		d, err := s.Event(ctx, "evt_s")
		if err != nil {
			t.Fatal(err)
		}
		if d.Fingerprint != secret.Fingerprint() || d.SecretReceiver != "v2" || d.Receiver != "v2" || string(d.Body) != string(ev.Body) || d.SiteID != "site_1" {
			t.Errorf("detail = %+v", d)
		}
		if d, _ := s.Event(ctx, "evt_env"); d.Fingerprint != "" || d.EndpointID != "env" {
			t.Errorf("an event verified by SITEOPS_WEBHOOK_SECRETS: %+v", d)
		}
		if _, err := s.Event(ctx, "evt_nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown event: %v", err)
		}
	})
}

func TestReplayEvents(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		ctx := t.Context()
		t0 := c.Now()
		record(t, s,
			webhookEvent("evt_1", "lead.created", "site_1", t0),
			webhookEvent("evt_2", "knowledge.ready", "site_2", t0.Add(time.Second)),
			webhookEvent("evt_3", "knowledge.ready", "site_3", t0.Add(2*time.Second)),
		)
		if err := s.RecordDispatches(ctx, []store.Dispatch{
			{EventID: "evt_1", Outcome: "signalled", WorkflowID: "lead-sync/site_1", RunID: "run-a"},
			{EventID: "evt_2", Outcome: "no-target"},
			{EventID: "evt_3", Error: "unavailable", WorkflowID: "onboarding/z", Dead: true},
		}); err != nil {
			t.Fatal(err)
		}
		c.Add(time.Minute)

		// All or nothing: an unknown id replays none.
		if _, err := s.ReplayEvents(ctx, []string{"evt_1", "evt_nope"}, "alice"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("replaying an unknown id: %v, want ErrNotFound", err)
		}
		if d, _ := s.Event(ctx, "evt_1"); d.Replays != 0 || d.Status() != "signalled" {
			t.Errorf("a failed replay changed evt_1: %+v", d)
		}

		got, err := s.ReplayEvents(ctx, []string{"evt_3", "evt_1", "evt_2", "evt_1"}, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if ids := []string{got[0].EventID, got[1].EventID, got[2].EventID}; len(got) != 3 || !slices.Equal(ids, []string{"evt_3", "evt_2", "evt_1"}) {
			t.Fatalf("replayed %+v", got)
		}
		if r := got[2]; r.Outcome != "signalled" || r.WorkflowID != "lead-sync/site_1" || r.RunID != "run-a" || r.Replay != 1 {
			t.Errorf("evt_1 before its replay: %+v", r)
		}
		if r := got[0]; r.Outcome != store.OutcomeDead || r.WorkflowID != "onboarding/z" {
			t.Errorf("evt_3 before its replay: %+v", r)
		}
		if r := got[1]; r.Outcome != "no-target" || r.WorkflowID != "" {
			t.Errorf("evt_2 before its replay: %+v", r)
		}
		st, _ := s.InboxStatus(ctx)
		if st.Dead != 0 || st.Undispatched != 3 {
			t.Errorf("after the replay: %+v", st)
		}
		d, _ := s.Event(ctx, "evt_3")
		last := d.History[len(d.History)-1]
		if d.Status() != store.StatusPending || d.Failures != 0 || d.Attempts != 1 || d.Replays != 1 || d.ReplayedBy != "alice" || !d.ReplayedAt.Equal(c.Now()) ||
			last.Kind != store.HistoryReplay || last.Replay != 1 || last.Operator != "alice" || last.Attempt != 1 {
			t.Errorf("evt_3 after its replay: %+v", d)
		}
		// The relay claims them at once, the dead letter with all its
		// attempts ahead of it again; the attempt is numbered after the
		// earlier ones and marked as following replay 1.
		claimed, _ := s.ClaimEvents(ctx, store.LaneBulk, 10, 30*time.Second)
		if len(claimed) != 3 || claimed[2].EventID != "evt_3" || claimed[2].Failures != 0 || claimed[2].Attempts != 1 {
			t.Fatalf("claimed after the replay: %+v", claimed)
		}
		if err := s.RecordDispatches(ctx, []store.Dispatch{{EventID: "evt_3", Outcome: "signalled", WorkflowID: "onboarding/z"}}); err != nil {
			t.Fatal(err)
		}
		d, _ = s.Event(ctx, "evt_3")
		if h := d.History[len(d.History)-1]; h.Attempt != 2 || h.Replay != 1 || h.Outcome != "signalled" {
			t.Errorf("the attempt after the replay: %+v", h)
		}
		// A second replay is counted.
		if got, err := s.ReplayEvents(ctx, []string{"evt_3"}, "bob"); err != nil || got[0].Replay != 2 {
			t.Errorf("second replay: %+v, %v", got, err)
		}
		if d, _ := s.Event(ctx, "evt_3"); d.Replays != 2 || d.ReplayedBy != "bob" {
			t.Errorf("after the second replay: %+v", d)
		}
	})
}

// TestInboxHistoryMigration upgrades an inbox with a failing and a handled
// event to the schema with failures and history, and back down and up.
func TestInboxHistoryMigration(t *testing.T) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			ctx := t.Context()
			u := storetest.SQLiteURL(t)
			if d == store.Postgres {
				u = storetest.PostgresSchemaURL(t)
			}
			s, err := store.Open(ctx, u, store.Options{NoMigration: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			if err := store.MigrateTo(ctx, s, 3); err != nil {
				t.Fatal(err)
			}
			at := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
			for _, row := range []struct {
				id         string
				attempts   int
				dispatched any
			}{{"evt_failing", 4, nil}, {"evt_done", 2, at}} {
				if _, err := s.DB().ExecContext(ctx, `INSERT INTO inbox (event_id, event_type, receiver, endpoint_id, received_at, body, attempts, next_attempt_at, dispatched_at, outcome)
					VALUES ($1, 'lead.created', '', 'env', $2, $3, $4, $2, $5, '')`, row.id, at, []byte(`{"data":{"site_id":"site_1"}}`), row.attempts, row.dispatched); err != nil {
					t.Fatal(err)
				}
			}
			for _, v := range []int64{4, 3, 4} {
				if err := store.MigrateTo(ctx, s, v); err != nil {
					t.Fatalf("migrating to %d: %v", v, err)
				}
			}
			failing, err := s.Event(ctx, "evt_failing")
			if err != nil || failing.Failures != 4 || failing.Attempts != 4 || failing.Status() != store.StatusFailing || failing.SiteID != "site_1" {
				t.Errorf("the failing event after the migration: %+v, %v", failing, err)
			}
			if done, err := s.Event(ctx, "evt_done"); err != nil || done.Failures != 0 || done.Attempts != 2 {
				t.Errorf("the handled event after the migration: %+v, %v", done, err)
			}
		})
	}
}
