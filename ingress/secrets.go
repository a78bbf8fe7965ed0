package ingress

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/siteops/siteops/store"
)

// SecretStore is where the signing secrets of registered endpoints live.
type SecretStore interface {
	// Receivers reads every receiver's active secrets and expectation at
	// once (store.Store.Receivers).
	Receivers(ctx context.Context) (store.Receivers, error)
}

// receiverState is what the ingress knows of one receiver path: the
// secrets it accepts and whose each one is, how many of its stored secrets
// do not decrypt, and whether an endpoint creation for it is under way.
type receiverState struct {
	secrets    []string
	endpoints  []string
	unreadable int
	exp        store.Expectation
	// read is when the read of the list it comes from started.
	read time.Time
}

// secretSource answers the secrets of a receiver path from a list of every
// receiver, read whole: for the default receiver ("", POST /webhooks) the
// configured secrets plus any stored for it; for a named receiver, the
// stored ones.
//
// What a request may cost the database does not depend on the request:
// the list is read by one call (store.Store.Receivers) for every receiver
// at once, one read is shared by every caller that asks while it is under
// way, and two reads start at least spacing apart, whoever asks. An
// ordinary lookup takes the list if it is at most refresh old (lookup). A
// delivery to a receiver the list does not name, or that no listed secret
// verifies, needs a list read since it arrived (lookupSince): an endpoint
// creation may have begun, or a secret been stored, a moment before; it
// waits for the next read, which every such delivery shares. So a flood of
// made-up receiver names, however large, costs at most one read per
// spacing, and adds nothing to memory: the list holds only the receivers
// that the store names.
//
// A stored secret that does not decrypt is left out of its receiver's
// secrets and counted (unreadable): the other receivers never notice it.
// Whenever a receiver's unreadable secrets change, the gauge is set and
// they are logged once.
type secretSource struct {
	env        []string
	store      SecretStore // nil when no stored secrets are used
	refresh    time.Duration
	spacing    time.Duration
	now        func() time.Time
	log        *slog.Logger
	unreadable func(ctx context.Context, receiver string, n int)

	mu       sync.Mutex
	last     snapshot          // zero until the first read
	started  time.Time         // when the last read started, on the wall clock (spacing)
	reported map[string]string // receiver → its unreadable endpoints last reported

	reads flightGroup[snapshot]
}

// snapshot is the list of every receiver as read at one time.
type snapshot struct {
	list map[string]receiverState
	read time.Time // when its read started (now)
}

// init makes the caches of s, and returns it.
func (s *secretSource) init() *secretSource {
	s.reported = map[string]string{}
	return s
}

// lookup returns the receiver's state from a list read at most maxAge ago
// (refresh when maxAge is 0 or more), reading the list afresh if it is
// older.
func (s *secretSource) lookup(ctx context.Context, receiver string, maxAge time.Duration) (receiverState, error) {
	if maxAge <= 0 || maxAge > s.refresh {
		maxAge = s.refresh
	}
	s.mu.Lock()
	snap := s.last
	s.mu.Unlock()
	if snap.list == nil || s.now().Sub(snap.read) >= maxAge {
		var err error
		if snap, err = s.reads.do(ctx, "", s.readList); err != nil {
			return receiverState{}, err
		}
	}
	return snap.state(receiver), nil
}

// lookupSince returns the receiver's state from a list whose read started
// at since or later, waiting for the next read if the last one started
// before.
func (s *secretSource) lookupSince(ctx context.Context, receiver string, since time.Time) (receiverState, error) {
	if s.store == nil {
		// Only the configured secrets: the list never changes.
		return s.lookup(ctx, receiver, 0)
	}
	s.mu.Lock()
	snap := s.last
	s.mu.Unlock()
	// At most twice: a read under way may have started before since; the
	// next one starts after it ended, so after since.
	for range 2 {
		if snap.list != nil && !snap.read.Before(since) {
			break
		}
		var err error
		if snap, err = s.reads.do(ctx, "", s.readList); err != nil {
			return receiverState{}, err
		}
	}
	return snap.state(receiver), nil
}

// state is what snap says of the receiver.
func (snap snapshot) state(receiver string) receiverState {
	st := snap.list[receiver]
	st.read = snap.read
	return st
}

// readNow reads the list now (or once spacing has passed since the last
// read); the server calls it every refresh period, so that lookups rarely
// wait for a read and the unreadable-secrets gauge follows a fix (a rekey)
// without a delivery.
func (s *secretSource) readNow(ctx context.Context) error {
	_, err := s.reads.do(ctx, "", s.readList)
	return err
}

