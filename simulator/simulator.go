package simulator

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
)

// Scopes of the API.
const (
	ScopeSitesRead      = "sites:read"
	ScopeSitesWrite     = "sites:write"
	ScopeAgentsWrite    = "agents:write"
	ScopeKnowledgeWrite = "knowledge:write"
	ScopeLeadsRead      = "leads:read"
	ScopeWebhooksWrite  = "webhooks:write"
	// ScopeAll grants every scope.
	ScopeAll = "*"
)

// AllScopes lists every scope name the API uses.
func AllScopes() []string {
	return []string{ScopeSitesRead, ScopeSitesWrite, ScopeAgentsWrite, ScopeKnowledgeWrite, ScopeLeadsRead, ScopeWebhooksWrite}
}

// Config sets up a Simulator. The zero value of every field but Keys is a
// sensible default.
type Config struct {
	// Keys maps bearer tokens to their scopes (ScopeAll for every scope).
	Keys map[string][]string
	// AdminToken guards the /_sim/ control routes; empty disables them.
	AdminToken string
	// AllowLoopbackReceivers lets webhook endpoints point at loopback
	// addresses over http and on any port. Test mode only.
	AllowLoopbackReceivers bool
	// TimeScale divides every delivery backoff and processing delay
	// (default 1).
	TimeScale float64
	// Seed seeds the random source of faults, jitter and ids.
	Seed uint64
	// IdempotencyRetention is how long an idempotency key is remembered
	// (default 24 h).
	IdempotencyRetention time.Duration
	// KnowledgeDelay is how long a knowledge source takes to become ready
	// before TimeScale (default 2 s).
	KnowledgeDelay time.Duration
	// DeliveryTimeout bounds one delivery attempt (default 10 s, not scaled).
	DeliveryTimeout time.Duration
	// MaxConcurrentDeliveries is how many delivery attempts are in flight
	// at once, over all endpoints (default 64); the others wait their
	// turn, untimed, as a real sender's queue does.
	MaxConcurrentDeliveries int
	// Faults are the faults in force at start.
	Faults Faults
	// Resolver resolves webhook hosts, at registration and at every
	// delivery's dial (net.DefaultResolver otherwise).
	Resolver Resolver
	// Now is the clock for idempotency expiry and timestamps (time.Now).
	Now func() time.Time
	// Logger receives one line per delivery attempt and fault (discarded
	// when nil). It never receives a secret, a key or lead data.
	Logger *slog.Logger
}

// Simulator is an in-memory Agent-Site service.
type Simulator struct {
	cfg     Config
	now     func() time.Time
	log     *slog.Logger
	handler http.Handler
	sender  *http.Client
	sending chan struct{} // delivery attempts in flight

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closeMu sync.RWMutex
	closed  bool

	rngMu sync.Mutex
	rng   *mrand.Rand

	cursorKey [32]byte
	inFlight  atomic.Int32
	throttle  throttle

	mu         sync.Mutex
	faults     Faults
	seq        map[string]int // per id prefix
	sites      map[string]*site
	slugs      map[string]string // slug -> site id
	endpoints  map[string]*endpoint
	idem       map[idemKey]*idemRecord
	idemOrder  []idemClaim // the claims of idem, oldest first
	events     []eventRecord
	deliveries []DeliveryRecord
	requests   []RequestRecord
	stats      RequestStats
}

