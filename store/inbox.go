package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// InboxEvent is a verified webhook delivery as recorded by the ingress.
type InboxEvent struct {
	EventID      string
	EventType    string
	Receiver     string // "" for POST /webhooks
	EndpointID   string // whose secret verified it ("env" for SITEOPS_WEBHOOK_SECRETS)
	ReceivedAt   time.Time
	Body         []byte
	TraceContext string // W3C traceparent of the delivery, when it had one
	Attempts     int
}

// RecordEvent inserts a verified event unless its id is already recorded.
// It reports whether the event is new: the primary key on the event id is
// the store that enforces uniqueness.
func (s *Store) RecordEvent(ctx context.Context, ev InboxEvent) (bool, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO inbox (event_id, event_type, receiver, endpoint_id, received_at, body, trace_context, next_attempt_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (event_id) DO NOTHING`,
		ev.EventID, ev.EventType, ev.Receiver, ev.EndpointID, ev.ReceivedAt.UTC(), ev.Body, ev.TraceContext, ev.ReceivedAt.UTC())
	if err != nil {
		return false, fmt.Errorf("store: recording event %s: %w", ev.EventID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// ClaimEvents takes up to limit undispatched events whose next attempt is
// due, oldest first, and leases them until now+lease so that other relay
// replicas skip them. On PostgreSQL concurrent claimers never block each
// other (FOR UPDATE SKIP LOCKED); SQLite has a single writer.
func (s *Store) ClaimEvents(ctx context.Context, limit int, lease time.Duration) ([]InboxEvent, error) {
	now := s.now().UTC()
	skipLocked := ""
	if s.dialect == Postgres {
		skipLocked = " FOR UPDATE SKIP LOCKED"
	}
	q := `UPDATE inbox SET next_attempt_at = $1
		WHERE event_id IN (SELECT event_id FROM inbox WHERE dispatched_at IS NULL AND next_attempt_at <= $2
			ORDER BY received_at LIMIT $3` + skipLocked + `)
		RETURNING event_id, event_type, receiver, endpoint_id, received_at, body, trace_context, attempts`
	rows, err := s.db.QueryContext(ctx, q, now.Add(lease), now, limit)
	if err != nil {
		return nil, fmt.Errorf("store: claiming inbox events: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var evs []InboxEvent
	for rows.Next() {
		var ev InboxEvent
		if err := rows.Scan(&ev.EventID, &ev.EventType, &ev.Receiver, &ev.EndpointID, &ev.ReceivedAt, &ev.Body, &ev.TraceContext, &ev.Attempts); err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].ReceivedAt.Before(evs[j].ReceivedAt) })
	return evs, rows.Err()
}

// MarkDispatchedBatch records many handled events in one statement per
// outcome, so that a relay batch costs one commit, not one per event.
func (s *Store) MarkDispatchedBatch(ctx context.Context, byOutcome map[string][]string) error {
	now := s.now().UTC()
	for outcome, ids := range byOutcome {
		if len(ids) == 0 {
			continue
		}
		args := make([]any, 0, len(ids)+2)
		args = append(args, now, outcome)
		var in strings.Builder
		for i, id := range ids {
			if i > 0 {
				in.WriteByte(',')
			}
			fmt.Fprintf(&in, "$%d", i+3)
			args = append(args, id)
		}
		// Only placeholders are concatenated; every value is a bound argument.
		q := `UPDATE inbox SET dispatched_at = $1, outcome = $2, attempts = attempts + 1, last_error = '' WHERE event_id IN (` + in.String() + `)` //nolint:gosec // see above
		if _, err := s.db.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("store: marking %d events %s: %w", len(ids), outcome, err)
		}
	}
	return nil
}

// MarkFailed records a failed dispatch; the event is tried again at next.
func (s *Store) MarkFailed(ctx context.Context, eventID, reason string, next time.Time) error {
	_, err := s.db.ExecContext(ctx, `UPDATE inbox SET attempts = attempts + 1, last_error = $1, next_attempt_at = $2 WHERE event_id = $3`,
		reason, next.UTC(), eventID)
	return err
}

// InboxStatus is a snapshot of the inbox for metrics and tests.
type InboxStatus struct {
	Total         int
	Undispatched  int
	OldestPending time.Time // zero when nothing is pending
}

// InboxStatus counts the inbox and finds its oldest undispatched event.
func (s *Store) InboxStatus(ctx context.Context) (InboxStatus, error) {
	var st InboxStatus
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(CASE WHEN dispatched_at IS NULL THEN 1 ELSE 0 END), 0) FROM inbox`).
		Scan(&st.Total, &st.Undispatched)
	if err != nil || st.Undispatched == 0 {
		return st, err
	}
	err = s.db.QueryRowContext(ctx, `SELECT received_at FROM inbox WHERE dispatched_at IS NULL ORDER BY received_at LIMIT 1`).Scan(&st.OldestPending)
	return st, err
}

