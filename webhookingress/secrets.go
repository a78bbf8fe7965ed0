package webhookingress

import (
	"container/list"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/siteops/siteops/store"
)

// SecretStore is where signing secrets of registered endpoints live.
type SecretStore interface {
	ActiveSecrets(ctx context.Context, receiver string) (store.ActiveSet, error)
}

// EnvEndpoint names the secrets of SITEOPS_WEBHOOK_SECRETS in the inbox.
const EnvEndpoint = "env"

// secretSet is the secrets a receiver accepts, and whose each one is.
type secretSet struct {
	secrets   []string
	endpoints []string
	fetched   time.Time
}

// secretSource answers the secrets of a receiver path: for the default
// receiver ("", POST /webhooks) the configured secrets plus any stored for
// it; for a named receiver, the stored ones. Stored secrets are cached for
// refresh, so that a newly stored secret is accepted within that time (the
// handler refreshes sooner when it learns a secret was stored). A stored
// secret that does not decrypt is skipped, logged once, and counted.
//
// What a request may cost the database is bounded per receiver, not per
// request: a read of a receiver's secrets (and its decryption) is shared by
// every request that asks while it is under way (single flight), a
// receiver without secrets is cached like one with them, and so is whether
// a receiver expects a new secret (for unknownTTL when it does not, for a
// hold's poll interval when it does). Held deliveries therefore share one
// poll of the store per receiver, however many are held.
//
// What a request may cost in memory is bounded too. Receiver names come
// from anyone, so the answers about receivers without a secret (and their
// expectations) live in a cache of their own that holds at most maxUnknown
// names and drops the oldest: names chosen at random can neither grow it
// nor push out the entries of receivers that have secrets, which only the
// store and SITEOPS_WEBHOOK_SECRETS can name.
type secretSource struct {
	env        []string
	store      SecretStore // nil when no store secrets are used
	expect     func(ctx context.Context, receiver string) (store.Expectation, error)
	refresh    time.Duration
	unknownTTL time.Duration
	now        func() time.Time
	log        *slog.Logger
	unreadable func(ctx context.Context, receiver string, n int)

	mu        sync.Mutex
	known     map[string]secretSet         // receivers with at least one secret
	knownExps map[string]cachedExpectation // expectations of known receivers
	unknown   *lru[unknownReceiver]        // receivers without a secret, at most maxUnknown
	// unreadSeen holds the endpoints last reported unreadable, only for
	// receivers that have some: a stored secret names them.
	unreadSeen map[string]string

	fetches flightGroup[secretSet]
	expects flightGroup[store.Expectation]
}

// init makes the caches of s, and returns it.
func (s *secretSource) init() *secretSource {
	s.known = map[string]secretSet{}
	s.knownExps = map[string]cachedExpectation{}
	s.unknown = newLRU[unknownReceiver](maxUnknown)
	s.unreadSeen = map[string]string{}
	return s
}

// cachedExpectation is an Expectation and when it was read.
type cachedExpectation struct {
	exp store.Expectation
	at  time.Time
}

// unknownReceiver is what is cached of a receiver without a secret: that
// it had none when last read, and whether it expects one.
type unknownReceiver struct {
	set    secretSet
	hasSet bool
	exp    cachedExpectation
	hasExp bool
}

// maxUnknown bounds the receivers without a secret cached at once: their
// names come from anyone. 4,096 entries of a name (at most 64 bytes) and
// two timestamps stay under a megabyte.
const maxUnknown = 4096

// errUnknownReceiver means the receiver has no secret at all.
var errUnknownReceiver = errors.New("unknown receiver")

func (s *secretSource) lookup(ctx context.Context, receiver string) (secretSet, error) {
	cached, ok := s.cachedSet(receiver)
	if ok && s.now().Sub(cached.fetched) < s.refresh {
		if len(cached.secrets) == 0 {
			return cached, errUnknownReceiver
		}
		return cached, nil
	}
	return s.fetch(ctx, receiver)
}

// cachedSet returns what is cached of the receiver's secrets.
func (s *secretSource) cachedSet(receiver string) (secretSet, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if set, ok := s.known[receiver]; ok {
		return set, true
	}
	if u, ok := s.unknown.get(receiver); ok && u.hasSet {
		return u.set, true
	}
	return secretSet{}, false
}

// fetchSince returns the receiver's secrets as read after since: the cached
// ones when they were, else read afresh.
func (s *secretSource) fetchSince(ctx context.Context, receiver string, since time.Time) (secretSet, error) {
	cached, ok := s.cachedSet(receiver)
	if ok && cached.fetched.After(since) {
		if len(cached.secrets) == 0 {
			return cached, errUnknownReceiver
		}
		return cached, nil
	}
	return s.fetch(ctx, receiver)
}

// fetch reads the receiver's secrets afresh, once for every caller that
// asks while a read is under way.
func (s *secretSource) fetch(ctx context.Context, receiver string) (secretSet, error) {
	set, err := s.fetches.do(ctx, receiver, func(ctx context.Context) (secretSet, error) { return s.read(ctx, receiver) })
	if err == nil && len(set.secrets) == 0 {
		return set, errUnknownReceiver
	}
	return set, err
}

