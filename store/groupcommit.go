package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Group commit: on PostgreSQL every delivery the ingress accepts must be
// committed before its 2xx, and one commit per delivery bounds the accept
// rate by the server's commit latency. Concurrent RecordEvent calls
// therefore share transactions: a call queues its event, and a flusher
// inserts whatever is queued in one multi-row INSERT. There is no batching
// window: a lone delivery commits at once, and under load the queue fills
// while the flushers are busy, so batches grow exactly when they help.
// Every caller still returns only after its own row is committed (or the
// commit failed, and it answers 503 so the sender retries).
//
// Two commits in flight, not more: every commit waits for PostgreSQL to
// flush its WAL, one flush at a time, so more flushers only queue there
// (their sessions wait on LWLock:WALWrite and IO:WALSync) with smaller
// batches each. Measured with BenchmarkIngressAccept on PostgreSQL
// (bench/README.md, 2026-11-24): 4 flushers committed about 3 deliveries
// per transaction, 6.5–6.9k/s, and PostgreSQL spent 3.7–3.9 s of CPU per
// 30,000; 2 committed 7–8, 11.8–12.4k/s, 1.0 s; 1 committed 13,
// 12.7–13.5k/s, but then one slow flush stalls every delivery.
const (
	groupFlushers = 2   // commits in flight at once
	groupMaxBatch = 200 // events per INSERT (11 arguments each)
	groupTimeout  = 30 * time.Second
)

type recordReq struct {
	ev   InboxEvent
	done chan recordResult // buffered, 1
}

type recordResult struct {
	isNew bool
	err   error
}

// groupCommitter batches RecordEvent calls of one Store.
type groupCommitter struct {
	s     *Store
	queue chan recordReq
	sem   chan struct{}
	once  sync.Once
	// commits and events count the flushes and the events they carried.
	commits, events atomic.Int64
}

// GroupCommits reports how many commits the group commit of RecordEvent
// has made on PostgreSQL and how many events they carried (zero on
// SQLite, which has none): events per commit is what one commit's cost is
// shared by (BenchmarkIngressAccept reports it).
func (s *Store) GroupCommits() (commits, events int64) {
	if s.group == nil {
		return 0, 0
	}
	return s.group.commits.Load(), s.group.events.Load()
}

func newGroupCommitter(s *Store) *groupCommitter {
	return &groupCommitter{s: s, queue: make(chan recordReq, groupFlushers*groupMaxBatch), sem: make(chan struct{}, groupFlushers)}
}

// record queues ev and waits for the commit that carries it.
func (g *groupCommitter) record(ctx context.Context, ev InboxEvent) (bool, error) {
	g.once.Do(func() { go g.loop() })
	req := recordReq{ev: ev, done: make(chan recordResult, 1)}
	select {
	case g.queue <- req:
	case <-ctx.Done():
		return false, fmt.Errorf("store: recording event %s: %w", ev.EventID, ctx.Err())
	}
	// Once queued the event may be committed even if ctx ends: the caller
	// then answers an error and the sender's retry is answered as a
	// duplicate, which is the contract's at-least-once.
	select {
	case r := <-req.done:
		return r.isNew, r.err
	case <-ctx.Done():
		return false, fmt.Errorf("store: recording event %s: %w", ev.EventID, ctx.Err())
	}
}

// loop takes the first queued request, drains whatever else is queued up
// to groupMaxBatch, and flushes the batch on one of groupFlushers slots.
// It runs for the life of the process: the queue is never closed, since
// callers may still be sending when the store closes (their flush then
// fails with the closed database's error).
func (g *groupCommitter) loop() {
	for first := range g.queue {
		g.sem <- struct{}{}
		batch := []recordReq{first}
	drain:
		for len(batch) < groupMaxBatch {
			select {
			case r := <-g.queue:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		go func() {
			defer func() { <-g.sem }()
			g.flush(batch)
		}()
	}
}

// flush inserts the batch in one statement and tells each caller whether
// its event was new. A batch may hold the same event id twice (a sender's
// retry racing the first delivery): the first is inserted, the rest are
// duplicates, as they would be one commit apart.
func (g *groupCommitter) flush(batch []recordReq) {
	first := make(map[string]int, len(batch))
	var rows []InboxEvent
	for i, r := range batch {
		if _, dup := first[r.ev.EventID]; !dup {
			first[r.ev.EventID] = i
			rows = append(rows, r.ev)
		}
	}
	// Concurrent flushes (and a sender's retry on another replica) may carry
	// the same ids: inserting in one global order means two of them wait on
	// each other's row, never in a cycle, so PostgreSQL finds no deadlock.
	slices.SortFunc(rows, func(a, b InboxEvent) int { return strings.Compare(a.EventID, b.EventID) })
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	inserted, err := g.s.insertEvents(ctx, rows)
	g.commits.Add(1)
	g.events.Add(int64(len(batch)))
	for i, r := range batch {
		if err != nil {
			r.done <- recordResult{err: err}
			continue
		}
		r.done <- recordResult{isNew: first[r.ev.EventID] == i && inserted[r.ev.EventID]}
	}
}

// insertEvents inserts evs (distinct ids) in one INSERT … ON CONFLICT DO
// NOTHING and returns the ids it inserted.
func (s *Store) insertEvents(ctx context.Context, evs []InboxEvent) (map[string]bool, error) {
	const cols = 11
	args := make([]any, 0, len(evs)*cols)
	for _, ev := range evs {
		if ev.Kind == "" {
			ev.Kind = KindWebhook
		}
		at := ev.ReceivedAt.UTC()
		args = append(args, ev.EventID, ev.EventType, ev.Kind, int(ev.Lane), ev.Receiver, ev.EndpointID, at, ev.Body, ev.TraceContext, at, ev.SubjectEventID)
	}
	//nolint:gosec // only placeholders are concatenated; every value is a bound argument
	q := `INSERT INTO inbox (event_id, event_type, kind, lane, receiver, endpoint_id, received_at, body, trace_context, next_attempt_at, subject_event_id)
		VALUES ` + placeholders(len(evs), cols) + ` ON CONFLICT (event_id) DO NOTHING RETURNING event_id`
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: recording %d event(s) (%s): %w", len(evs), firstIDs(evs), err)
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
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: recording %d event(s) (%s): %w", len(evs), firstIDs(evs), err)
	}
	return inserted, nil
}

// firstIDs names the first few events of a batch for an error message.
func firstIDs(evs []InboxEvent) string {
	ids := make([]string, 0, 3)
	for _, ev := range evs[:min(len(evs), 3)] {
		ids = append(ids, ev.EventID)
	}
	if len(evs) > 3 {
		ids = append(ids, "…")
	}
	return strings.Join(ids, ", ")
}
