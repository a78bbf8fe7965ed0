package store

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultEventPage is how many events one page of ListEvents holds unless
// told otherwise.
const DefaultEventPage = 50

// ErrBadPage is returned for a page token that ListEvents did not make.
var ErrBadPage = errors.New("store: not a page token of `siteops events list`; copy it from the line that list printed")

// EventRecord is an inbox event as `siteops events` lists it: what was
// recorded and what became of it, without its body.
type EventRecord struct {
	EventID   string
	EventType string
	Kind      string
	// SiteID is data.site_id of the body, when it has one.
	SiteID     string
	Receiver   string // "" for POST /webhooks
	EndpointID string // whose secret verified it ("env" for SITEOPS_WEBHOOK_SECRETS)
	ReceivedAt time.Time
	// Outcome is how the relay handled the event ("" while it has not;
	// OutcomeDead for a dead letter), at DispatchedAt.
	Outcome      string
	DispatchedAt time.Time
	// Attempts counts every dispatch attempt; Failures the failed ones
	// since the event was recorded or last replayed.
	Attempts      int
	Failures      int
	LastError     string
	NextAttemptAt time.Time // when the relay tries it next, while not handled
	Replays       int
	ReplayedAt    time.Time
	ReplayedBy    string
	// SubjectEventID is the webhook event a KindEndpointVerified record is
	// about.
	SubjectEventID string
}

// Status is the event's outcome, or StatusPending or StatusFailing while
// the relay has not handled it.
func (r EventRecord) Status() string {
	switch {
	case r.Outcome != "":
		return r.Outcome
	case r.Failures > 0:
		return StatusFailing
	}
	return StatusPending
}

// EventFilter selects inbox events; every field is optional.
type EventFilter struct {
	Type   string
	SiteID string
	// Status is an outcome, StatusFailing, or StatusPending for every
	// event the relay has not handled (failing ones included).
	Status string
	Since  time.Time // received at or after
	// Page continues a listing from EventPage.Next.
	Page string
	// Limit bounds a page (DefaultEventPage).
	Limit int
}

// EventPage is one page of ListEvents, newest first.
type EventPage struct {
	Events []EventRecord
	// Next continues the listing; empty on the last page.
	Next string
}

// siteExpr reads data.site_id of a row's body, or the empty string when it has
// none (a record siteops made, or a body that is not JSON).
func (s *Store) siteExpr() string {
	if s.dialect == Postgres {
		return `COALESCE(CASE WHEN kind = 'webhook' THEN inbox_site_id(body) END, '')`
	}
	return `COALESCE(CASE WHEN kind = 'webhook' AND json_valid(CAST(body AS TEXT))
		THEN CAST(json_extract(CAST(body AS TEXT), '$.data.site_id') AS TEXT) END, '')`
}

// recordColumns are the columns scanRecord reads.
func (s *Store) recordColumns() string {
	return `event_id, event_type, kind, ` + s.siteExpr() + `, receiver, endpoint_id, received_at, outcome, dispatched_at,
		attempts, failures, last_error, next_attempt_at, replays, replayed_at, replayed_by, subject_event_id`
}

type scanner interface{ Scan(dest ...any) error }

func scanRecord(row scanner, extra ...any) (EventRecord, error) {
	var r EventRecord
	var dispatched, replayed sql.NullTime
	dest := []any{&r.EventID, &r.EventType, &r.Kind, &r.SiteID, &r.Receiver, &r.EndpointID, &r.ReceivedAt, &r.Outcome, &dispatched,
		&r.Attempts, &r.Failures, &r.LastError, &r.NextAttemptAt, &r.Replays, &replayed, &r.ReplayedBy, &r.SubjectEventID}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return r, err
	}
	r.DispatchedAt, r.ReplayedAt = dispatched.Time, replayed.Time
	r.ReceivedAt, r.NextAttemptAt = r.ReceivedAt.UTC(), r.NextAttemptAt.UTC()
	if !r.DispatchedAt.IsZero() {
		r.DispatchedAt = r.DispatchedAt.UTC()
	}
	if !r.ReplayedAt.IsZero() {
		r.ReplayedAt = r.ReplayedAt.UTC()
	}
	return r, nil
}

