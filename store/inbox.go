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

// Kinds of inbox records.
const (
	// KindWebhook is a verified webhook delivery.
	KindWebhook = "webhook"
	// KindEndpointVerified records the first verified delivery signed with
	// an endpoint's stored secret: EndpointID and SubjectEventID say which.
	KindEndpointVerified = "endpoint-verified"
)

// Lane is a queue of the inbox: claims take from one lane, so that a flood
// in one never delays the other. Which records go to which lane is the
// caller's choice.
type Lane int

// The lanes.
const (
	LanePriority Lane = 0
	LaneBulk     Lane = 1
)

// EnvEndpoint is the EndpointID of an event that a secret of
// SITEOPS_WEBHOOK_SECRETS verified: no endpoint's.
const EnvEndpoint = "env"

// InboxEvent is a record of the inbox: a verified webhook delivery as
// recorded by the ingress, or (Kind) a record siteops makes itself.
type InboxEvent struct {
	EventID      string
	EventType    string
	Kind         string // KindWebhook when empty
	Lane         Lane
	Receiver     string // "" for POST /webhooks
	EndpointID   string // whose secret verified it (EnvEndpoint for SITEOPS_WEBHOOK_SECRETS)
	ReceivedAt   time.Time
	Body         []byte
	TraceContext string // W3C traceparent of the delivery, when it had one
	Attempts     int
	// Failures counts the failed dispatch attempts since the event was
	// recorded or last replayed: the relay's backoff and dead-letter
	// bound read it.
	Failures int
	// SubjectEventID is the webhook event a KindEndpointVerified record is
	// about.
	SubjectEventID string
}

// stored is ev as a row of the inbox holds it: a webhook unless its kind is
// given, and an empty body as empty bytes (a nil slice binds as NULL, which
// the body column refuses: a verified empty body is recorded as malformed).
func (ev InboxEvent) stored() InboxEvent {
	if ev.Kind == "" {
		ev.Kind = KindWebhook
	}
	if ev.Body == nil {
		ev.Body = []byte{}
	}
	return ev
}

