package webhookingress

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/store"
)

// DefaultMaxBody caps a delivery's body. The contract's envelope is four
// fields (id, type, created_at, data) and a lead.created's data two ids: a
// delivery is a few hundred bytes. The data of the other event types is not
// shown and may gain fields, so the cap leaves them three orders of
// magnitude of room while bounding what MaxConcurrent bodies in memory
// cost (64 × 256 KiB = 16 MiB).
const DefaultMaxBody = 256 << 10

// DefaultMaxConcurrent is how many deliveries whose body is over SmallBody
// (or of undeclared length) may read it, verify and record at once, by
// default.
const DefaultMaxConcurrent = 64

// SmallBody is the declared length up to which a delivery reads its body in
// a lane of slots of its own (MaxConcurrentSmall): every delivery the
// contract describes is a few hundred bytes, so forged deliveries that
// declare large bodies and upload them slowly never make a real one wait
// for a slot.
const SmallBody = 8 << 10

// DefaultMaxConcurrentSmall is how many deliveries whose declared body is
// at most SmallBody may read it, verify and record at once, by default:
// 256 × 8 KiB is 2 MiB of bodies.
const DefaultMaxConcurrentSmall = 256

// DefaultBodyTimeout and DefaultBodyRate bound the time a body may take to
// arrive once its delivery has a slot: one second, plus one more for every
// 128 KiB declared — 1 s for a delivery of a few hundred bytes, 3 s for a
// body at the 256 KiB cap. A sender writes the body right behind the
// headers, so a small one is usually in the same TCP segment; the second
// covers a retransmission or an Expect: 100-continue round trip on a slow
// path. 128 KiB/s (about 1 Mbit/s) is a slow link between two servers, and
// TCP's slow start on a new connection brings 256 KiB across in about five
// round trips (0.5 s at 100 ms). So a slow uploader holds a slot for at most
// 3 s (a small-lane slot for about 1 s) instead of the sender's 10 s.
const (
	DefaultBodyTimeout = time.Second
	DefaultBodyRate    = 128 << 10
)

// DefaultSlotWait is how long a delivery waits for a slot before its 503:
// half the sender's 10-second request timeout. A waiting delivery holds
// only its headers (its body is not read yet), and a burst from the
// sender (thousands of lead.created at once) queues here instead of
// falling into the sender's backoff, which doubles from 2 s.
const DefaultSlotWait = 5 * time.Second

// MaxHeaderBytes bounds a request's header on the webhook port: a
// delivery's headers are a few hundred bytes (svc-signature is at most
// webhook.MaxHeaderLen).
const MaxHeaderBytes = 32 << 10

// Inbox records verified events.
type Inbox interface {
	RecordEvent(ctx context.Context, ev store.InboxEvent) (bool, error)
	RecordHandled(ctx context.Context, ev store.InboxEvent, outcome, reason string) (bool, error)
	MarkEndpointVerified(ctx context.Context, endpointID, eventID string, lane store.Lane) (bool, error)
	SecretExpectation(ctx context.Context, receiver string) (store.Expectation, error)
	Ping(ctx context.Context) error
}

// LaneFor is the inbox lane of an event type: the events a workflow waits
// on (knowledge.ready, site.published, site.unpublished) go to the priority
// lane, so that a flood of lead.created never delays them; everything else
// to the bulk lane.
func LaneFor(eventType string) store.Lane {
	switch webhook.EventType(eventType) {
	case webhook.KnowledgeReady, webhook.SitePublished, webhook.SiteUnpublished:
		return store.LanePriority
	}
	return store.LaneBulk
}