// where turns a filter into a condition and its arguments, numbered from
// $first.
func (s *Store) where(f EventFilter, first int) (string, []any, error) {
	var conds []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(first+len(args)-1)
	}
	if f.Type != "" {
		conds = append(conds, "event_type = "+arg(f.Type))
	}
	if f.SiteID != "" {
		conds = append(conds, s.siteExpr()+" = "+arg(f.SiteID))
	}
	switch f.Status {
	case "":
	case StatusPending:
		conds = append(conds, "dispatched_at IS NULL")
	case StatusFailing:
		conds = append(conds, "dispatched_at IS NULL AND failures > 0")
	case OutcomeDead:
		conds = append(conds, deadLetter)
	default:
		conds = append(conds, "outcome = "+arg(f.Status))
	}
	if !f.Since.IsZero() {
		conds = append(conds, "received_at >= "+arg(f.Since.UTC()))
	}
	if f.Page != "" {
		at, id, err := decodePage(f.Page)
		if err != nil {
			return "", nil, err
		}
		a, b := arg(at), arg(id)
		conds = append(conds, "(received_at < "+a+" OR (received_at = "+a+" AND event_id < "+b+"))")
	}
	if len(conds) == 0 {
		return "", args, nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args, nil
}

func encodePage(r EventRecord) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(r.ReceivedAt.UnixNano(), 10) + ":" + r.EventID))
}

func decodePage(tok string) (time.Time, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return time.Time{}, "", ErrBadPage
	}
	ns, id, ok := strings.Cut(string(b), ":")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return time.Time{}, "", ErrBadPage
	}
	return time.Unix(0, n).UTC(), id, nil
}

// ListEvents returns a page of the inbox events that f selects, newest
// first, with the token of the next page. Paging is by keyset (received
// time, then event id), so a page costs the same however deep it is and
// events recorded meanwhile never shift it.
func (s *Store) ListEvents(ctx context.Context, f EventFilter) (EventPage, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultEventPage
	}
	cond, args, err := s.where(f, 1)
	if err != nil {
		return EventPage{}, err
	}
	args = append(args, limit+1)
	// Only column names and placeholders are concatenated; every value is
	// a bound argument.
	q := `SELECT ` + s.recordColumns() + ` FROM inbox` + cond + //nolint:gosec // see above
		` ORDER BY received_at DESC, event_id DESC LIMIT $` + strconv.Itoa(len(args))
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return EventPage{}, fmt.Errorf("store: listing inbox events: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var page EventPage
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return EventPage{}, err
		}
		page.Events = append(page.Events, r)
	}
	if err := rows.Err(); err != nil {
		return EventPage{}, err
	}
	if len(page.Events) > limit {
		page.Events = page.Events[:limit]
		page.Next = encodePage(page.Events[limit-1])
	}
	return page, nil
}

// OldestEvent returns when the oldest event the inbox still keeps was
// received; zero when the inbox is empty.
func (s *Store) OldestEvent(ctx context.Context) (time.Time, error) {
	var at time.Time
	err := s.db.QueryRowContext(ctx, `SELECT received_at FROM inbox ORDER BY received_at LIMIT 1`).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	return at.UTC(), err
}

// HistoryEntry is a dispatch attempt of an event, or a replay of it.
type HistoryEntry struct {
	At   time.Time
	Kind string // HistoryAttempt or HistoryReplay
	// Attempt is the attempt's number (for a replay: the attempts made
	// before it); Replay the replay it followed (0: none), or for a
	// replay its own number.
	Attempt int
	Replay  int
	// Outcome is the attempt's outcome, OutcomeFailed, or OutcomeDead for
	// the failure that made the event a dead letter.
	Outcome string
	// WorkflowID is the workflow the attempt reached or tried; RunID the
	// run a SignalWithStart reached.
	WorkflowID string
	RunID      string
	Error      string
	Operator   string // who asked for a replay
}

// EventDetail is everything the inbox knows of an event.
type EventDetail struct {
	EventRecord
	// Body is the envelope as received, byte for byte.
	Body         []byte
	TraceContext string
	// Fingerprint and SecretReceiver describe the stored secret of
	// EndpointID that verified the event (never the secret); empty when
	// it is not stored here, as for "env" (SITEOPS_WEBHOOK_SECRETS).
	Fingerprint    string
	SecretReceiver string
	History        []HistoryEntry
}

