package store_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// TestGroupInsertWithRecordedIDs checks the group commit's INSERT on a
// batch that holds ids already recorded: the plain INSERT fails on the
// primary key, the batch goes again with ON CONFLICT, only the new ids are
// reported new, and every event is in the inbox once with what was sent;
// the batches right after also report what is new.
func TestGroupInsertWithRecordedIDs(t *testing.T) {
	s := storetest.Open(t, store.Postgres)
	ctx := t.Context()
	at := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	insert := store.InsertStrategies["as-built"]
	if _, err := s.RecordEvent(ctx, event("evt_a", at)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ids, want []string
	}{
		{[]string{"evt_a", "evt_b", "evt_c"}, []string{"evt_b", "evt_c"}}, // a recorded: the plain INSERT fails
		{[]string{"evt_c", "evt_d"}, []string{"evt_d"}},                   // right after: ON CONFLICT at once
		{[]string{"evt_e"}, []string{"evt_e"}},
	} {
		evs := make([]store.InboxEvent, len(tc.ids))
		for i, id := range tc.ids {
			evs[i] = event(id, at)
		}
		got, err := insert(s, ctx, evs)
		if err != nil {
			t.Fatalf("inserting %v: %v", tc.ids, err)
		}
		if len(got) != len(tc.want) {
			t.Errorf("inserting %v: new %v, want %v", tc.ids, got, tc.want)
		}
		for _, id := range tc.want {
			if !got[id] {
				t.Errorf("inserting %v: new %v, want %v", tc.ids, got, tc.want)
			}
		}
	}
	evs, err := s.ClaimEvents(ctx, store.LaneBulk, 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(evs); len(got) != 5 {
		t.Fatalf("the inbox holds %v, want evt_a to evt_e once each", got)
	}
	for _, ev := range evs {
		if want := event(ev.EventID, at); string(ev.Body) != string(want.Body) || ev.TraceContext != want.TraceContext || ev.Receiver != want.Receiver {
			t.Errorf("recorded %+v, want %+v", ev, want)
		}
	}
}

// TestGroupCommitGoesAroundAStalledFlush holds a flush on a row lock (an
// open transaction of another session inserting the same event id, as a
// second replica recording a sender's retry would) and checks that the
// deliveries behind it are committed meanwhile on a second connection,
// and that the stalled one is recorded once the lock is released.
func TestGroupCommitGoesAroundAStalledFlush(t *testing.T) {
	s := storetest.Open(t, store.Postgres)
	ctx := t.Context()
	at := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	other, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback() }()
	var otherPID int
	if err := other.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&otherPID); err != nil {
		t.Fatal(err)
	}
	if _, err := other.ExecContext(ctx, `INSERT INTO inbox (event_id, event_type, receiver, endpoint_id, received_at, body, next_attempt_at)
		VALUES ('evt_locked', 'lead.created', '', 'env', $1, '\x', $1)`, at); err != nil {
		t.Fatal(err)
	}
	type result struct {
		fresh bool
		err   error
	}
	stalled := make(chan result, 1)
	go func() {
		fresh, err := s.RecordEvent(context.Background(), event("evt_locked", at))
		stalled <- result{fresh, err}
	}()
	// Once the flush waits on the lock, the next delivery goes around it.
	for waiting := 0; waiting == 0; {
		if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, otherPID).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-stalled:
			t.Fatalf("recording an event another session is inserting ended before that session did: %v, %v", r.fresh, r.err)
		case <-ctx.Done():
			t.Fatal("no flush waited on the other session's row lock before the test's deadline")
		case <-time.After(10 * time.Millisecond):
		}
	}
	deadline, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fresh, err := s.RecordEvent(deadline, event("evt_behind", at))
	if err != nil || !fresh {
		t.Fatalf("recording an event behind a stalled flush: %v, %v; want a new record before the stall ends", fresh, err)
	}
	select {
	case r := <-stalled:
		t.Fatalf("the flush waiting on another session's row lock ended before the lock did: %v, %v", r.fresh, r.err)
	default:
	}
	if err := other.Rollback(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-stalled:
		if r.err != nil || !r.fresh {
			t.Errorf("the stalled event once the lock was released: %v, %v; want a new record", r.fresh, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled event was not recorded within 10 s of the lock's release")
	}
}

// TestWithoutGroupCommitRecordsEachEventAlone checks the benchmarks'
// baseline store: on PostgreSQL, RecordEvent commits each event by itself
// (no group commit is counted), reports a new event new and a recorded
// one not, and the event is in the inbox as sent.
func TestWithoutGroupCommitRecordsEachEventAlone(t *testing.T) {
	s := storetest.OpenWith(t, store.Postgres, store.Options{NoGroupCommit: true})
	ctx := t.Context()
	at := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		id   string
		want bool
	}{{"evt_a", true}, {"evt_a", false}, {"evt_b", true}} {
		if got, err := s.RecordEvent(ctx, event(tc.id, at)); err != nil || got != tc.want {
			t.Fatalf("recording %s: new %v, %v; want %v", tc.id, got, err, tc.want)
		}
	}
	if commits, events := s.GroupCommits(); commits != 0 || events != 0 {
		t.Errorf("group commits %d of %d events, want none", commits, events)
	}
	evs, err := s.ClaimEvents(ctx, store.LaneBulk, 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(evs); len(got) != 2 || string(evs[0].Body) != string(event("evt_a", at).Body) {
		t.Fatalf("the inbox holds %v, want evt_a and evt_b as sent", got)
	}
}

// TestCloseStopsTheGroupCommit checks that Close on PostgreSQL ends the
// group commit: callers racing Close each end, their event recorded or
// refused with ErrClosed; a RecordEvent after Close is refused at once
// rather than left waiting; and no goroutine of the group commit (its
// loop, a flush) is left running.
func TestCloseStopsTheGroupCommit(t *testing.T) {
	u := storetest.PostgresSchemaURL(t)
	before := groupCommitGoroutines()
	s, err := store.Open(t.Context(), u, store.Options{SecretKey: storetest.TestKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if n := groupCommitGoroutines(); n <= before {
		t.Fatalf("%d goroutines of the group commit after Open, %d before: the test cannot see its loop", n, before)
	}
	at := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	ended := make(chan error, 16)
	for i := range cap(ended) {
		wg.Go(func() {
			for j := 0; ; j++ {
				if _, err := s.RecordEvent(ctx, event(fmt.Sprintf("evt_%d_%d", i, j), at)); err != nil {
					ended <- err
					return
				}
			}
		})
	}
	for commits, _ := s.GroupCommits(); commits < 10; commits, _ = s.GroupCommits() {
		select {
		case err := <-ended:
			t.Fatalf("recording before Close: %v", err)
		case <-ctx.Done():
			t.Fatal("the group commit made no 10 commits before the test's deadline")
		case <-time.After(time.Millisecond):
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(ended)
	for err := range ended {
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("a RecordEvent racing Close: %v; want ErrClosed", err)
		}
	}

	after, cancelAfter := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancelAfter()
	if _, err := s.RecordEvent(after, event("evt_after_close", at)); !errors.Is(err, store.ErrClosed) || after.Err() != nil {
		t.Errorf("RecordEvent after Close: %v (waited for the context: %v); want ErrClosed at once", err, after.Err() != nil)
	}

	// The loop's last deferred steps may still be running as Close returns.
	deadline := time.Now().Add(2 * time.Second)
	for groupCommitGoroutines() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := groupCommitGoroutines(); n > before {
		t.Errorf("%d goroutines of the group commit after Close, %d before Open", n, before)
	}
}

// groupCommitGoroutines counts the goroutines of the group commit: its
// loop (started or not yet) and its flushes, each of which names the code
// that created it.
func groupCommitGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "store.(*groupCommitter)") || strings.Contains(g, "store.newGroupCommitter") {
			count++
		}
	}
	return count
}