// Options configure a Handler. Inbox is required.
type Options struct {
	Inbox   Inbox
	Secrets SecretStore // stored secrets; nil to use only EnvSecrets
	// EnvSecrets are accepted on POST /webhooks (SITEOPS_WEBHOOK_SECRETS).
	EnvSecrets []string
	// Window is the signature age window (webhook.DefaultWindow).
	Window time.Duration
	// MaxBody caps a body (DefaultMaxBody).
	MaxBody int64
	// MaxConcurrent bounds the deliveries whose body is over SmallBody or
	// of undeclared length that read it, verify and record at once
	// (DefaultMaxConcurrent); MaxConcurrentSmall those whose declared body
	// is at most SmallBody (DefaultMaxConcurrentSmall). A delivery that
	// finds its lane's slots all taken waits up to SlotWait, then is
	// answered 503 (the sender retries). Requests refused on their header
	// alone never take one.
	MaxConcurrent      int
	MaxConcurrentSmall int
	// SlotWait is how long a delivery waits for a slot (DefaultSlotWait).
	SlotWait time.Duration
	// BodyTimeout is how long a body may take to arrive once its delivery
	// has a slot, plus one second per BodyRate bytes declared
	// (DefaultBodyTimeout, DefaultBodyRate): a slower body is answered 408
	// and gives its slot back.
	BodyTimeout time.Duration
	BodyRate    int64
	// SecretRefresh is how long stored secrets are cached (2 s).
	SecretRefresh time.Duration
	// UnknownTTL is how long the answer "this receiver expects no new
	// secret" is cached (1 s), so that repeated requests to an unknown
	// receiver, or forged ones to a known one, cost the store nothing.
	UnknownTTL time.Duration
	// LogsPerSecond bounds the rejection log lines per second (10); the
	// metrics count every rejection, and the next line logged says how
	// many were left out.
	LogsPerSecond int
	Now           func() time.Time
	Logger        *slog.Logger
	// Metrics records the handler's metrics; nil for metrics of its own, on
	// a meter provider and registry of their own.
	Metrics *Metrics
	// Registry serves GET /metrics on the admin handler: the process's
	// registry. When nil, the registry of Metrics when NewMetrics made it
	// (also when the handler made its own), else prometheus.DefaultGatherer.
	Registry prometheus.Gatherer
	// Recorded, when set, is told of every new record and its lane (the
	// relay's wake-up).
	Recorded func(store.Lane)
	// PendingWait is how long a delivery that does not verify is held at
	// most while its receiver expects a new secret (5 s, half the sender's
	// timeout).
	PendingWait time.Duration
	// MaxHeld bounds how many deliveries are held at once (32); the rest
	// are answered at once.
	MaxHeld int
}

// Handler serves the webhook routes (POST /webhooks, POST
// /webhooks/{receiver}) and GET /healthz. Its Admin handler serves what
// only the operators' network may see: /metrics, /readyz and /healthz.
type Handler struct {
	opts    Options
	secrets *secretSource
	mux     *http.ServeMux
	admin   *http.ServeMux
	held    chan struct{} // a token per held delivery
	// A token per delivery reading, verifying, recording: slots for
	// bodies over SmallBody or of undeclared length, small for the rest.
	slots chan struct{}
	small chan struct{}
	logs  *sampler

	verifiedMu sync.Mutex
	verified   map[string]bool // endpoints whose first verified delivery is recorded
}