// Target is the workflow the event's latest attempt reached or tried, and
// the run when known; empty when none had a workflow.
func (d EventDetail) Target() (workflowID, runID string) {
	for _, h := range slices.Backward(d.History) {
		if h.Kind == HistoryAttempt && h.WorkflowID != "" {
			return h.WorkflowID, h.RunID
		}
	}
	return "", ""
}

// Event returns an inbox event with its body, the secret that verified it
// and its history, or ErrNotFound.
func (s *Store) Event(ctx context.Context, eventID string) (EventDetail, error) {
	var d EventDetail
	var fp, recv sql.NullString
	// Only column names are concatenated; the id is a bound argument.
	q := `SELECT ` + s.recordColumns() + `, body, trace_context,
		(SELECT fingerprint FROM webhook_secrets w WHERE w.endpoint_id = inbox.endpoint_id),
		(SELECT receiver FROM webhook_secrets w WHERE w.endpoint_id = inbox.endpoint_id)
		FROM inbox WHERE event_id = $1` //nolint:gosec // see above
	r, err := scanRecord(s.db.QueryRowContext(ctx, q, eventID), &d.Body, &d.TraceContext, &fp, &recv)
	if errors.Is(err, sql.ErrNoRows) {
		return d, fmt.Errorf("%w: event %s is not in the inbox (never received, or purged after SITEOPS_INBOX_RETENTION)", ErrNotFound, eventID)
	}
	if err != nil {
		return d, fmt.Errorf("store: reading event %s: %w", eventID, err)
	}
	d.EventRecord, d.Fingerprint, d.SecretReceiver = r, fp.String, recv.String
	rows, err := s.db.QueryContext(ctx, `SELECT at, kind, attempt, replay, outcome, workflow_id, run_id, error, operator
		FROM inbox_history WHERE event_id = $1 ORDER BY id`, eventID)
	if err != nil {
		return d, fmt.Errorf("store: reading the history of event %s: %w", eventID, err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var h HistoryEntry
		if err := rows.Scan(&h.At, &h.Kind, &h.Attempt, &h.Replay, &h.Outcome, &h.WorkflowID, &h.RunID, &h.Error, &h.Operator); err != nil {
			return d, err
		}
		h.At = h.At.UTC()
		d.History = append(d.History, h)
	}
	return d, rows.Err()
}

// Replayed is an event queued again by a replay: as it was before, and
// where its last attempt went.
type Replayed struct {
	EventRecord
	// WorkflowID and RunID are the workflow (and run) the event's latest
	// attempt reached or tried before the replay; empty when none.
	WorkflowID string
	RunID      string
	// Replay is this replay's number.
	Replay int
}

// maxListPage bounds the page MatchingEventIDs reads at a time.
const maxListPage = 500

// ReplayEvents queues events for the relay again, all or none: each is
// made undispatched and due now, its failures are forgotten (a dead letter
// gets the relay's full number of attempts again), and the replay is
// recorded with who asked and when. It returns the events as they were, or
// ErrNotFound naming the ids the inbox does not hold (and replays none).
func (s *Store) ReplayEvents(ctx context.Context, ids []string, operator string) ([]Replayed, error) {
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	if len(ids) == 0 {
		return nil, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	out, err := s.replayIn(ctx, tx, ids, operator, s.now().UTC())
	if err != nil {
		return nil, err
	}
	if err := notInInbox(ids, out); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: recording the replay: %w", err)
	}
	return sortReplayed(out), nil
}

// PreviewReplay returns what ReplayEvents would, and changes nothing. It
// only reads, in no transaction of its own: a dry run takes neither
// SQLite's write lock (which every transaction of this store takes at its
// start) nor row locks, so the ingress and the relay never wait for it.
func (s *Store) PreviewReplay(ctx context.Context, ids []string) ([]Replayed, error) {
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	if len(ids) == 0 {
		return nil, nil
	}
	out, err := s.readReplayed(ctx, s.db, ids, "")
	if err != nil {
		return nil, err
	}
	if err := notInInbox(ids, out); err != nil {
		return nil, err
	}
	return sortReplayed(out), nil
}

// notInInbox is ErrNotFound naming the ids that found does not hold, or
// nil.
func notInInbox(ids []string, found []Replayed) error {
	if len(found) == len(ids) {
		return nil
	}
	held := map[string]bool{}
	for _, r := range found {
		held[r.EventID] = true
	}
	var missing []string
	for _, id := range ids {
		if !held[id] {
			missing = append(missing, id)
		}
	}
	return fmt.Errorf("%w: %s not in the inbox (never received, or purged after SITEOPS_INBOX_RETENTION); nothing was replayed",
		ErrNotFound, plural(len(missing), "event", "events")+" "+strings.Join(missing, ", "))
}

// sortReplayed orders replayed events as ListEvents does, newest first.
func sortReplayed(out []Replayed) []Replayed {
	slices.SortFunc(out, func(a, b Replayed) int {
		if c := b.ReceivedAt.Compare(a.ReceivedAt); c != 0 {
			return c
		}
		return strings.Compare(b.EventID, a.EventID)
	})
	return out
}

// querier is what readReplayed reads through: the store's pool, or a
// transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// readReplayed reads the events ids as a replay would queue them, with
// the workflow their latest attempt reached; lock is appended to the query
// (" FOR UPDATE" inside a replay's transaction on PostgreSQL).
func (s *Store) readReplayed(ctx context.Context, q querier, ids []string, lock string) ([]Replayed, error) {
	last := func(col string) string {
		return `COALESCE((SELECT ` + col + ` FROM inbox_history h WHERE h.event_id = inbox.event_id AND h.kind = '` + HistoryAttempt +
			`' AND h.workflow_id <> '' ORDER BY h.id DESC LIMIT 1), '')`
	}
	// Only column names and placeholders are concatenated; every value is
	// a bound argument.
	query := `SELECT ` + s.recordColumns() + `, ` + last("workflow_id") + `, ` + last("run_id") + //nolint:gosec // see above
		` FROM inbox WHERE ` + s.inJSON("event_id", 1) + lock
	rows, err := q.QueryContext(ctx, query, jsonArg(ids))
	if err != nil {
		return nil, fmt.Errorf("store: reading the events to replay: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []Replayed
	for rows.Next() {
		var r Replayed
		rec, err := scanRecord(rows, &r.WorkflowID, &r.RunID)
		if err != nil {
			return nil, err
		}
		r.EventRecord, r.Replay = rec, rec.Replays+1
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *Store) replayIn(ctx context.Context, tx *sql.Tx, ids []string, operator string, now time.Time) ([]Replayed, error) {
	lock := ""
	if s.dialect == Postgres {
		lock = " FOR UPDATE"
	}
	out, err := s.readReplayed(ctx, tx, ids, lock)
	if err != nil {
		return nil, err
	}
	//nolint:gosec // only fixed SQL is concatenated; every value is a bound argument
	// A replayed event is due as of its arrival: claims take the earliest
	// due first (ClaimEvents), so it goes ahead of the events that arrived
	// after it, as a replay that an operator waits for should, instead of
	// queueing behind its lane's whole backlog.
	reset := `UPDATE inbox SET dispatched_at = NULL, outcome = '', failures = 0, last_error = '', next_attempt_at = received_at,
		replays = replays + 1, replayed_at = $1, replayed_by = $2 WHERE ` + s.inJSON("event_id", 3)
	if _, err := tx.ExecContext(ctx, reset, now, operator, jsonArg(ids)); err != nil {
		return nil, fmt.Errorf("store: replaying events: %w", err)
	}
	//nolint:gosec // as above
	note := `INSERT INTO inbox_history (event_id, at, kind, attempt, replay, operator)
		SELECT event_id, ` + s.timestampArg(1) + `, '` + HistoryReplay + `', attempts, replays, $2 FROM inbox WHERE ` + s.inJSON("event_id", 3)
	if _, err := tx.ExecContext(ctx, note, now, operator, jsonArg(ids)); err != nil {
		return nil, fmt.Errorf("store: recording the replay: %w", err)
	}
	return out, nil
}

// MatchingEventIDs returns the ids of up to limit events that f selects
// (its Page and Limit aside), newest first, and whether more matched.
func (s *Store) MatchingEventIDs(ctx context.Context, f EventFilter, limit int) ([]string, bool, error) {
	f.Page = ""
	var ids []string
	for {
		f.Limit = min(maxListPage, limit-len(ids)+1)
		page, err := s.ListEvents(ctx, f)
		if err != nil {
			return nil, false, err
		}
		for _, r := range page.Events {
			ids = append(ids, r.EventID)
		}
		if len(ids) > limit {
			return ids[:limit], true, nil
		}
		if page.Next == "" {
			return ids, false, nil
		}
		f.Page = page.Next
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