// withDefaults returns cfg with the defaults Config documents where it
// left a setting zero.
func (cfg Config) withDefaults() Config {
	if cfg.TimeScale == 0 {
		cfg.TimeScale = 1
	}
	if cfg.IdempotencyRetention == 0 {
		cfg.IdempotencyRetention = 24 * time.Hour
	}
	if cfg.KnowledgeDelay == 0 {
		cfg.KnowledgeDelay = 2 * time.Second
	}
	if cfg.DeliveryTimeout == 0 {
		cfg.DeliveryTimeout = 10 * time.Second
	}
	if cfg.MaxConcurrentDeliveries <= 0 {
		cfg.MaxConcurrentDeliveries = 64
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// validate refuses what no default fixes: no API key, a key or scope out
// of form, a negative time scale or duration, faults out of range.
func (cfg Config) validate() error {
	if len(cfg.Keys) == 0 {
		return errors.New("simulator: no API keys; give at least one TOKEN=SCOPES (e.g. --key svc_live_test=*)")
	}
	for token, scopes := range cfg.Keys {
		if token == "" || strings.ContainsAny(token, " \t\r\n") {
			return errors.New("simulator: an API key is empty or contains whitespace")
		}
		for _, s := range scopes {
			if s != ScopeAll && !validScope(s) {
				return fmt.Errorf("simulator: unknown scope %q; known scopes: %s, or * for all", s, strings.Join(AllScopes(), ", "))
			}
		}
	}
	if cfg.TimeScale < 0 {
		return fmt.Errorf("simulator: time scale %g must be positive", cfg.TimeScale)
	}
	if cfg.IdempotencyRetention < 0 || cfg.KnowledgeDelay < 0 || cfg.DeliveryTimeout < 0 {
		return errors.New("simulator: durations must not be negative")
	}
	return cfg.Faults.validate()
}

// New returns a Simulator. Call Close to stop its deliveries.
func New(cfg Config) (*Simulator, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Simulator{
		cfg:       cfg,
		now:       cfg.Now,
		log:       cfg.Logger,
		rng:       mrand.New(mrand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), //nolint:gosec // seeded on purpose: faults must be reproducible; secrets use crypto/rand
		faults:    cfg.Faults,
		seq:       map[string]int{},
		sites:     map[string]*site{},
		slugs:     map[string]string{},
		endpoints: map[string]*endpoint{},
		idem:      map[idemKey]*idemRecord{},
	}
	if _, err := rand.Read(s.cursorKey[:]); err != nil {
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.sender = s.newSender()
	s.sending = make(chan struct{}, cfg.MaxConcurrentDeliveries)
	s.handler = s.routes()
	return s, nil
}

func validScope(s string) bool {
	for _, k := range AllScopes() {
		if k == s {
			return true
		}
	}
	return false
}

// Handler serves the API and the control routes. Requests join the
// caller's trace when OpenTelemetry is set up in the process.
func (s *Simulator) Handler() http.Handler {
	return otelhttp.NewHandler(s.handler, "agentsite-simulator", otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
		return "simulator " + r.Method + " " + r.URL.Path
	}))
}

// Close stops pending deliveries and processing timers and waits for
// attempts in flight to end.
func (s *Simulator) Close() {
	s.closeMu.Lock()
	s.closed = true
	s.closeMu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// scaled divides d by the time scale.
func (s *Simulator) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) / s.cfg.TimeScale)
}

// after runs fn after d (scaled by the caller) unless the simulator closes.
func (s *Simulator) after(d time.Duration, fn func()) {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			fn()
		case <-s.ctx.Done():
		}
	}()
}

// float returns a random number in [0, 1) from the seeded source.
func (s *Simulator) float() float64 {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.Float64()
}

// chance reports true with probability p.
func (s *Simulator) chance(p float64) bool { return p > 0 && s.float() < p }

// nextID returns prefix_<n> with a per-prefix counter, e.g. site_3.
func (s *Simulator) nextID(prefix string) string {
	s.seq[prefix]++
	return fmt.Sprintf("%s_%d", prefix, s.seq[prefix])
}

func (s *Simulator) routes() http.Handler {
	mux := http.NewServeMux()
	api := func(pattern, scope string, mutating bool, h handlerFunc) {
		mux.Handle(pattern, s.api(scope, mutating, h))
	}
	api("POST /api/v1/sites", ScopeSitesWrite, true, s.createSite)
	api("GET /api/v1/sites/{site_id}", ScopeSitesRead, false, s.getSite)
	api("PATCH /api/v1/sites/{site_id}/agent", ScopeAgentsWrite, true, s.updateAgent)
	api("POST /api/v1/sites/{site_id}/knowledge", ScopeKnowledgeWrite, true, s.addKnowledge)
	api("POST /api/v1/sites/{site_id}/faqs", ScopeKnowledgeWrite, true, s.addFAQ)
	api("POST /api/v1/sites/{site_id}/publish", ScopeSitesWrite, true, s.publish)
	api("GET /api/v1/sites/{site_id}/leads", ScopeLeadsRead, false, s.listLeads)
	api("POST /api/v1/webhook-endpoints", ScopeWebhooksWrite, true, s.createEndpoint)
	api("GET /api/v1/webhook-endpoints", ScopeWebhooksWrite, false, s.listEndpoints)
	api("DELETE /api/v1/webhook-endpoints/{endpoint_id}", ScopeWebhooksWrite, true, s.deleteEndpoint)
	mux.Handle("/api/", s.withRequestID(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such route: "+r.Method+" "+r.URL.Path, "")
	}))

	admin := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, s.admin(h)) }
	admin("POST /_sim/sites/{site_id}/leads", s.simCreateLeads)
	admin("POST /_sim/sites/{site_id}/conversations", s.simConversation)
	admin("POST /_sim/sites/{site_id}/broadcasts", s.simBroadcast)
	admin("GET /_sim/faults", s.simGetFaults)
	admin("PUT /_sim/faults", s.simPutFaults)
	admin("GET /_sim/requests", s.simRequests)
	admin("GET /_sim/stats", s.simStats)
	admin("GET /_sim/events", s.simEvents)
	admin("GET /_sim/deliveries", s.simDeliveries)
	mux.HandleFunc("GET /_sim/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	return mux
}

// maxLog bounds each of the in-memory logs (requests, events, delivery
// attempts) so that a long-running simulator does not grow without end; the
// oldest entries go first.
const maxLog = 100_000

func appendCapped[T any](log []T, v T) []T {
	if len(log) >= maxLog {
		log = append(log[:0], log[len(log)-maxLog/2:]...)
	}
	return append(log, v)
}