var receiverName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// NewHandler returns the ingress handler.
func NewHandler(o Options) *Handler {
	if o.Window == 0 {
		o.Window = webhook.DefaultWindow
	}
	if o.MaxBody == 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.MaxConcurrent == 0 {
		o.MaxConcurrent = DefaultMaxConcurrent
	}
	if o.MaxConcurrentSmall == 0 {
		o.MaxConcurrentSmall = DefaultMaxConcurrentSmall
	}
	if o.SlotWait == 0 {
		o.SlotWait = DefaultSlotWait
	}
	if o.BodyTimeout == 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.BodyRate == 0 {
		o.BodyRate = DefaultBodyRate
	}
	if o.SecretRefresh == 0 {
		o.SecretRefresh = 2 * time.Second
	}
	if o.UnknownTTL == 0 {
		o.UnknownTTL = time.Second
	}
	if o.LogsPerSecond == 0 {
		o.LogsPerSecond = 10
	}
	if o.PendingWait == 0 {
		o.PendingWait = 5 * time.Second
	}
	if o.MaxHeld == 0 {
		o.MaxHeld = 32
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	if o.Registry == nil {
		o.Registry = o.Metrics.registry
	}
	if o.Registry == nil {
		o.Registry = prometheus.DefaultGatherer
	}
	h := &Handler{
		opts: o,
		secrets: (&secretSource{
			env: o.EnvSecrets, store: o.Secrets, expect: o.Inbox.SecretExpectation,
			refresh: o.SecretRefresh, unknownTTL: o.UnknownTTL, now: o.Now, log: o.Logger,
			unreadable: o.Metrics.unreadableSecrets,
		}).init(),
		mux:      http.NewServeMux(),
		admin:    http.NewServeMux(),
		held:     make(chan struct{}, o.MaxHeld),
		slots:    make(chan struct{}, o.MaxConcurrent),
		small:    make(chan struct{}, o.MaxConcurrentSmall),
		logs:     &sampler{perSecond: o.LogsPerSecond, now: o.Now},
		verified: map[string]bool{EnvEndpoint: true},
	}
	healthz := func(w http.ResponseWriter, _ *http.Request) { answer(w, http.StatusOK, "ok") }
	h.mux.HandleFunc("POST /webhooks", func(w http.ResponseWriter, r *http.Request) { h.receive(w, r, "") })
	h.mux.HandleFunc("POST /webhooks/{receiver}", func(w http.ResponseWriter, r *http.Request) {
		h.receive(w, r, r.PathValue("receiver"))
	})
	h.mux.HandleFunc("GET /healthz", healthz)
	h.admin.HandleFunc("GET /healthz", healthz)
	h.admin.HandleFunc("GET /readyz", h.ready)
	h.admin.Handle("GET /metrics", promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{}))
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Admin is the handler of the internal address (SITEOPS_INGRESS_ADMIN_ADDR):
// GET /metrics (the backlog and the rejection rates), GET /readyz (pings
// the store) and GET /healthz. None of it is served on the webhook port,
// which anyone can reach.
func (h *Handler) Admin() http.Handler { return h.admin }

// answer writes a short JSON status that tells the sender what happened
// without echoing anything of ours.
func answer(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if status == http.StatusNoContent {
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"status": msg})
}

// reject answers a refused request. Its body may be unread (most refusals
// come before it is read): the connection is closed after the answer, so
// that the server neither reads the rest of an upload nor keeps the
// connection for more.
func (h *Handler) reject(w http.ResponseWriter, r *http.Request, status int, reason string) {
	h.opts.Metrics.delivery(r.Context(), "rejected", reason)
	if ok, dropped := h.logs.allow(); ok {
		args := []any{"reason", reason, "status", status,
			"event_id", clipLog(r.Header.Get("svc-event-id")), "event_type", clipLog(r.Header.Get("svc-event-type")), "path", clipLog(r.URL.Path)}
		if dropped > 0 {
			args = append(args, "rejections_not_logged", dropped)
		}
		h.opts.Logger.Warn("webhook delivery rejected", args...)
	} else {
		h.opts.Metrics.logSuppressed(r.Context())
	}
	// Close the connection after the answer, and read no more of the body
	// first: net/http would otherwise read up to 256 KiB of an unread body
	// after the handler returns, to keep the connection.
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	answer(w, status, reason)
}

