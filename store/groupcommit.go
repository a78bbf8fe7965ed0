package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
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
// One commit in flight, and a second only while the first is slow. Every
// commit waits for PostgreSQL to flush its WAL, one flush at a time, and on
// this machine a commit also costs the server about 200 µs of CPU (most of
// it the kernel's, writing and syncing the WAL): more commits in flight
// only queue there, each with a smaller batch, and the CPU they take is
// the ingress's (bench/README.md, issue 22 item 4). Measured with
// BenchmarkIngressAccept on PostgreSQL (2026-11-24): 4 flushers committed
// about 3 deliveries per transaction, 6.5–6.9k/s, and PostgreSQL spent
// 3.7–3.9 s of CPU per 30,000; 2 committed 7–8, 11.8–12.4k/s, 1.0 s; 1
// committed 13, 12.7–13.5k/s, 0.7 s. But with one alone, a flush that
// stalls (a row lock held by another replica's insert of the same id, a
// lost packet) would stall every delivery behind it: after slowFlush the
// deliveries queued meanwhile go on a second connection.
const (
	groupFlushers = 2                    // commits in flight at most
	slowFlush     = 5 * time.Millisecond // when a second one starts
	groupMaxBatch = 200                  // events per INSERT
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
	// closing is closed by close, stopped by the loop once it has ended
	// (every request it took answered, no flush of its left running).
	closing, stopped chan struct{}
	closeOnce        sync.Once
	// commits and events count the flushes and the events they carried.
	commits, events atomic.Int64
	// conflictAt is when a batch last met an id already recorded
	// (nanoseconds since processStart).
	conflictAt atomic.Int64
}

// processStart is what conflictAt counts from: the process's monotonic
// clock, not the store's (which stamps rows, and which tests stop).
var processStart = time.Now()

// conflictMemory is how long after a batch met an id already recorded the
// next batches insert with ON CONFLICT at once.
const conflictMemory = time.Second

func (g *groupCommitter) conflictsLately() bool {
	at := g.conflictAt.Load()
	return at != 0 && time.Since(processStart)-time.Duration(at) < conflictMemory
}

func (g *groupCommitter) conflicted() { g.conflictAt.Store(int64(max(time.Since(processStart), 1))) }

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

// ErrClosed matches errors.Is for a RecordEvent the group commit did not
// take because the store was closed (or was closing) first.
var ErrClosed = errors.New("store: closed")

// newGroupCommitter starts the group commit of s, which runs until close.
func newGroupCommitter(s *Store) *groupCommitter {
	g := &groupCommitter{s: s, queue: make(chan recordReq, groupFlushers*groupMaxBatch),
		closing: make(chan struct{}), stopped: make(chan struct{})}
	go g.loop()
	return g
}

// close stops the loop and returns once it has ended: the flushes in
// flight have committed (or failed) and answered their callers, and every
// request still queued is answered ErrClosed. A caller that queues after
// that is answered ErrClosed by record itself. The queue is never closed,
// since callers may still be sending.
func (g *groupCommitter) close() {
	g.closeOnce.Do(func() { close(g.closing) })
	<-g.stopped
}

// closedError is what a request the group commit did not take is answered.
func closedError(ev InboxEvent) error {
	return fmt.Errorf("store: recording event %s: %w", ev.EventID, ErrClosed)
}

// record queues ev and waits for the commit that carries it.
func (g *groupCommitter) record(ctx context.Context, ev InboxEvent) (bool, error) {
	req := recordReq{ev: ev, done: make(chan recordResult, 1)}
	select {
	case <-g.closing:
		return false, closedError(ev)
	default:
	}
	select {
	case g.queue <- req:
	case <-g.closing:
		return false, closedError(ev)
	case <-ctx.Done():
		return false, fmt.Errorf("store: recording event %s: %w", ev.EventID, ctx.Err())
	}
	// Once queued the event may be committed even if ctx ends: the caller
	// then answers an error and the sender's retry is answered as a
	// duplicate, which is the contract's at-least-once.
	select {
	case r := <-req.done:
		return r.isNew, r.err
	case <-g.stopped:
		// The loop answered every request it took before it stopped; one
		// queued after its last look at the queue is answered by nobody.
		select {
		case r := <-req.done:
			return r.isNew, r.err
		default:
			return false, closedError(ev)
		}
	case <-ctx.Done():
		return false, fmt.Errorf("store: recording event %s: %w", ev.EventID, ctx.Err())
	}
}