// RecordEvent inserts a verified event unless its id is already recorded.
// It reports whether the event is new: the primary key on the event id is
// the store that enforces uniqueness. On PostgreSQL concurrent calls share
// one commit (groupcommit.go); each still returns after its row is durable.
func (s *Store) RecordEvent(ctx context.Context, ev InboxEvent) (bool, error) {
	if s.group != nil {
		return s.group.record(ctx, ev)
	}
	ev = ev.stored()
	res, err := s.db.ExecContext(ctx, `INSERT INTO inbox (event_id, event_type, kind, lane, receiver, endpoint_id, received_at, body, trace_context, next_attempt_at, subject_event_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (event_id) DO NOTHING`,
		ev.EventID, ev.EventType, ev.Kind, int(ev.Lane), ev.Receiver, ev.EndpointID, ev.ReceivedAt.UTC(), ev.Body, ev.TraceContext, ev.ReceivedAt.UTC(), ev.SubjectEventID)
	if err != nil {
		return false, fmt.Errorf("store: recording event %s: %w", ev.EventID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// RecordHandled inserts a verified delivery that needs no dispatch, as
// already handled with outcome and reason (the ingress records a body that
// verifies but is not an event envelope this way, with the outcome
// malformed: retrying cannot help, so it is answered 2xx and kept for
// `siteops events list --outcome malformed`). The relay never claims it.
// Like RecordEvent it reports whether the record is new.
func (s *Store) RecordHandled(ctx context.Context, ev InboxEvent, outcome, reason string) (bool, error) {
	ev = ev.stored()
	at := ev.ReceivedAt.UTC()
	res, err := s.db.ExecContext(ctx, `INSERT INTO inbox (event_id, event_type, kind, lane, receiver, endpoint_id, received_at, body, trace_context, next_attempt_at, subject_event_id, dispatched_at, outcome, last_error)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $7, $10, $7, $11, $12) ON CONFLICT (event_id) DO NOTHING`,
		ev.EventID, ev.EventType, ev.Kind, int(ev.Lane), ev.Receiver, ev.EndpointID, at, ev.Body, ev.TraceContext, ev.SubjectEventID, outcome, reason)
	if err != nil {
		return false, fmt.Errorf("store: recording handled event %s: %w", ev.EventID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// ClaimEvents takes up to limit undispatched events of a lane whose next
// attempt is due, the earliest due first (a new event is due when it is
// received, a failed one at its next attempt), and leases them until
// now+lease so that other relay replicas skip them; it returns them in the
// order received. On PostgreSQL concurrent claimers never block each other
// (FOR UPDATE SKIP LOCKED); SQLite has a single writer.
//
// The order is the index's (inbox_pending: lane, next_attempt_at), so a
// claim reads only the rows it takes, however many are pending. Ordered by
// received_at, every claim read and sorted all the lane's due events: with
// 10,000 pending on SQLite under the race detector, 100 ms for a claim of
// 32, while it held the store's one connection and the other lane's claims
// waited for it (TestWaitedForEventsPassBulkOnes).
func (s *Store) ClaimEvents(ctx context.Context, lane Lane, limit int, lease time.Duration) ([]InboxEvent, error) {
	now := s.now().UTC()
	rows, err := s.db.QueryContext(ctx, s.claimQuery(), now.Add(lease), now, limit, int(lane))
	if err != nil {
		return nil, fmt.Errorf("store: claiming inbox events: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var evs []InboxEvent
	for rows.Next() {
		var ev InboxEvent
		var lane int
		if err := rows.Scan(&ev.EventID, &ev.EventType, &ev.Kind, &lane, &ev.Receiver, &ev.EndpointID, &ev.ReceivedAt, &ev.Body, &ev.TraceContext, &ev.Attempts, &ev.Failures, &ev.SubjectEventID); err != nil {
			return nil, err
		}
		ev.Lane = Lane(lane)
		evs = append(evs, ev)
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].ReceivedAt.Before(evs[j].ReceivedAt) })
	return evs, rows.Err()
}

// claimQuery is ClaimEvents' statement: $1 the lease's end, $2 now, $3 the
// limit, $4 the lane.
//
// On PostgreSQL the claimed ids go as an array: with IN (subquery) the
// planner may join the subquery's rows to a scan of the whole inbox (it
// did on 8,000 rows), where = ANY of an array finds them by the primary key.
func (s *Store) claimQuery() string {
	const (
		due = `SELECT event_id FROM inbox WHERE dispatched_at IS NULL AND lane = $4 AND next_attempt_at <= $2
			ORDER BY next_attempt_at LIMIT $3`
		returning = `
		RETURNING event_id, event_type, kind, lane, receiver, endpoint_id, received_at, body, trace_context, attempts, failures, subject_event_id`
	)
	if s.dialect == Postgres {
		return `UPDATE inbox SET next_attempt_at = $1 WHERE event_id = ANY(ARRAY(` + due + ` FOR UPDATE SKIP LOCKED))` + returning
	}
	return `UPDATE inbox SET next_attempt_at = $1 WHERE event_id IN (` + due + `)` + returning
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
	_, err := s.db.ExecContext(ctx, `UPDATE inbox SET attempts = attempts + 1, failures = failures + 1, last_error = $1, next_attempt_at = $2 WHERE event_id = $3`,
		reason, next.UTC(), eventID)
	return err
}

// InboxBacklog is what the inbox holds back: the relay's gauges.
type InboxBacklog struct {
	Undispatched  int
	OldestPending time.Time // zero when nothing is pending
	// Dead counts the dead letters: events the relay stopped retrying.
	Dead int
}

// InboxBacklog counts the pending events and the dead letters, and finds
// the oldest pending one. Each of its reads is served by a partial index
// (inbox_pending, inbox_dead, inbox_pending_age), so its cost follows the
// backlog, never the dispatched history the retention keeps: the relay
// reads it every second, on SQLite with the store's one connection.
func (s *Store) InboxBacklog(ctx context.Context) (InboxBacklog, error) {
	var b InboxBacklog
	err := s.db.QueryRowContext(ctx, pendingCount).Scan(&b.Undispatched)
	if err != nil {
		return b, err
	}
	err = s.db.QueryRowContext(ctx, deadCount).Scan(&b.Dead)
	if err != nil || b.Undispatched == 0 {
		return b, err
	}
	err = s.db.QueryRowContext(ctx, oldestPending).Scan(&b.OldestPending)
	if errors.Is(err, sql.ErrNoRows) {
		// Dispatched since they were counted: a relay works beside.
		return b, nil
	}
	return b, err
}

// InboxBacklog's reads. The conditions are literals, not arguments, so that
// SQLite uses the partial indexes.
const (
	pendingCount  = `SELECT COUNT(*) FROM inbox WHERE dispatched_at IS NULL`
	deadCount     = `SELECT COUNT(*) FROM inbox WHERE ` + deadLetter
	oldestPending = `SELECT received_at FROM inbox WHERE dispatched_at IS NULL ORDER BY received_at LIMIT 1`
)

// InboxStatus is a snapshot of the whole inbox, for tools and tests.
type InboxStatus struct {
	Total int
	InboxBacklog
}

// InboxStatus counts the inbox (every event kept: a read of the whole
// table) and reads its backlog.
func (s *Store) InboxStatus(ctx context.Context) (InboxStatus, error) {
	var st InboxStatus
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM inbox`).Scan(&st.Total); err != nil {
		return st, err
	}
	b, err := s.InboxBacklog(ctx)
	st.InboxBacklog = b
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

// PurgeInbox deletes dispatched events received before cutoff, with their
// history, and returns how many went. Undispatched events and dead letters
// are kept whatever their age.
func (s *Store) PurgeInbox(ctx context.Context, cutoff time.Time) (int, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	const purged = `SELECT event_id FROM inbox WHERE dispatched_at IS NOT NULL AND outcome <> $1 AND received_at < $2`
	if _, err := tx.ExecContext(ctx, `DELETE FROM inbox_history WHERE event_id IN (`+purged+`)`, OutcomeDead, cutoff.UTC()); err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM inbox WHERE dispatched_at IS NOT NULL AND outcome <> $1 AND received_at < $2`, OutcomeDead, cutoff.UTC())
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return int(n), tx.Commit()
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

// MarkEndpointVerified notes a verified delivery (eventID) signed with
// endpointID's stored secret. The first one (and only the first, across
// replicas) also records a KindEndpointVerified record in the given lane of
// the inbox, in the same transaction. It reports whether this was the
// first.
func (s *Store) MarkEndpointVerified(ctx context.Context, endpointID, eventID string, lane Lane) (bool, error) {
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
	if _, err := tx.ExecContext(ctx, `INSERT INTO inbox (event_id, event_type, kind, lane, receiver, endpoint_id, received_at, body, next_attempt_at, subject_event_id)
		VALUES ($1, '', $2, $3, '', $4, $5, $6, $5, $7) ON CONFLICT (event_id) DO NOTHING`,
		"verified:"+endpointID, KindEndpointVerified, int(lane), endpointID, now, []byte{}, eventID); err != nil {
		return false, err
	}
	return true, tx.Commit()
}
