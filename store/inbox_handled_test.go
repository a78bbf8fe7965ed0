package store_test

import (
	"testing"
	"time"

	"github.com/siteops/siteops/store"
)

// TestRecordHandled checks the record of a verified body the ingress
// cannot read: kept with its outcome and reason, listed by that outcome,
// never claimed by the relay, and recorded once.
func TestRecordHandled(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		ctx := t.Context()
		ev := event("malformed_0123", c.Now())
		ev.Body = []byte(`{"id":"evt_1","created_at":"yesterday"}`)
		fresh, err := s.RecordHandled(ctx, ev, "malformed", "svc-event-id evt_1: created_at")
		if err != nil || !fresh {
			t.Fatalf("RecordHandled = %v, %v; want a new record", fresh, err)
		}
		if fresh, err := s.RecordHandled(ctx, ev, "malformed", "again"); err != nil || fresh {
			t.Errorf("RecordHandled of the same id = %v, %v; want a duplicate", fresh, err)
		}
		for _, lane := range []store.Lane{store.LanePriority, store.LaneBulk} {
			if evs, err := s.ClaimEvents(ctx, lane, 10, time.Minute); err != nil || len(evs) != 0 {
				t.Errorf("claimed %d handled records (%v)", len(evs), err)
			}
		}
		page, err := s.ListEvents(ctx, store.EventFilter{Status: "malformed"})
		if err != nil || len(page.Events) != 1 {
			t.Fatalf("listed %d malformed events (%v)", len(page.Events), err)
		}
		if r := page.Events[0]; r.EventID != "malformed_0123" || r.Outcome != "malformed" || r.LastError != "svc-event-id evt_1: created_at" || r.DispatchedAt.IsZero() || r.Attempts != 0 {
			t.Errorf("recorded %+v", r)
		}
	})
}

// TestEmptyBodyIsRecorded checks that a verified delivery with no body at
// all is recorded, as every other: a nil body was bound as NULL, which the
// body column refuses, so the ingress answered 503 (store_unavailable) to
// a delivery no retry could change (found by FuzzHandler in CI).
func TestEmptyBodyIsRecorded(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		ctx := t.Context()
		handled := event("malformed_empty", c.Now())
		handled.Body = nil
		if fresh, err := s.RecordHandled(ctx, handled, "malformed", "empty body"); err != nil || !fresh {
			t.Fatalf("RecordHandled of an empty body = %v, %v; want a new record", fresh, err)
		}
		ev := event("evt_empty", c.Now())
		ev.Body = nil
		if fresh, err := s.RecordEvent(ctx, ev); err != nil || !fresh {
			t.Fatalf("RecordEvent of an empty body = %v, %v; want a new record", fresh, err)
		}
		if d, err := s.Event(ctx, "evt_empty"); err != nil || len(d.Body) != 0 {
			t.Errorf("the empty body read back as %q, %v", d.Body, err)
		}
	})
}
