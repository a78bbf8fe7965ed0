package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The record of refused deliveries: what the ingresses refused before they
// recorded anything (a bad or stale signature, a receiver that does not
// exist, a secret that does not decrypt, a body too large, no slot, ...),
// counted per receiver, reason and minute, so that every ingress replica and
// the CLI see the same record (`siteops events list --refused`, the
// overview). An ingress writes it asynchronously, at most once a second,
// whatever it refuses, and prunes it (package ingress, refusals.go). It
// holds no body, header, address or secret: the receiver as the ingress
// names it, the reason, the status answered, the count, the first and last
// refusal, and the event id and type of a refused delivery whose signature
// verified (a store failure after the verification), which are the
// sender's signed values. Its size bound prunes the rows of receiver names
// the ingress's list did not hold (anyone can make them up) before the
// real receivers' rows.

// DefaultRefusedPage is how many rows RefusedDeliveries returns unless
// told otherwise.
const DefaultRefusedPage = 50

// RefusedDelivery is one row of the record: the deliveries to one
// receiver that the ingresses refused for one reason in one minute.
type RefusedDelivery struct {
	// Minute is the start of the minute (UTC).
	Minute time.Time
	// Receiver is the receiver path's name as the ingress names it: "" for
	// POST /webhooks (ReceiverName shows it as "default"), a name out of
	// form quoted, or a marker of the ingress for names past its budget.
	Receiver string
	Reason   string
	// Status is the HTTP status the refusal was answered with.
	Status int
	Count  int64
	// FirstAt and LastAt are the first and the last refusal counted.
	FirstAt time.Time
	LastAt  time.Time
	// EventID and EventType are those of the latest refused delivery of
	// the row whose signature verified; empty when none did (the sender's
	// unsigned headers are never taken for them).
	EventID   string
	EventType string
	// Listed says the ingress's list of receivers held the receiver (the
	// default one always): PruneRefusals keeps such rows over the others.
	Listed bool
}

// RefusedFilter selects rows of the record; every field is optional.
type RefusedFilter struct {
	// Receiver is a receiver as ReceiverName shows it ("default" for POST
	// /webhooks).
	Receiver string
	Reason   string
	// Since selects the rows of the minutes that end after it.
	Since time.Time
	// Limit bounds the rows returned (DefaultRefusedPage).
	Limit int
}

// RefusalTotal is the refusals of one receiver for one reason, summed over
// the minutes RefusalSummary reads.
type RefusalTotal struct {
	Receiver string
	Reason   string
	Status   int
	Count    int64
	FirstAt  time.Time
	LastAt   time.Time
}

// minuteOf is the Unix time of the start of t's minute.
func minuteOf(t time.Time) int64 { return t.Truncate(time.Minute).Unix() }

// RecordRefusals adds rows to the record: a row of the same minute,
// receiver and reason gets their counts added, the earlier first and the
// later last refusal, the row's event when it has one, and Listed when
// either says so. Every ingress
// calls it with what it refused since its last call (at most once a
// second), so rows of one key from several replicas merge into one.
// Rows are written in key order, so that two replicas writing at once
// take their locks in the same order.
func (s *Store) RecordRefusals(ctx context.Context, rows []RefusedDelivery) error {
	if len(rows) == 0 {
		return nil
	}
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(a, b RefusedDelivery) int {
		if c := a.Minute.Compare(b.Minute); c != 0 {
			return c
		}
		if c := strings.Compare(a.Receiver, b.Receiver); c != 0 {
			return c
		}
		return strings.Compare(a.Reason, b.Reason)
	})
	const cols = 10
	args := make([]any, 0, cols*len(rows))
	for _, r := range rows {
		args = append(args, minuteOf(r.Minute), r.Receiver, r.Reason, r.Status, r.Count, r.FirstAt.UnixMilli(), r.LastAt.UnixMilli(), r.EventID, r.EventType, r.Listed)
	}
	//nolint:gosec // only placeholders are concatenated; every value is a bound argument
	q := `INSERT INTO refused_deliveries (minute_unix, receiver, reason, status, count, first_unix_ms, last_unix_ms, event_id, event_type, listed)
		VALUES ` + placeholders(len(rows), cols) + `
		ON CONFLICT (minute_unix, receiver, reason) DO UPDATE SET
			count = refused_deliveries.count + excluded.count,
			status = excluded.status,
			first_unix_ms = CASE WHEN excluded.first_unix_ms < refused_deliveries.first_unix_ms THEN excluded.first_unix_ms ELSE refused_deliveries.first_unix_ms END,
			last_unix_ms = CASE WHEN excluded.last_unix_ms > refused_deliveries.last_unix_ms THEN excluded.last_unix_ms ELSE refused_deliveries.last_unix_ms END,
			event_id = CASE WHEN excluded.event_id <> '' THEN excluded.event_id ELSE refused_deliveries.event_id END,
			event_type = CASE WHEN excluded.event_id <> '' THEN excluded.event_type ELSE refused_deliveries.event_type END,
			listed = excluded.listed OR refused_deliveries.listed`
	if _, err := s.db.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("store: recording refused deliveries: %w", err)
	}
	return nil
}