// receive handles a delivery in the order that costs an unauthenticated
// client least: the receiver's name, the signature header and its
// timestamp, the declared length and the receiver's secrets are checked
// before the body is read, and only a delivery that passes them takes a
// slot of its lane (by declared length) to read at most MaxBody bytes
// within a deadline, verify, and record.
func (h *Handler) receive(w http.ResponseWriter, r *http.Request, receiver string) {
	if receiver != "" && !receiverName.MatchString(receiver) {
		h.reject(w, r, http.StatusNotFound, "unknown_receiver")
		return
	}
	sig, err := webhook.Check(r.Header.Get("svc-signature"), h.opts.Now(), h.opts.Window)
	switch {
	case errors.Is(err, webhook.ErrMalformedHeader):
		h.reject(w, r, http.StatusBadRequest, "malformed_signature_header")
		return
	case errors.Is(err, webhook.ErrTimestampOutsideWindow):
		h.reject(w, r, http.StatusUnauthorized, "timestamp_outside_window")
		return
	case err != nil:
		h.reject(w, r, http.StatusBadRequest, "malformed_signature_header")
		return
	}
	if r.ContentLength > h.opts.MaxBody {
		h.reject(w, r, http.StatusRequestEntityTooLarge, "body_too_large")
		return
	}
	set, err := h.secrets.lookup(r.Context(), receiver)
	if errors.Is(err, errUnknownReceiver) && !h.mayExpect(r.Context(), receiver, set.fetched) {
		h.reject(w, r, http.StatusNotFound, "unknown_receiver")
		return
	}
	if err != nil && !errors.Is(err, errUnknownReceiver) {
		h.opts.Logger.Error("secret lookup failed", "receiver", store.ReceiverName(receiver), "error", err)
		h.reject(w, r, http.StatusServiceUnavailable, "store_unavailable")
		return
	}
	slots := h.slots
	if r.ContentLength >= 0 && r.ContentLength <= SmallBody {
		slots = h.small
	}
	if !h.acquire(r.Context(), slots) {
		w.Header().Set("Retry-After", "1")
		h.reject(w, r, http.StatusServiceUnavailable, "busy")
		return
	}
	defer func() { <-slots }()
	body, err := h.readBody(w, r)
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			h.reject(w, r, http.StatusRequestEntityTooLarge, "body_too_large")
		case errors.Is(err, os.ErrDeadlineExceeded):
			h.reject(w, r, http.StatusRequestTimeout, "body_too_slow")
		default:
			h.reject(w, r, http.StatusBadRequest, "unreadable_body")
		}
		return
	}
	idx, err := sig.Match(body, set.secrets)
	if err != nil {
		set, idx, err = h.awaitNewSecret(r.Context(), receiver, sig, body, set)
	}
	switch {
	case errors.Is(err, errUnknownReceiver):
		h.reject(w, r, http.StatusNotFound, "unknown_receiver")
		return
	case errors.Is(err, errStoreDown):
		h.opts.Logger.Error("secret lookup failed", "receiver", store.ReceiverName(receiver), "error", err)
		h.reject(w, r, http.StatusServiceUnavailable, "store_unavailable")
		return
	case err != nil:
		h.reject(w, r, http.StatusUnauthorized, "invalid_signature")
		return
	}
	endpointID := set.endpoints[idx]
	// Only now, the signature verified, is the body parsed.
	env, err := webhook.DecodeEnvelope(body)
	if err != nil {
		h.recordMalformed(w, r, receiver, endpointID, body, err)
		return
	}
	if env.ID != r.Header.Get("svc-event-id") {
		h.reject(w, r, http.StatusBadRequest, "event_id_mismatch")
		return
	}
	if string(env.Type) != r.Header.Get("svc-event-type") {
		h.reject(w, r, http.StatusBadRequest, "event_type_mismatch")
		return
	}
	if err := h.noteVerified(r.Context(), endpointID, env.ID); err != nil {
		h.opts.Logger.Error("recording a verified delivery failed", "event_id", clipLog(env.ID), "endpoint_id", endpointID, "error", err)
		h.reject(w, r, http.StatusServiceUnavailable, "store_unavailable")
		return
	}
	lane := LaneFor(string(env.Type))
	fresh, err := h.opts.Inbox.RecordEvent(r.Context(), store.InboxEvent{
		EventID: env.ID, EventType: string(env.Type), Lane: lane, Receiver: receiver, EndpointID: endpointID,
		ReceivedAt: h.opts.Now(), Body: body, TraceContext: traceparent(r),
	})
	if err != nil {
		h.opts.Logger.Error("recording a webhook event failed", "event_id", clipLog(env.ID), "error", err)
		h.reject(w, r, http.StatusServiceUnavailable, "store_unavailable")
		return
	}
	if !fresh {
		h.opts.Metrics.delivery(r.Context(), "duplicate", "")
		h.opts.Logger.Info("duplicate webhook delivery", "event_id", clipLog(env.ID), "event_type", clipLog(string(env.Type)))
		answer(w, http.StatusNoContent, "")
		return
	}
	h.opts.Metrics.delivery(r.Context(), "accepted", "")
	h.opts.Logger.Info("webhook event recorded", "event_id", clipLog(env.ID), "event_type", clipLog(string(env.Type)), "receiver", store.ReceiverName(receiver), "endpoint_id", endpointID)
	if h.opts.Recorded != nil {
		h.opts.Recorded(lane)
	}
	answer(w, http.StatusOK, "accepted")
}