// loop takes the first queued request, drains whatever else is queued up
// to groupMaxBatch, and flushes the batch: at once when no commit is in
// flight; while one is, when it ends, or when it has taken slowFlush, on
// a second connection (never more than groupFlushers at once). It runs
// until close: then it starts no flush, waits for those in flight, and
// answers what is still queued ErrClosed (stop).
func (g *groupCommitter) loop() {
	defer close(g.stopped)
	type flight struct {
		seq   uint64
		start time.Time
	}
	var inFlight []flight // oldest first
	var seq uint64
	ended := make(chan uint64, groupFlushers) // never more than in flight
	landed := func(done uint64) {
		inFlight = slices.DeleteFunc(inFlight, func(f flight) bool { return f.seq == done })
	}
	slow := time.NewTimer(time.Hour)
	slow.Stop()
	for {
		var first recordReq
		select {
		case <-g.closing:
			g.stop(len(inFlight), ended)
			return
		default:
		}
		select {
		case first = <-g.queue:
		case <-g.closing:
			g.stop(len(inFlight), ended)
			return
		}
		for {
			for len(ended) > 0 {
				landed(<-ended)
			}
			if len(inFlight) == 0 || len(inFlight) < groupFlushers && time.Since(inFlight[0].start) >= slowFlush {
				break
			}
			var timeout <-chan time.Time
			if len(inFlight) < groupFlushers {
				slow.Reset(slowFlush - time.Since(inFlight[0].start))
				timeout = slow.C
			}
			select {
			case done := <-ended:
				landed(done)
			case <-timeout:
			case <-g.closing:
				first.done <- recordResult{err: closedError(first.ev)}
				g.stop(len(inFlight), ended)
				return
			}
			slow.Stop()
		}
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
		seq++
		f := flight{seq: seq, start: time.Now()}
		inFlight = append(inFlight, f)
		go func() {
			g.flush(batch)
			ended <- f.seq
		}()
	}
}

// stop ends the loop: it waits for the flushes in flight (flights of
// them) to end, each answering its callers, then answers every request
// still queued ErrClosed.
func (g *groupCommitter) stop(flights int, ended <-chan uint64) {
	for range flights {
		<-ended
	}
	for {
		select {
		case r := <-g.queue:
			r.done <- recordResult{err: closedError(r.ev)}
		default:
			return
		}
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

// insertEvents inserts evs (distinct ids) in one statement and returns
// the ids it inserted. The batch is bound as ten arrays (one per column;
// the next attempt is the time received), so that one statement text, parsed
// and planned once per connection, serves every batch size, and the driver
// encodes ten arrays rather than eleven values per event: 2.6–3.4 µs less
// of this process's CPU per event than a VALUES row per event, for the
// same CPU and WAL in PostgreSQL (BenchmarkInsertEvents, bench/README.md).
// Nearly always none of them is recorded yet, and it first tries the INSERT
// that costs PostgreSQL least: no ON CONFLICT, whose speculative insertion
// writes one more WAL record per row (620 against 572 bytes of WAL per
// event), and no RETURNING: when it succeeds every event was new. When one
// was recorded already (a sender's retry), that INSERT fails whole on the
// primary key, and the batch goes again with ON CONFLICT DO NOTHING
// RETURNING event_id, which says which were new; so do the batches of the
// next second, since a sender that retries tends to retry many deliveries
// at once. unnest yields the rows in the arrays' order, which flush sorted
// by id.
func (s *Store) insertEvents(ctx context.Context, evs []InboxEvent) (map[string]bool, error) {
	args := unnestColumns(evs)
	if !s.group.conflictsLately() {
		_, err := s.db.ExecContext(ctx, unnestInsert, args...)
		if err == nil {
			inserted := make(map[string]bool, len(evs))
			for _, ev := range evs {
				inserted[ev.EventID] = true
			}
			return inserted, nil
		}
		if !isUniqueViolation(err) {
			return nil, fmt.Errorf("store: recording %d event(s) (%s): %w", len(evs), firstIDs(evs), err)
		}
		s.group.conflicted()
	}
	ids, err := s.queryStrings(ctx, unnestInsert+` ON CONFLICT (event_id) DO NOTHING RETURNING event_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: recording %d event(s) (%s): %w", len(evs), firstIDs(evs), err)
	}
	inserted := make(map[string]bool, len(ids))
	for _, id := range ids {
		inserted[id] = true
	}
	return inserted, nil
}

// unnestInsert inserts the rows of unnestColumns' ten arrays.
const unnestInsert = `INSERT INTO inbox (event_id, event_type, kind, lane, receiver, endpoint_id, received_at, body, trace_context, next_attempt_at, subject_event_id)
	SELECT e, t, k, l, r, p, a, b, c, a, s
	FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::text[], $6::text[], $7::timestamptz[], $8::bytea[], $9::text[], $10::text[])
	AS u(e, t, k, l, r, p, a, b, c, s)`

// unnestColumns binds evs as unnestInsert's ten arrays, a column each.
func unnestColumns(evs []InboxEvent) []any {
	n := len(evs)
	ids, types, kinds, receivers, endpoints, traces, subjects := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	lanes, at, bodies := make([]int64, n), make([]time.Time, n), make([][]byte, n)
	for i, ev := range evs {
		ev = ev.stored()
		ids[i], types[i], kinds[i], lanes[i], receivers[i], endpoints[i] = ev.EventID, ev.EventType, ev.Kind, int64(ev.Lane), ev.Receiver, ev.EndpointID
		at[i], bodies[i], traces[i], subjects[i] = ev.ReceivedAt.UTC(), ev.Body, ev.TraceContext, ev.SubjectEventID
	}
	return []any{ids, types, kinds, lanes, receivers, endpoints, at, bodies, traces, subjects}
}

// isUniqueViolation reports whether err is PostgreSQL's unique_violation.
func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
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
