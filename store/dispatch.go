package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// deadLetter selects the dead letters with the predicate of the partial
// index inbox_dead, which SQLite uses only for the same literal.
const deadLetter = `outcome = '` + OutcomeDead + `'`

// History kinds.
const (
	// HistoryAttempt is a dispatch attempt.
	HistoryAttempt = "attempt"
	// HistoryReplay is a replay asked for by someone.
	HistoryReplay = "replay"
)

// Dispatch is what one dispatch attempt of one inbox event came to.
type Dispatch struct {
	EventID string
	// Outcome is how the event was handled; empty when the attempt failed.
	Outcome string
	// WorkflowID is the workflow the event was for (reached, gone, or
	// tried), when there was one; RunID the run a SignalWithStart reached.
	WorkflowID string
	RunID      string
	// Error says why the attempt failed; Next is when to try again.
	Error string
	Next  time.Time
	// Dead marks the last failed attempt the relay allows: the event
	// becomes a dead letter instead of being tried at Next.
	Dead bool
}

// RecordDispatches records what the attempts of a claimed batch came to,
// in one transaction: one UPDATE per outcome (and per distinct failure),
// and one INSERT of every attempt into the history, each of which takes
// the attempt's number from the event's own counter. However large the
// batch, each statement binds a handful of arguments: the ids and rows go
// as one JSON argument (SQLite's driver binds many numbered arguments in
// quadratic time; the history rows of SQLite go as anonymous arguments).
func (s *Store) RecordDispatches(ctx context.Context, ds []Dispatch) error {
	if len(ds) == 0 {
		return nil
	}
	now := s.now().UTC()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: recording %d dispatches: %w", len(ds), err)
	}
	defer func() { _ = tx.Rollback() }()

	type failure struct {
		reason string
		next   int64
		dead   bool
	}
	handled := map[string][]string{}
	var outcomes []string // deterministic statements
	failed := map[failure][]string{}
	var failures []failure
	for _, d := range ds {
		if d.Outcome != "" {
			if _, ok := handled[d.Outcome]; !ok {
				outcomes = append(outcomes, d.Outcome)
			}
			handled[d.Outcome] = append(handled[d.Outcome], d.EventID)
			continue
		}
		f := failure{reason: d.Error, next: d.Next.UnixNano(), dead: d.Dead}
		if _, ok := failed[f]; !ok {
			failures = append(failures, f)
		}
		failed[f] = append(failed[f], d.EventID)
	}
	// Only fixed SQL is concatenated below; every value is a bound argument.
	for _, outcome := range outcomes {
		ids := handled[outcome]
		q := `UPDATE inbox SET dispatched_at = $1, outcome = $2, attempts = attempts + 1, last_error = '' WHERE ` + s.inJSON("event_id", 3) //nolint:gosec // see above
		if _, err := tx.ExecContext(ctx, q, now, outcome, jsonArg(ids)); err != nil {
			return fmt.Errorf("store: marking %d events %s: %w", len(ids), outcome, err)
		}
	}
	for _, f := range failures {
		ids := failed[f]
		q := `UPDATE inbox SET attempts = attempts + 1, failures = failures + 1, last_error = $1, next_attempt_at = $2 WHERE ` + s.inJSON("event_id", 3) //nolint:gosec // see above
		args := []any{f.reason, time.Unix(0, f.next).UTC(), jsonArg(ids)}
		if f.dead {
			q = `UPDATE inbox SET attempts = attempts + 1, failures = failures + 1, last_error = $1, dispatched_at = $2, outcome = $3 WHERE ` + s.inJSON("event_id", 4) //nolint:gosec // see above
			args = []any{f.reason, now, OutcomeDead, jsonArg(ids)}
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("store: recording %d failed dispatches: %w", len(ids), err)
		}
	}
	if err := s.insertAttempts(ctx, tx, now, ds); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: recording %d dispatches: %w", len(ds), err)
	}
	return nil
}

