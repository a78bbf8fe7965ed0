package webhookingress

import (
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
type secretSource struct {
	env        []string
	store      SecretStore // nil when no store secrets are used
	expect     func(ctx context.Context, receiver string) (store.Expectation, error)
	refresh    time.Duration
	unknownTTL time.Duration
	now        func() time.Time
	log        *slog.Logger
	unreadable func(ctx context.Context, receiver string, n int)

	mu         sync.Mutex
	cache      map[string]secretSet
	exps       map[string]cachedExpectation
	unreadSeen map[string]string // receiver → endpoints last reported unreadable

	fetches flightGroup[secretSet]
	expects flightGroup[store.Expectation]
}

// cachedExpectation is an Expectation and when it was read.
type cachedExpectation struct {
	exp store.Expectation
	at  time.Time
}

// maxCached bounds the receivers cached at once: receiver paths come from
// anyone, and a cache of every name ever tried would grow without bound.
const maxCached = 4096

// errUnknownReceiver means the receiver has no secret at all.
var errUnknownReceiver = errors.New("unknown receiver")

func (s *secretSource) lookup(ctx context.Context, receiver string) (secretSet, error) {
	s.mu.Lock()
	cached, ok := s.cache[receiver]
	s.mu.Unlock()
	if ok && s.now().Sub(cached.fetched) < s.refresh {
		if len(cached.secrets) == 0 {
			return cached, errUnknownReceiver
		}
		return cached, nil
	}
	return s.fetch(ctx, receiver)
}

// fetchSince returns the receiver's secrets as read after since: the cached
// ones when they were, else read afresh.
func (s *secretSource) fetchSince(ctx context.Context, receiver string, since time.Time) (secretSet, error) {
	s.mu.Lock()
	cached, ok := s.cache[receiver]
	s.mu.Unlock()
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
	// receiver that does not exist does not reach the database each time.
	s.mu.Lock()
	if len(s.cache) >= maxCached {
		s.cache = map[string]secretSet{}
	}
	s.cache[receiver] = set
	s.mu.Unlock()
	return set, nil
}

// expectation says whether receiver expects a new secret, as read at most
// maxAge ago (unknownTTL ago for a receiver that did not), reading it once
// for every caller that asks while a read is under way.
func (s *secretSource) expectation(ctx context.Context, receiver string, maxAge time.Duration) (store.Expectation, error) {
	now := s.now()
	s.mu.Lock()
	c, ok := s.exps[receiver]
	s.mu.Unlock()
	if ok {
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
		s.mu.Lock()
		if len(s.exps) >= maxCached {
			s.exps = map[string]cachedExpectation{}
		}
		s.exps[receiver] = cachedExpectation{exp: exp, at: s.now()}
		s.mu.Unlock()
		return exp, nil
	})
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
	s.unreadSeen[receiver] = key
	s.mu.Unlock()
	// Only a change is recorded: a receiver path nobody registered, which
	// anyone can send to, adds no series.
	if changed && s.unreadable != nil {
		s.unreadable(ctx, receiver, len(ids))
	}
	if changed && len(ids) > 0 && s.log != nil {
		s.log.Error("stored signing secrets do not decrypt with SITEOPS_SECRET_KEY and are skipped; deliveries signed with them are refused",
			"receiver", receiverLabel(receiver), "endpoints", key, "fix", "set the key they were stored with, or run `siteops secret rekey`")
	}
}

// receiverLabel names a receiver for logs and metrics.
func receiverLabel(receiver string) string {
	if receiver == "" {
		return "default"
	}
	return receiver
}
