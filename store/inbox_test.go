package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func event(id string, at time.Time) store.InboxEvent {
	return store.InboxEvent{EventID: id, EventType: "lead.created", Lane: store.LaneBulk, Receiver: "v1", EndpointID: "we_1", ReceivedAt: at,
		Body: []byte(`{"id":"` + id + `"}`), TraceContext: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
}

func eachWithClock(t *testing.T, f func(t *testing.T, s *store.Store, c *clock)) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			c := &clock{now: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)}
			f(t, storetest.OpenWith(t, d, store.Options{Clock: c.Now}), c)
		})
	}
}

func TestRecordEventIsUnique(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		var fresh atomic.Int32
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				ok, err := s.RecordEvent(context.Background(), event("evt_same", c.Now()))
				if err != nil {
					t.Error(err)
				}
				if ok {
					fresh.Add(1)
				}
			})
		}
		wg.Wait()
		if fresh.Load() != 1 {
			t.Errorf("%d of 16 concurrent records of one event were new, want 1", fresh.Load())
		}
		st, err := s.InboxStatus(t.Context())
		if err != nil || st.Total != 1 || st.Undispatched != 1 || !st.OldestPending.Equal(c.Now()) {
			t.Errorf("status = %+v, %v", st, err)
		}
	})
}

func TestClaimLeaseDispatchAndRetry(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		ctx := t.Context()
		for i := range 5 {
			if _, err := s.RecordEvent(ctx, event(fmt.Sprintf("evt_%d", i), c.Now().Add(-time.Second+time.Duration(i)*time.Millisecond))); err != nil {
				t.Fatal(err)
			}
		}
		first, err := s.ClaimEvents(ctx, store.LaneBulk, 3, 30*time.Second)
		if err != nil || len(first) != 3 || first[0].EventID != "evt_0" || first[2].EventID != "evt_2" {
			t.Fatalf("first claim = %v, %v", ids(first), err)
		}
		if first[0].TraceContext == "" || string(first[0].Body) != `{"id":"evt_0"}` || first[0].EndpointID != "we_1" {
			t.Errorf("claimed event = %+v", first[0])
		}
		// Leased events are not claimed again until the lease passes.
		second, _ := s.ClaimEvents(ctx, store.LaneBulk, 10, 30*time.Second)
		if len(second) != 2 || second[0].EventID != "evt_3" {
			t.Fatalf("second claim = %v", ids(second))
		}
		if err := s.MarkDispatchedBatch(ctx, map[string][]string{"signalled": {"evt_0"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkFailed(ctx, "evt_1", "temporal unavailable", c.Now().Add(5*time.Second)); err != nil {
			t.Fatal(err)
		}
		c.Add(6 * time.Second)
		third, _ := s.ClaimEvents(ctx, store.LaneBulk, 10, 30*time.Second)
		if len(third) != 1 || third[0].EventID != "evt_1" || third[0].Attempts != 1 {
			t.Fatalf("after the retry delay = %+v", third)
		}
		c.Add(31 * time.Second)
		fourth, _ := s.ClaimEvents(ctx, store.LaneBulk, 10, 30*time.Second)
		if len(fourth) != 4 { // evt_1..evt_4: leases ran out; evt_0 is done
			t.Fatalf("after the leases = %v", ids(fourth))
		}
		if out, attempts, err := s.InboxOutcome(ctx, "evt_0"); err != nil || out != "signalled" || attempts != 1 {
			t.Errorf("outcome = %q %d %v", out, attempts, err)
		}
		// Purge keeps pending events whatever their age.
		c.Add(31 * 24 * time.Hour)
		n, err := s.PurgeInbox(ctx, c.Now().Add(-30*24*time.Hour))
		if err != nil || n != 1 {
			t.Errorf("purged %d, %v; want 1", n, err)
		}
		st, _ := s.InboxStatus(ctx)
		if st.Total != 4 || st.Undispatched != 4 {
			t.Errorf("after purge = %+v", st)
		}
	})
}

func TestConcurrentClaimersNeverShareAnEvent(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		ctx := t.Context()
		const n = 300
		for i := range n {
			if _, err := s.RecordEvent(ctx, event(fmt.Sprintf("evt_%03d", i), c.Now())); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				for {
					evs, err := s.ClaimEvents(context.Background(), store.LaneBulk, 7, time.Minute)
					if err != nil {
						t.Error(err)
						return
					}
					if len(evs) == 0 {
						return
					}
					mu.Lock()
					for _, e := range evs {
						seen[e.EventID]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != n {
			t.Errorf("%d events claimed, want %d", len(seen), n)
		}
		for id, k := range seen {
			if k != 1 {
				t.Errorf("%s claimed %d times", id, k)
			}
		}
	})
}

func TestRotations(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		if _, err := s.RotationFor(ctx, "we_2"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unknown rotation: %v", err)
		}
		if err := s.SetRotation(ctx, "we_2", "secret-rotation/we_1"); err != nil {
			t.Fatal(err)
		}
		if wf, err := s.RotationFor(ctx, "we_2"); err != nil || wf != "secret-rotation/we_1" {
			t.Errorf("RotationFor = %q, %v", wf, err)
		}
		if err := s.EndRotation(ctx, "we_2"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RotationFor(ctx, "we_2"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("after EndRotation: %v", err)
		}
	})
}

// TestLanesAreClaimedApart checks that a flood in the bulk lane does not
// hide the priority lane's events from its claims, and the other way round.
func TestLanesAreClaimedApart(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		ctx := t.Context()
		for i := range 50 {
			ev := event(fmt.Sprintf("evt_bulk_%02d", i), c.Now().Add(-time.Minute))
			ev.Lane = store.LaneBulk
			if _, err := s.RecordEvent(ctx, ev); err != nil {
				t.Fatal(err)
			}
		}
		ready := event("evt_ready", c.Now())
		ready.Lane, ready.EventType = store.LanePriority, "knowledge.ready"
		if _, err := s.RecordEvent(ctx, ready); err != nil {
			t.Fatal(err)
		}
		pri, err := s.ClaimEvents(ctx, store.LanePriority, 10, time.Minute)
		if err != nil || len(pri) != 1 || pri[0].EventID != "evt_ready" || pri[0].Lane != store.LanePriority {
			t.Fatalf("priority claim = %v, %v", ids(pri), err)
		}
		bulk, err := s.ClaimEvents(ctx, store.LaneBulk, 100, time.Minute)
		if err != nil || len(bulk) != 50 || bulk[0].Kind != store.KindWebhook {
			t.Fatalf("bulk claim = %d events, %v", len(bulk), err)
		}
	})
}