// acquire takes one of slots, waiting up to SlotWait.
func (h *Handler) acquire(ctx context.Context, slots chan struct{}) bool {
	select {
	case slots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(h.opts.SlotWait)
	defer t.Stop()
	select {
	case slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// readBody reads at most MaxBody bytes within bodyTime of the declared
// length, into a buffer sized once from the declared length.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	// Not every ResponseWriter can (httptest's cannot); the server's
	// ReadTimeout still bounds the read then.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(h.bodyTime(r.ContentLength)))
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 {
		buf.Grow(int(n) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, h.opts.MaxBody))
	return buf.Bytes(), err
}

// bodyTime is how long a body of n declared bytes (-1: undeclared) may take
// to arrive: BodyTimeout, plus a second per BodyRate bytes.
func (h *Handler) bodyTime(n int64) time.Duration {
	if n < 0 || n > h.opts.MaxBody {
		n = h.opts.MaxBody
	}
	return h.opts.BodyTimeout + time.Duration(float64(n)/float64(h.opts.BodyRate)*float64(time.Second))
}

// MalformedEventIDPrefix starts the inbox id of a verified delivery whose
// body is not an event envelope (see recordMalformed).
const MalformedEventIDPrefix = "malformed_"

// recordMalformed records a delivery that verified but whose body is not an
// envelope siteops can read (not JSON, a created_at that does not parse,
// duplicate or case-variant keys, no evt_ id). Retrying cannot help, and
// the contract has a receiver answer non-2xx only when it wants a retry, so
// the body is kept as it came, with the outcome malformed (`siteops events
// list --outcome malformed`), never dispatched, and answered 200. Its inbox
// id is derived from the body (a retry of the same delivery is a duplicate),
// not taken from svc-event-id: the header is not signed, and a malformed
// body must not be able to claim the id of an event still to come.
func (h *Handler) recordMalformed(w http.ResponseWriter, r *http.Request, receiver, endpointID string, body []byte, parseErr error) {
	sum := sha256.Sum256(body)
	id := MalformedEventIDPrefix + hex.EncodeToString(sum[:16])
	typ := clipLog(r.Header.Get("svc-event-type"))
	reason := clip(fmt.Sprintf("svc-event-id %s: %v", clipLog(r.Header.Get("svc-event-id")), parseErr), 512)
	if err := h.noteVerified(r.Context(), endpointID, id); err != nil {
		h.opts.Logger.Error("recording a verified delivery failed", "event_id", id, "endpoint_id", endpointID, "error", err)
		h.reject(w, r, http.StatusServiceUnavailable, "store_unavailable")
		return
	}
	fresh, err := h.opts.Inbox.RecordHandled(r.Context(), store.InboxEvent{
		EventID: id, EventType: typ, Lane: LaneFor(typ), Receiver: receiver, EndpointID: endpointID,
		ReceivedAt: h.opts.Now(), Body: body, TraceContext: traceparent(r),
	}, OutcomeMalformed, reason)
	if err != nil {
		h.opts.Logger.Error("recording a malformed webhook body failed", "event_id", id, "error", err)
		h.reject(w, r, http.StatusServiceUnavailable, "store_unavailable")
		return
	}
	if !fresh {
		h.opts.Metrics.delivery(r.Context(), "duplicate", "")
		answer(w, http.StatusNoContent, "")
		return
	}
	h.opts.Metrics.delivery(r.Context(), "malformed", "")
	if ok, _ := h.logs.allow(); ok {
		h.opts.Logger.Warn("verified webhook body is not an event envelope; recorded as malformed",
			"event_id", id, "header_event_id", clipLog(r.Header.Get("svc-event-id")), "event_type", typ,
			"receiver", store.ReceiverName(receiver), "endpoint_id", endpointID, "error", clip(parseErr.Error(), 256))
	}
	answer(w, http.StatusOK, "recorded_malformed")
}

var errStoreDown = errors.New("store_unavailable")

// mayExpect reports whether an unknown receiver expects its first secret
// (an endpoint creation for it is in flight) or may have got one since its
// secrets were read at fetched, so that its deliveries are read and may be
// held. Answers are cached (secretSource.expectation).
func (h *Handler) mayExpect(ctx context.Context, receiver string, fetched time.Time) bool {
	exp, err := h.secrets.expectation(ctx, receiver, holdPoll)
	return err == nil && (exp.Pending || exp.LastEnded.After(fetched))
}

// holdPoll is how often a held delivery looks again.
const holdPoll = 50 * time.Millisecond

// awaitNewSecret handles the moment of a secret rotation between the
// service creating an endpoint and siteops storing its one-time secret: a
// delivery signed with the new secret cannot verify yet (its header and
// timestamp were checked before the body was read). If a secret was stored
// for the receiver since its secrets were read, the delivery is verified
// again at once. If an endpoint creation for the receiver is still in
// flight, the delivery is held (at most MaxHeld at a time, for at most
// PendingWait) and released the moment a secret is stored or the creation
// ends. Otherwise it is refused: errUnknownReceiver for a receiver without
// secrets, else webhook.ErrNoValidSignature.
//
// Held deliveries cost the store one poll per receiver, not one each: the
// expectation and the secrets are read through secretSource's shared,
// cached reads.
func (h *Handler) awaitNewSecret(ctx context.Context, receiver string, sig webhook.Header, body []byte, set secretSet) (secretSet, int, error) {
	first := error(webhook.ErrNoValidSignature)
	if len(set.secrets) == 0 {
		first = errUnknownReceiver
	}
	fetched := set.fetched
	try := func() (secretSet, int, error, bool) {
		// Half the poll interval: every tick of a held delivery reads
		// afresh, once for all the receiver's held deliveries.
		exp, err := h.secrets.expectation(ctx, receiver, holdPoll/2)
		if err != nil {
			return secretSet{}, -1, first, true
		}
		if exp.LastEnded.After(fetched) || (fetched.IsZero() && !exp.LastEnded.IsZero()) {
			s, err := h.secrets.fetchSince(ctx, receiver, exp.LastEnded)
			switch {
			case err != nil && !errors.Is(err, errUnknownReceiver):
				return s, -1, fmt.Errorf("%w: %w", errStoreDown, err), true
			case err == nil:
				if idx, err := sig.Match(body, s.secrets); err == nil {
					h.opts.Logger.Info("delivery verified with a newly stored secret", "receiver", store.ReceiverName(receiver), "endpoint_id", s.endpoints[idx])
					return s, idx, nil, true
				}
				first = webhook.ErrNoValidSignature // the receiver's secrets as they are now
			}
			fetched = s.fetched
		}
		if !exp.Pending {
			return secretSet{}, -1, first, true
		}
		return secretSet{}, -1, nil, false
	}
	if s, idx, err, done := try(); done {
		return s, idx, err
	}
	select {
	case h.held <- struct{}{}:
		defer func() { <-h.held }()
	default:
		h.opts.Metrics.hold(ctx, "refused_full")
		return secretSet{}, -1, first
	}
	h.opts.Metrics.hold(ctx, "held")
	deadline := time.NewTimer(h.opts.PendingWait)
	defer deadline.Stop()
	tick := time.NewTicker(holdPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return secretSet{}, -1, first
		case <-deadline.C:
			return secretSet{}, -1, first
		case <-tick.C:
		}
		if s, idx, err, done := try(); done {
			return s, idx, err
		}
	}
}

// noteVerified records, once per endpoint, that a delivery signed with the
// endpoint's stored secret verified: a secret rotation waits for that. It
// runs for duplicates too, since during a rotation the same event reaches
// the receiver through the old and the new endpoint.
func (h *Handler) noteVerified(ctx context.Context, endpointID, eventID string) error {
	h.verifiedMu.Lock()
	done := h.verified[endpointID]
	h.verifiedMu.Unlock()
	if done {
		return nil
	}
	first, err := h.opts.Inbox.MarkEndpointVerified(ctx, endpointID, eventID, store.LanePriority)
	if err != nil {
		return err
	}
	h.verifiedMu.Lock()
	h.verified[endpointID] = true
	h.verifiedMu.Unlock()
	if first {
		h.opts.Logger.Info("first verified delivery on endpoint", "endpoint_id", endpointID, "event_id", eventID)
		if h.opts.Recorded != nil {
			h.opts.Recorded(store.LanePriority)
		}
	}
	return nil
}

func (h *Handler) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := h.opts.Inbox.Ping(ctx); err != nil {
		answer(w, http.StatusServiceUnavailable, "store_unavailable")
		return
	}
	answer(w, http.StatusOK, "ready")
}