// InboxOutcome returns how an event was handled ("" while pending) and how
// many dispatch attempts it took.
func (s *Store) InboxOutcome(ctx context.Context, eventID string) (outcome string, attempts int, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT outcome, attempts FROM inbox WHERE event_id = $1`, eventID).Scan(&outcome, &attempts)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, fmt.Errorf("%w: event %s", ErrNotFound, eventID)
	}
	return outcome, attempts, err
}

// PurgeInbox deletes dispatched events received before cutoff and returns
// how many went. Undispatched events are kept whatever their age.
func (s *Store) PurgeInbox(ctx context.Context, cutoff time.Time) (int, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM inbox WHERE dispatched_at IS NOT NULL AND received_at < $1`, cutoff.UTC())
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// SetRotation records that endpointID is the new endpoint of a rotation run
// by workflowID, so that the relay can tell it about verified deliveries.
func (s *Store) SetRotation(ctx context.Context, endpointID, workflowID string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO rotations (endpoint_id, workflow_id, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (endpoint_id) DO UPDATE SET workflow_id = excluded.workflow_id`, endpointID, workflowID, s.now().UTC())
	return err
}

// RotationFor returns the rotation workflow waiting for deliveries on
// endpointID, or ErrNotFound.
func (s *Store) RotationFor(ctx context.Context, endpointID string) (string, error) {
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT workflow_id FROM rotations WHERE endpoint_id = $1`, endpointID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	return id, err
}

// EndRotation forgets a rotation's endpoint.
func (s *Store) EndRotation(ctx context.Context, endpointID string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM rotations WHERE endpoint_id = $1`, endpointID)
	return err
}

// EndpointVerifiedType is the type of the inbox event that records the
// first verified delivery signed with an endpoint's stored secret. The relay
// tells the endpoint's rotation workflow, if it has one.
const EndpointVerifiedType = "siteops.endpoint.verified"

// MarkEndpointVerified notes a verified delivery signed with endpointID's
// stored secret. The first one (and only the first, across replicas) also
// records an EndpointVerifiedType event in the inbox, in the same
// transaction. It reports whether this was the first.
func (s *Store) MarkEndpointVerified(ctx context.Context, endpointID, eventID string) (bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	now := s.now().UTC()
	res, err := tx.ExecContext(ctx, `UPDATE webhook_secrets SET first_verified_at = $1, first_verified_event = $2
		WHERE endpoint_id = $3 AND first_verified_at IS NULL`, now, eventID, endpointID)
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	body := fmt.Sprintf(`{"id":%q,"type":%q,"created_at":%q,"data":{"endpoint_id":%q,"event_id":%q}}`,
		"verified:"+endpointID, EndpointVerifiedType, now.Format("2006-01-02T15:04:05.000Z"), endpointID, eventID)
	if _, err := tx.ExecContext(ctx, `INSERT INTO inbox (event_id, event_type, receiver, endpoint_id, received_at, body, next_attempt_at)
		VALUES ($1, $2, '', $3, $4, $5, $4) ON CONFLICT (event_id) DO NOTHING`,
		"verified:"+endpointID, EndpointVerifiedType, endpointID, now, []byte(body)); err != nil {
		return false, err
	}
	return true, tx.Commit()
}
