package production

import (
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/store"
)

// readyOrLog polls url until it answers 200, and on a timeout fails t with
// what it got last and the end of p's log (a process that exited at start
// says why there).
func readyOrLog(t *testing.T, url string, p *proc) {
	t.Helper()
	siteopstest.EventuallyNil(t, 30*time.Second, p.name+": "+url+" to answer 200", func() error {
		resp, err := http.Get(url) //nolint:gosec // a loopback address of the test's own process
		if err != nil {
			return fmt.Errorf("%w\n%s", err, tail(p.log.String(), 3000))
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("it answered %s\n%s", resp.Status, tail(p.log.String(), 3000))
		}
		return nil
	})
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// scrape returns the Prometheus text a siteops process serves at
// base+"/metrics", or "" when it does not answer.
func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics") //nolint:gosec // a loopback address of the test's own process
	if err != nil {
		return ""
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metricSum adds the values of the samples of the metric name (exactly
// that name, any labels) whose labels include every one of labels
// (written as in the exposition, key="value").
func metricSum(body, name string, labels ...string) float64 {
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		keep := true
		for _, l := range labels {
			keep = keep && strings.Contains(rest, l)
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if !keep || len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// checkDispatchedOnce checks the inbox for exactly-once dispatch across the
// relays and returns how many events it checked. Each relay records a
// claimed batch's attempts in the inbox's history (migration 00004) in the
// transaction that marks the batch, so an event that two relays both
// dispatched has two successful attempts there. Every event the relay
// handles must have exactly one; none may be a dead letter (lost); and
// every lead.created must have reached its lead sync. Events recorded as
// handled on receipt (a verified body that is not an envelope) never reach
// a relay and are left out.
func checkDispatchedOnce(t *testing.T, db *sql.DB) int {
	t.Helper()
	var checked int
	if err := db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM inbox WHERE NOT (attempts = 0 AND outcome <> '')`).Scan(&checked); err != nil {
		t.Fatal(err)
	}
	rows, err := db.QueryContext(t.Context(), `
		SELECT i.event_id, i.event_type, i.outcome, i.attempts,
			COUNT(h.id) FILTER (WHERE h.kind = $1 AND h.outcome NOT IN ($2, $3)) AS dispatched
		FROM inbox i LEFT JOIN inbox_history h ON h.event_id = i.event_id
		WHERE NOT (i.attempts = 0 AND i.outcome <> '')
		GROUP BY i.event_id, i.event_type, i.outcome, i.attempts
		HAVING COUNT(h.id) FILTER (WHERE h.kind = $1 AND h.outcome NOT IN ($2, $3)) <> 1
			OR i.outcome IN ('', $3)
			OR (i.event_type = 'lead.created' AND i.outcome <> $4)
		ORDER BY i.event_id`,
		store.HistoryAttempt, store.OutcomeFailed, store.OutcomeDead, store.OutcomeSignalled)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	bad := 0
	for rows.Next() {
		var id, typ, outcome string
		var attempts, dispatched int
		if err := rows.Scan(&id, &typ, &outcome, &attempts, &dispatched); err != nil {
			t.Fatal(err)
		}
		if bad++; bad <= 10 {
			t.Errorf("inbox event %s (%s): outcome %q after %d attempts, %d recorded dispatches; want one dispatch (signalled, for lead.created)", id, typ, outcome, attempts, dispatched)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if bad > 10 {
		t.Errorf("... and %d more events not dispatched exactly once", bad-10)
	}
	return checked
}