// read reads the receiver's secrets from the store and caches them.
func (s *secretSource) read(ctx context.Context, receiver string) (secretSet, error) {
	set := secretSet{fetched: s.now()}
	if receiver == "" {
		for _, sec := range s.env {
			set.secrets = append(set.secrets, sec)
			set.endpoints = append(set.endpoints, EnvEndpoint)
		}
	}
	if s.store != nil {
		active, err := s.store.ActiveSecrets(ctx, receiver)
		switch {
		case errors.Is(err, store.ErrNoSecretKey) && receiver == "":
			// Only the configured secrets are used on POST /webhooks.
		case err != nil:
			return secretSet{}, err
		}
		for i, sec := range active.Secrets {
			set.secrets = append(set.secrets, sec.Reveal())
			set.endpoints = append(set.endpoints, active.Infos[i].EndpointID)
		}
		s.noteUnreadable(ctx, receiver, active.Unreadable)
	}
	// Receivers without secrets are cached too, so that traffic to a
	// receiver that does not exist does not reach the database each time,
	// but apart from the known ones (see secretSource).
	s.mu.Lock()
	if len(set.secrets) > 0 {
		s.known[receiver] = set
		s.unknown.remove(receiver)
	} else {
		if _, ok := s.known[receiver]; ok {
			delete(s.known, receiver)
			delete(s.knownExps, receiver)
		}
		u, _ := s.unknown.get(receiver)
		u.set, u.hasSet = set, true
		s.unknown.put(receiver, u)
	}
	s.mu.Unlock()
	return set, nil
}

// expectation says whether receiver expects a new secret, as read at most
// maxAge ago (unknownTTL ago for a receiver that did not), reading it once
// for every caller that asks while a read is under way.
func (s *secretSource) expectation(ctx context.Context, receiver string, maxAge time.Duration) (store.Expectation, error) {
	now := s.now()
	if c, ok := s.cachedExpectation(receiver); ok {
		age := now.Sub(c.at)
		if (c.exp.Pending && age < maxAge) || (!c.exp.Pending && age < s.unknownTTL) {
			return c.exp, nil
		}
	}
	return s.expects.do(ctx, receiver, func(ctx context.Context) (store.Expectation, error) {
		exp, err := s.expect(ctx, receiver)
		if err != nil {
			return exp, err
		}
		c := cachedExpectation{exp: exp, at: s.now()}
		s.mu.Lock()
		if _, ok := s.known[receiver]; ok {
			s.knownExps[receiver] = c
		} else {
			u, _ := s.unknown.get(receiver)
			u.exp, u.hasExp = c, true
			s.unknown.put(receiver, u)
		}
		s.mu.Unlock()
		return exp, nil
	})
}

// cachedExpectation returns what is cached of whether the receiver expects
// a new secret.
func (s *secretSource) cachedExpectation(receiver string) (cachedExpectation, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.knownExps[receiver]; ok {
		return c, true
	}
	if u, ok := s.unknown.get(receiver); ok && u.hasExp {
		return u.exp, true
	}
	return cachedExpectation{}, false
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

// noteUnreadable counts the receiver's secrets that do not decrypt and
// logs them when the set changes, not on every refresh.
func (s *secretSource) noteUnreadable(ctx context.Context, receiver string, infos []store.SecretInfo) {
	ids := make([]string, len(infos))
	for i, info := range infos {
		ids[i] = info.EndpointID
	}
	slices.Sort(ids)
	key := strings.Join(ids, ",")
	s.mu.Lock()
	changed := s.unreadSeen[receiver] != key
	// Only receivers with unreadable secrets are remembered: a receiver
	// path nobody registered, which anyone can send to, adds no entry.
	if key == "" {
		delete(s.unreadSeen, receiver)
	} else {
		s.unreadSeen[receiver] = key
	}
	s.mu.Unlock()
	// Only a change is recorded: a receiver path nobody registered adds no
	// series either.
	if changed && s.unreadable != nil {
		s.unreadable(ctx, receiver, len(ids))
	}
	if changed && len(ids) > 0 && s.log != nil {
		s.log.Error("stored signing secrets do not decrypt with SITEOPS_SECRET_KEY and are skipped; deliveries signed with them are refused",
			"receiver", store.ReceiverName(receiver), "endpoints", key, "fix", "set the key they were stored with, or run `siteops secret rekey`")
	}
}

// lru is a map of at most max entries that drops the least recently
// written one to make room. It is not safe for concurrent use.
type lru[V any] struct {
	max     int
	order   *list.List // of *lruEntry[V], most recently written first
	entries map[string]*list.Element
}

type lruEntry[V any] struct {
	key string
	val V
}

func newLRU[V any](max int) *lru[V] {
	return &lru[V]{max: max, order: list.New(), entries: map[string]*list.Element{}}
}

func (c *lru[V]) get(key string) (V, bool) {
	if e, ok := c.entries[key]; ok {
		return e.Value.(*lruEntry[V]).val, true
	}
	var zero V
	return zero, false
}

func (c *lru[V]) put(key string, val V) {
	if e, ok := c.entries[key]; ok {
		e.Value.(*lruEntry[V]).val = val
		c.order.MoveToFront(e)
		return
	}
	if c.order.Len() >= c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.entries, oldest.Value.(*lruEntry[V]).key)
	}
	c.entries[key] = c.order.PushFront(&lruEntry[V]{key: key, val: val})
}

func (c *lru[V]) remove(key string) {
	if e, ok := c.entries[key]; ok {
		c.order.Remove(e)
		delete(c.entries, key)
	}
}

func (c *lru[V]) len() int { return c.order.Len() }