func ids(evs []store.InboxEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.EventID
	}
	return out
}

func TestMarkEndpointVerifiedOnce(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		ctx := t.Context()
		if err := s.PutSecret(ctx, "we_9", "v9", agentsite.NewSigningSecret("whsec_9")); err != nil {
			t.Fatal(err)
		}
		var firsts atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				first, err := s.MarkEndpointVerified(context.Background(), "we_9", fmt.Sprintf("evt_%d", i), store.LanePriority)
				if err != nil {
					t.Error(err)
				}
				if first {
					firsts.Add(1)
				}
			})
		}
		wg.Wait()
		if firsts.Load() != 1 {
			t.Fatalf("%d first verifications, want 1", firsts.Load())
		}
		if bulk, _ := s.ClaimEvents(ctx, store.LaneBulk, 10, time.Minute); len(bulk) != 0 {
			t.Fatalf("the verification went to the bulk lane: %+v", bulk)
		}
		evs, _ := s.ClaimEvents(ctx, store.LanePriority, 10, time.Minute)
		if len(evs) != 1 || evs[0].Kind != store.KindEndpointVerified || evs[0].EndpointID != "we_9" || len(evs[0].Body) != 0 {
			t.Fatalf("inbox = %+v", evs)
		}
		if !strings.HasPrefix(evs[0].SubjectEventID, "evt_") {
			t.Errorf("the verified event is not recorded: %q", evs[0].SubjectEventID)
		}
		if first, err := s.MarkEndpointVerified(ctx, "we_unknown", "evt_x", store.LanePriority); first || err != nil {
			t.Errorf("an endpoint without a stored secret: %v, %v", first, err)
		}
	})
}