// attemptRow is a history row as insertAttempts binds it (as JSON on
// PostgreSQL).
type attemptRow struct {
	EventID    string `json:"e"`
	Outcome    string `json:"o"`
	WorkflowID string `json:"w"`
	RunID      string `json:"r"`
	Error      string `json:"x"`
}

// insertAttempts writes the history rows of ds with one statement. The
// rows join the inbox so that each takes the number its event's counter
// has after this transaction's updates (exact even when two relays raced
// for an event), and so that an event purged meanwhile leaves no row.
func (s *Store) insertAttempts(ctx context.Context, tx *sql.Tx, now time.Time, ds []Dispatch) error {
	rows := make([]attemptRow, len(ds))
	for i, d := range ds {
		outcome := d.Outcome
		switch {
		case outcome != "":
		case d.Dead:
			outcome = OutcomeDead
		default:
			outcome = OutcomeFailed
		}
		rows[i] = attemptRow{EventID: d.EventID, Outcome: outcome, WorkflowID: d.WorkflowID, RunID: d.RunID, Error: d.Error}
	}
	const insert = `INSERT INTO inbox_history (event_id, at, kind, attempt, replay, outcome, workflow_id, run_id, error)
		SELECT i.event_id, `
	if s.dialect == Postgres {
		// Only fixed SQL is concatenated; every value is a bound argument.
		q := insert + `CAST($1 AS TIMESTAMPTZ), '` + HistoryAttempt + `', i.attempts, i.replays, j.o, j.w, j.r, j.x
			FROM jsonb_to_recordset(CAST(CAST($2 AS TEXT) AS jsonb)) AS j(e TEXT, o TEXT, w TEXT, r TEXT, x TEXT) JOIN inbox i ON i.event_id = j.e` //nolint:gosec // see above
		if _, err := tx.ExecContext(ctx, q, now, jsonArg(rows)); err != nil {
			return fmt.Errorf("store: recording the history of %d dispatches: %w", len(ds), err)
		}
		return nil
	}
	// SQLite reads rows of anonymous ? arguments fastest: its driver binds
	// them in linear time, and reads them without parsing JSON.
	for chunk := range slices.Chunk(rows, maxValuesRows) {
		args := make([]any, 0, 1+5*len(chunk))
		args = append(args, now)
		values := strings.Repeat("(?,?,?,?,?),", len(chunk))
		for _, r := range chunk {
			args = append(args, r.EventID, r.Outcome, r.WorkflowID, r.RunID, r.Error)
		}
		//nolint:gosec // only placeholders are concatenated; every value is a bound argument
		q := insert + `?, '` + HistoryAttempt + `', i.attempts, i.replays, v.column2, v.column3, v.column4, v.column5
			FROM (VALUES ` + values[:len(values)-1] + `) AS v JOIN inbox i ON i.event_id = v.column1`
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("store: recording the history of %d dispatches: %w", len(ds), err)
		}
	}
	return nil
}

// maxValuesRows bounds the rows of one VALUES list: 5 arguments each, far
// below SQLite's 32,766.
const maxValuesRows = 1000

// inJSON is the condition "col IN (the ids)" for ids bound as one JSON
// array, argument $n (jsonArg).
func (s *Store) inJSON(col string, n int) string {
	if s.dialect == Postgres {
		return fmt.Sprintf("%s IN (SELECT jsonb_array_elements_text(CAST(CAST($%d AS TEXT) AS jsonb)))", col, n)
	}
	return fmt.Sprintf("%s IN (SELECT value FROM json_each($%d))", col, n)
}

// jsonArg encodes v as the text of a JSON argument.
func jsonArg(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("store: encoding %T: %v", v, err)) // strings and structs of strings always encode
	}
	return string(b)
}

// timestampArg is the placeholder $n where the statement alone does not
// tell PostgreSQL its type (a SELECT list feeding an INSERT).
func (s *Store) timestampArg(n int) string {
	if s.dialect == Postgres {
		return fmt.Sprintf("CAST($%d AS TIMESTAMPTZ)", n)
	}
	return fmt.Sprintf("$%d", n)
}
