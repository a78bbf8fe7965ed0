package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/store"
)

// TestInboxReadsFollowTheBacklog checks the plans of the relay's reads on
// an inbox whose history (dispatched events kept for the retention) is
// three times its backlog: the claim takes its rows in index order (no
// sort of every due event: on SQLite a claim of 32 behind 10,000 pending
// took 100 ms under the race detector, holding the store's one
// connection), and the backlog's reads use the partial indexes (the oldest
// pending event had been found by walking inbox_received through the whole
// history, every second).
func TestInboxReadsFollowTheBacklog(t *testing.T) {
	eachWithClock(t, func(t *testing.T, s *store.Store, c *clock) {
		ctx := t.Context()
		tx, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		const kept, pending = 6000, 2000
		for i := range kept + pending {
			at := c.Now().Add(time.Duration(i-kept-pending) * time.Millisecond)
			var dispatched any
			if i < kept {
				dispatched = at
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO inbox (event_id, event_type, kind, lane, receiver, endpoint_id, received_at, body, next_attempt_at, dispatched_at)
				VALUES ($1, 'lead.created', 'webhook', $2, '', 'env', $3, $4, $3, $5)`,
				fmt.Sprintf("evt_%05d", i), i%2, at, []byte(`{}`), dispatched); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DB().ExecContext(ctx, `ANALYZE`); err != nil {
			t.Fatal(err)
		}
		plans := map[string]string{"claim": store.ClaimQuery(s)}
		for name, q := range store.BacklogQueries {
			plans[name] = q
		}
		want := map[string]string{"claim": "inbox_pending", "pending": "inbox_pending", "dead": "inbox_dead", "oldest": "inbox_pending_age"}
		for name, q := range plans {
			plan := explain(t, s, q)
			if !strings.Contains(plan, want[name]) {
				t.Errorf("%s's plan does not use %s:\n%s", name, want[name], plan)
			}
			for _, bad := range []string{"TEMP B-TREE", "Sort", "inbox_received", "Seq Scan"} {
				if strings.Contains(plan, bad) {
					t.Errorf("%s's plan has %q:\n%s", name, bad, plan)
				}
			}
		}
		b, err := s.InboxBacklog(ctx)
		if err != nil || b.Undispatched != pending || !b.OldestPending.Equal(c.Now().Add(-pending*time.Millisecond)) {
			t.Errorf("backlog = %+v, %v; want %d pending, the oldest %s", b, err, pending, c.Now().Add(-pending*time.Millisecond))
		}
	})
}

// explain is the plan of q (its placeholders bound to a lane, times and a
// limit, as the claim binds them), one line per step.
func explain(t *testing.T, s *store.Store, q string) string {
	t.Helper()
	prefix := "EXPLAIN QUERY PLAN "
	if s.Dialect() == store.Postgres {
		prefix = "EXPLAIN "
	}
	var args []any
	if strings.Contains(q, "$1") {
		now := time.Now().UTC()
		args = []any{now.Add(time.Minute), now, 100, int(store.LaneBulk)}
	}
	rows, err := s.DB().QueryContext(t.Context(), prefix+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	cols, _ := rows.Columns()
	var lines []string
	for rows.Next() {
		vals := make([]any, len(cols))
		for i := range vals {
			vals[i] = new(any)
		}
		if err := rows.Scan(vals...); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprint(*vals[len(vals)-1].(*any)))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