// readList reads every receiver, at least spacing after the last read
// started, adds the configured secrets to the default one, reports
// unreadable secrets that changed, and keeps the list.
func (s *secretSource) readList(ctx context.Context) (snapshot, error) {
	s.mu.Lock()
	wait := time.Until(s.started.Add(s.spacing))
	s.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return snapshot{}, ctx.Err()
		case <-t.C:
		}
	}
	s.mu.Lock()
	s.started = time.Now()
	s.mu.Unlock()
	read := s.now()
	list := map[string]receiverState{}
	if len(s.env) > 0 {
		st := receiverState{}
		for _, sec := range s.env {
			st.secrets = append(st.secrets, sec)
			st.endpoints = append(st.endpoints, store.EnvEndpoint)
		}
		list[""] = st
	}
	if s.store != nil {
		rs, err := s.store.Receivers(ctx)
		if err != nil {
			return snapshot{}, err
		}
		for receiver, set := range rs.Secrets {
			st := list[receiver]
			for i, sec := range set.Secrets {
				st.secrets = append(st.secrets, sec.Reveal())
				st.endpoints = append(st.endpoints, set.Infos[i].EndpointID)
			}
			st.unreadable = len(set.Unreadable)
			list[receiver] = st
		}
		for receiver, exp := range rs.Expectations {
			st := list[receiver]
			st.exp = exp
			list[receiver] = st
		}
		s.noteUnreadable(ctx, rs.Secrets)
	}
	snap := snapshot{list: list, read: read}
	s.mu.Lock()
	if !snap.read.Before(s.last.read) {
		s.last = snap
	}
	s.mu.Unlock()
	return snap, nil
}

// flightGroup runs one call per key at a time; callers that ask for a key
// whose call is under way wait for its result (a single flight).
type flightGroup[T any] struct {
	mu    sync.Mutex
	calls map[string]*flightCall[T]
}

type flightCall[T any] struct {
	done chan struct{}
	val  T
	err  error
}

// flightTimeout bounds a shared call, which no single caller's context
// may cancel for the others.
const flightTimeout = 5 * time.Second

func (g *flightGroup[T]) do(ctx context.Context, key string, fn func(context.Context) (T, error)) (T, error) {
	g.mu.Lock()
	if c, ok := g.calls[key]; ok {
		g.mu.Unlock()
		select {
		case <-c.done:
			return c.val, c.err
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
	}
	if g.calls == nil {
		g.calls = map[string]*flightCall[T]{}
	}
	c := &flightCall[T]{done: make(chan struct{})}
	g.calls[key] = c
	g.mu.Unlock()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flightTimeout)
	c.val, c.err = fn(fctx)
	cancel()
	g.mu.Lock()
	delete(g.calls, key)
	g.mu.Unlock()
	close(c.done)
	return c.val, c.err
}

// noteUnreadable sets the gauge of every receiver whose unreadable secrets
// changed since the last read — to 0 for one that has none any more, so
// that the gauge stays raised exactly until the fix — and logs the new
// ones once, not on every read.
func (s *secretSource) noteUnreadable(ctx context.Context, secrets map[string]store.ActiveSet) {
	now := map[string]string{}
	for receiver, set := range secrets {
		if len(set.Unreadable) == 0 {
			continue
		}
		ids := make([]string, len(set.Unreadable))
		for i, info := range set.Unreadable {
			ids[i] = info.EndpointID
		}
		slices.Sort(ids)
		now[receiver] = strings.Join(ids, ",")
	}
	s.mu.Lock()
	type change struct {
		receiver, key string
	}
	var changes []change
	for receiver, key := range now {
		if s.reported[receiver] != key {
			changes = append(changes, change{receiver, key})
		}
	}
	for receiver := range s.reported {
		if _, ok := now[receiver]; !ok {
			changes = append(changes, change{receiver, ""})
		}
	}
	// Only receivers whose stored secrets do not decrypt are remembered:
	// the store names them, never a request.
	s.reported = now
	s.mu.Unlock()
	for _, c := range changes {
		n := 0
		if c.key != "" {
			n = strings.Count(c.key, ",") + 1
		}
		if s.unreadable != nil {
			s.unreadable(ctx, c.receiver, n)
		}
		if s.log == nil {
			continue
		}
		if n == 0 {
			s.log.Info("the stored signing secrets of the receiver all decrypt again", "receiver", store.ReceiverName(c.receiver))
			continue
		}
		s.log.Error("stored signing secrets do not decrypt with SITEOPS_SECRET_KEY and are skipped; deliveries to the receiver that its other secrets do not verify are answered 401 as a bad signature (the sender retries, 8 attempts over about five minutes; reason secret_unreadable in the metrics) until it is fixed",
			"receiver", store.ReceiverName(c.receiver), "endpoints", c.key, "fix", "set the key they were stored with, or run `siteops secret rekey`")
	}
}