// TestConcurrentRecordsAreEachDurableOnce sends many deliveries at once,
// some of them twice, as a busy ingress does (on PostgreSQL they share
// commits): each distinct event is new exactly once, every one is in the
// inbox with what was sent, and the duplicates are answered as such.
func TestConcurrentRecordsAreEachDurableOnce(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		const distinct, dups = 400, 100
		var fresh atomic.Int32
		var wg sync.WaitGroup
		for i := range distinct + dups {
			wg.Go(func() {
				ev := event(fmt.Sprintf("evt_c%03d", i%distinct), c.Now())
				ok, err := s.RecordEvent(t.Context(), ev)
				if err != nil {
					t.Error(err)
				}
				if ok {
					fresh.Add(1)
				}
			})
		}
		wg.Wait()
		if fresh.Load() != distinct {
			t.Errorf("%d of %d deliveries (%d distinct) were new", fresh.Load(), distinct+dups, distinct)
		}
		evs, err := s.ClaimEvents(t.Context(), store.LaneBulk, 1000, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != distinct {
			t.Fatalf("claimed %d events, want %d", len(evs), distinct)
		}
		want := event(evs[0].EventID, c.Now())
		if got := evs[0]; string(got.Body) != string(want.Body) || got.TraceContext != want.TraceContext || got.EndpointID != want.EndpointID ||
			got.Receiver != want.Receiver || got.Kind != store.KindWebhook || !got.ReceivedAt.Equal(want.ReceivedAt) {
			t.Errorf("recorded %+v, want %+v", got, want)
		}
	})
}

func TestRecordEventGivesUpWithItsCaller(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := s.RecordEvent(ctx, event("evt_cancelled", c.Now())); !errors.Is(err, context.Canceled) {
			t.Errorf("RecordEvent with a cancelled context: %v, want context.Canceled", err)
		}
	})
}

// TestClaimTakesTheEarliestDue: a claim takes events in the order they
// fell due (a new event on arrival, a failed one at its next attempt), so
// a retried event waits its turn behind those that arrived while it backed
// off; the events a claim takes come back in the order received.
func TestClaimTakesTheEarliestDue(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		ctx := t.Context()
		if _, err := s.RecordEvent(ctx, event("evt_old", c.Now().Add(-10*time.Second))); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkFailed(ctx, "evt_old", "temporal unavailable", c.Now().Add(5*time.Second)); err != nil {
			t.Fatal(err)
		}
		for i, at := range []time.Duration{-time.Second, 4 * time.Second} {
			if _, err := s.RecordEvent(ctx, event(fmt.Sprintf("evt_new_%d", i), c.Now().Add(at))); err != nil {
				t.Fatal(err)
			}
		}
		c.Add(6 * time.Second)
		first, err := s.ClaimEvents(ctx, store.LaneBulk, 2, 30*time.Second)
		if err != nil || len(first) != 2 || first[0].EventID != "evt_new_0" || first[1].EventID != "evt_new_1" {
			t.Fatalf("first claim = %v, %v; want evt_new_0 and evt_new_1, due before evt_old's retry", ids(first), err)
		}
		c.Add(31 * time.Second)
		all, err := s.ClaimEvents(ctx, store.LaneBulk, 10, 30*time.Second)
		if err != nil || len(all) != 3 || all[0].EventID != "evt_old" || all[2].EventID != "evt_new_1" {
			t.Errorf("claim after the leases = %v, %v; want the three in the order received", ids(all), err)
		}
	})
}

// TestReplayedEventsGoAheadOfTheBacklog: a replayed event is due as of its
// arrival, so the next claim of its lane takes it before the events that
// arrived after it (an operator waits for a replay; it does not queue
// behind the lane's backlog).
func TestReplayedEventsGoAheadOfTheBacklog(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		ctx := t.Context()
		if _, err := s.RecordEvent(ctx, event("evt_replayed", c.Now().Add(-time.Hour))); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkDispatchedBatch(ctx, map[string][]string{"signalled": {"evt_replayed"}}); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if _, err := s.RecordEvent(ctx, event(fmt.Sprintf("evt_backlog_%d", i), c.Now().Add(-time.Minute))); err != nil {
				t.Fatal(err)
			}
		}
		c.Add(time.Second)
		if _, err := s.ReplayEvents(ctx, []string{"evt_replayed"}, "alice"); err != nil {
			t.Fatal(err)
		}
		got, err := s.ClaimEvents(ctx, store.LaneBulk, 1, 30*time.Second)
		if err != nil || len(got) != 1 || got[0].EventID != "evt_replayed" {
			t.Errorf("the claim after the replay = %v, %v; want evt_replayed, ahead of the 5 events behind it", ids(got), err)
		}
	})
}