// PruneRefusals removes the rows of the minutes before before, and then
// the oldest rows beyond the newest maxRows (none when maxRows <= 0): the
// rows of receivers the list did not hold first, so that made-up names
// cannot push the real receivers' rows out, then the oldest listed rows
// if they alone pass maxRows. It returns how many rows it removed.
func (s *Store) PruneRefusals(ctx context.Context, before time.Time, maxRows int) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM refused_deliveries WHERE minute_unix < $1`, minuteOf(before))
	if err != nil {
		return 0, fmt.Errorf("store: pruning refused deliveries: %w", err)
	}
	n, _ := res.RowsAffected()
	if maxRows <= 0 {
		return n, nil
	}
	var listed int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM refused_deliveries WHERE listed`).Scan(&listed); err != nil {
		return n, fmt.Errorf("store: pruning refused deliveries: %w", err)
	}
	m, err := s.pruneRefusalsPast(ctx, false, max(0, maxRows-listed))
	n += m
	if err != nil || listed <= maxRows {
		return n, err
	}
	m, err = s.pruneRefusalsPast(ctx, true, maxRows)
	return n + m, err
}

// pruneRefusalsPast removes the rows of the listed or the other receivers
// past the newest keep of them, by the primary key's order.
func (s *Store) pruneRefusalsPast(ctx context.Context, listed bool, keep int) (int64, error) {
	all := "LIMIT ALL"
	if s.dialect == SQLite {
		all = "LIMIT -1"
	}
	res, err := s.db.ExecContext(ctx, `DELETE FROM refused_deliveries WHERE listed = $1 AND (minute_unix, receiver, reason) IN (
		SELECT minute_unix, receiver, reason FROM refused_deliveries WHERE listed = $1
		ORDER BY minute_unix DESC, receiver DESC, reason DESC `+all+` OFFSET $2)`, listed, keep)
	if err != nil {
		return 0, fmt.Errorf("store: pruning refused deliveries: %w", err)
	}
	m, _ := res.RowsAffected()
	return m, nil
}

// refusedWhere turns f into a condition and its arguments.
func refusedWhere(f RefusedFilter) (string, []any) {
	var conds []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.Receiver != "" {
		r := f.Receiver
		if r == ReceiverName("") {
			r = ""
		}
		conds = append(conds, "receiver = "+arg(r))
	}
	if f.Reason != "" {
		conds = append(conds, "reason = "+arg(f.Reason))
	}
	if !f.Since.IsZero() {
		// The minutes that end after Since: the one it falls in, and later.
		conds = append(conds, "minute_unix >= "+arg(minuteOf(f.Since)))
	}
	if len(conds) == 0 {
		return "", args
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// RefusedDeliveries returns the rows of the record that f selects, newest
// minute first (within a minute, the latest refusal first).
func (s *Store) RefusedDeliveries(ctx context.Context, f RefusedFilter) ([]RefusedDelivery, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultRefusedPage
	}
	cond, args := refusedWhere(f)
	args = append(args, limit)
	// Only fixed SQL and placeholders are concatenated; every value is a
	// bound argument.
	q := `SELECT minute_unix, receiver, reason, status, count, first_unix_ms, last_unix_ms, event_id, event_type, listed FROM refused_deliveries` + cond + //nolint:gosec // see above
		` ORDER BY minute_unix DESC, last_unix_ms DESC, receiver, reason LIMIT $` + strconv.Itoa(len(args))
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: listing refused deliveries: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []RefusedDelivery
	for rows.Next() {
		var r RefusedDelivery
		var minute, first, last int64
		if err := rows.Scan(&minute, &r.Receiver, &r.Reason, &r.Status, &r.Count, &first, &last, &r.EventID, &r.EventType, &r.Listed); err != nil {
			return nil, err
		}
		r.Minute, r.FirstAt, r.LastAt = time.Unix(minute, 0).UTC(), time.UnixMilli(first).UTC(), time.UnixMilli(last).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// RefusalSummary sums the record since a time by receiver and reason, the
// most refused first: what the overview shows of the refusals.
func (s *Store) RefusalSummary(ctx context.Context, since time.Time) ([]RefusalTotal, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT receiver, reason, max(status), sum(count), min(first_unix_ms), max(last_unix_ms)
		FROM refused_deliveries WHERE minute_unix >= $1 GROUP BY receiver, reason ORDER BY sum(count) DESC, receiver, reason`, minuteOf(since))
	if err != nil {
		return nil, fmt.Errorf("store: summing refused deliveries: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []RefusalTotal
	for rows.Next() {
		var r RefusalTotal
		var first, last int64
		if err := rows.Scan(&r.Receiver, &r.Reason, &r.Status, &r.Count, &first, &last); err != nil {
			return nil, err
		}
		r.FirstAt, r.LastAt = time.UnixMilli(first).UTC(), time.UnixMilli(last).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}
