package store

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// InsertStrategies are the ways of writing one group commit's batch that
// BenchmarkInsertEvents compares; "as-built" is insertEvents, which is
// "unnest-plain" since issue 22 (it was "values-plain").
var InsertStrategies = map[string]func(*Store, context.Context, []InboxEvent) (map[string]bool, error){
	"as-built":     (*Store).insertEvents,
	"values":       (*Store).insertValues,
	"values-plain": (*Store).insertValuesPlain,
	"unnest":       (*Store).insertUnnest,
	"unnest-plain": (*Store).insertEvents,
	"copy":         (*Store).insertCopy,
}

// insertValues is the group commit's INSERT before issue 22: one row of
// 11 placeholders per event, so the statement's text (and PostgreSQL's
// parse and plan) differs with each batch size.
func (s *Store) insertValues(ctx context.Context, evs []InboxEvent) (map[string]bool, error) {
	const cols = 11
	args := make([]any, 0, len(evs)*cols)
	for _, ev := range evs {
		ev = ev.stored()
		at := ev.ReceivedAt.UTC()
		args = append(args, ev.EventID, ev.EventType, ev.Kind, int(ev.Lane), ev.Receiver, ev.EndpointID, at, ev.Body, ev.TraceContext, at, ev.SubjectEventID)
	}
	//nolint:gosec // only placeholders are concatenated; every value is a bound argument
	q := `INSERT INTO inbox (event_id, event_type, kind, lane, receiver, endpoint_id, received_at, body, trace_context, next_attempt_at, subject_event_id)
		VALUES ` + placeholders(len(evs), cols) + ` ON CONFLICT (event_id) DO NOTHING RETURNING event_id`
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	inserted := make(map[string]bool, len(evs))
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		inserted[id] = true
	}
	return inserted, rows.Err()
}

// insertValuesPlain is insertValues without ON CONFLICT and without
// RETURNING: all were new when it succeeds; it falls back to insertValues
// when an id is already recorded.
func (s *Store) insertValuesPlain(ctx context.Context, evs []InboxEvent) (map[string]bool, error) {
	const cols = 11
	args := make([]any, 0, len(evs)*cols)
	for _, ev := range evs {
		ev = ev.stored()
		at := ev.ReceivedAt.UTC()
		args = append(args, ev.EventID, ev.EventType, ev.Kind, int(ev.Lane), ev.Receiver, ev.EndpointID, at, ev.Body, ev.TraceContext, at, ev.SubjectEventID)
	}
	//nolint:gosec // only placeholders are concatenated; every value is a bound argument
	q := `INSERT INTO inbox (event_id, event_type, kind, lane, receiver, endpoint_id, received_at, body, trace_context, next_attempt_at, subject_event_id)
		VALUES ` + placeholders(len(evs), cols)
	_, err := s.db.ExecContext(ctx, q, args...)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return s.insertValues(ctx, evs)
	}
	if err != nil {
		return nil, err
	}
	return allInserted(evs), nil
}

func allInserted(evs []InboxEvent) map[string]bool {
	m := make(map[string]bool, len(evs))
	for _, ev := range evs {
		m[ev.EventID] = true
	}
	return m
}

// insertUnnest is the group commit's INSERT with ON CONFLICT always (its
// fallback when an id is already recorded).
func (s *Store) insertUnnest(ctx context.Context, evs []InboxEvent) (map[string]bool, error) {
	return s.queryInserted(ctx, unnestInsert+` ON CONFLICT (event_id) DO NOTHING RETURNING event_id`, unnestColumns(evs)...)
}

func (s *Store) queryInserted(ctx context.Context, q string, args ...any) (map[string]bool, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	inserted := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		inserted[id] = true
	}
	return inserted, rows.Err()
}

// copyTables remembers the connections that have their temporary table.
var copyTables sync.Map

// insertCopy copies the batch into a temporary table, then inserts from it
// what is not recorded yet, in one transaction (COPY cannot skip
// conflicts itself).
func (s *Store) insertCopy(ctx context.Context, evs []InboxEvent) (map[string]bool, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	inserted := map[string]bool{}
	err = conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		if _, ok := copyTables.Load(pc); !ok {
			if _, err := pc.Exec(ctx, `CREATE TEMP TABLE inbox_load (LIKE inbox INCLUDING DEFAULTS) ON COMMIT DELETE ROWS`); err != nil {
				return err
			}
			copyTables.Store(pc, true)
		}
		tx, err := pc.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		cols := []string{"event_id", "event_type", "kind", "lane", "receiver", "endpoint_id", "received_at", "body", "trace_context", "next_attempt_at", "subject_event_id"}
		src := make([][]any, len(evs))
		for i, ev := range evs {
			ev = ev.stored()
			at := ev.ReceivedAt.UTC()
			src[i] = []any{ev.EventID, ev.EventType, ev.Kind, int16(ev.Lane), ev.Receiver, ev.EndpointID, at, ev.Body, ev.TraceContext, at, ev.SubjectEventID}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"inbox_load"}, cols, pgx.CopyFromRows(src)); err != nil {
			return fmt.Errorf("copy: %w", err)
		}
		rows, err := tx.Query(ctx, `INSERT INTO inbox (event_id, event_type, kind, lane, receiver, endpoint_id, received_at, body, trace_context, next_attempt_at, subject_event_id)
			SELECT event_id, event_type, kind, lane, receiver, endpoint_id, received_at, body, trace_context, next_attempt_at, subject_event_id FROM inbox_load
			ON CONFLICT (event_id) DO NOTHING RETURNING event_id`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			inserted[id] = true
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	return inserted, err
}
