package ingress

import (
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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/relay"
	"github.com/siteops/siteops/store"
)

// DefaultMaxBody caps a delivery's body. The contract's envelope is four
// fields (id, type, created_at, data) and a lead.created's data two ids: a
// delivery is a few hundred bytes. The data of the other event types is not
// shown and may gain fields, so the cap leaves them three orders of
// magnitude of room.
const DefaultMaxBody = 256 << 10

// DefaultMaxConcurrent is how many deliveries whose body is over SmallBody
// may verify and record at once, by default.
const DefaultMaxConcurrent = 64

// SmallBody is the body length up to which a delivery verifies and records
// in a lane of slots of its own (MaxConcurrentSmall), and reads its body
// outside the BodyBudget: every delivery the contract describes is a few
// hundred bytes, so forged deliveries with large bodies never make a real
// one wait.
const SmallBody = 8 << 10

// DefaultMaxConcurrentSmall is how many deliveries whose body is at most
// SmallBody may verify and record at once, by default.
const DefaultMaxConcurrentSmall = 256

// DefaultBodyBudget bounds the memory of the bodies being read that declare
// more than SmallBody or no length, counted by the buffer each has grown
// to as its bytes arrived (never by the length it declares): 128 bodies at
// the 256 KiB cap. A body that would take it past the budget is answered
// 503 (the sender retries). Bodies of at most SmallBody are bounded by the
// connection cap instead (MaxConns × 8 KiB).
const DefaultBodyBudget = 32 << 20

// DefaultBodyTimeout and DefaultBodyRate bound the time a body may take to
// arrive once its header is read: one second, plus one more for every
// 128 KiB declared — 1 s for a delivery of a few hundred bytes, 3 s for a
// body at the 256 KiB cap. A sender writes the body right behind the
// headers, so a small one is usually in the same TCP segment; the second
// covers a retransmission or an Expect: 100-continue round trip on a slow
// path. 128 KiB/s (about 1 Mbit/s) is a slow link between two servers, and
// TCP's slow start on a new connection brings 256 KiB across in about five
// round trips (0.5 s at 100 ms). A body being read holds no slot: only its
// connection and the bytes that arrived.
const (
	DefaultBodyTimeout = time.Second
	DefaultBodyRate    = 128 << 10
)

// DefaultSlotWait is how long a delivery whose body is read waits for a
// slot to verify and record before its 503: half the sender's 10-second
// request timeout. Slots are held for a verification and a write to the
// inbox, so they run short only when the store is slow; a burst from the
// sender (thousands of lead.created at once) then queues here instead of
// falling into the sender's backoff, which doubles from 2 s.
const DefaultSlotWait = 5 * time.Second

// DefaultSecretRefresh is how old the list of receivers and their secrets
// may be when a request is answered from it. A delivery to a receiver that
// the list does not name, or that no listed secret verifies, waits instead
// for a read of the list that started after it arrived (an endpoint
// creation may have begun, or a secret been stored, a moment before), and
// DefaultRecheck is the least time between two reads: such deliveries,
// however many, cost at most one read of the list per 50 ms, which each
// shares.
const (
	DefaultSecretRefresh = time.Second
	DefaultRecheck       = 50 * time.Millisecond
)

// MaxHeaderBytes bounds a request's header on the webhook port: a
// delivery's headers are a few hundred bytes, svc-signature at most
// webhook.MaxHeaderLen (4 KiB). net/http reads up to 4 KiB more than this
// before it answers 431.
const MaxHeaderBytes = 8 << 10

// Inbox records verified events.
type Inbox interface {
	RecordEvent(ctx context.Context, ev store.InboxEvent) (bool, error)
	RecordHandled(ctx context.Context, ev store.InboxEvent, outcome, reason string) (bool, error)
	MarkEndpointVerified(ctx context.Context, endpointID, eventID string, lane store.Lane) (bool, error)
	Ping(ctx context.Context) error
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
	// BodyBudget bounds the bytes held by the bodies being read that
	// declare more than SmallBody or no length (DefaultBodyBudget, and at
	// least twice MaxBody).
	BodyBudget int64
	// MaxConcurrent bounds the deliveries whose body, read whole, is over
	// SmallBody that verify and record at once (DefaultMaxConcurrent);
	// MaxConcurrentSmall the others (DefaultMaxConcurrentSmall). A
	// delivery that finds its lane's slots all taken waits up to
	// SlotWait, then is answered 503 (the sender retries). Reading a body
	// takes no slot, and requests refused on their header never take one.
	MaxConcurrent      int
	MaxConcurrentSmall int
	// SlotWait is how long a delivery waits for a slot (DefaultSlotWait).
	SlotWait time.Duration
	// BodyTimeout is how long a body may take to arrive once the header
	// is read, plus one second per BodyRate bytes declared
	// (DefaultBodyTimeout, DefaultBodyRate): a slower body is answered
	// 408.
	BodyTimeout time.Duration
	BodyRate    int64
	// SecretRefresh is how old the list of receivers may be
	// (DefaultSecretRefresh), Recheck the least time between two of its
	// reads (DefaultRecheck).
	SecretRefresh time.Duration
	Recheck       time.Duration
	// LogsPerSecond bounds the rejection log lines per second, and
	// separately the store-failure error lines (10 each); the metrics
	// count every rejection, and the next line logged says how many were
	// left out.
	LogsPerSecond int
	Now           func() time.Time
	Logger        *slog.Logger
	// Checks, when set, reports the process's start-up checks: /readyz
	// shows them, and says "degraded" while one fails (the process serves
	// what it can: a failing check never makes it unready, only the store
	// does).
	Checks func() (degraded bool, checks any)
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
	// Refused keeps the record of refused deliveries in the store
	// (refusals.go): its Store nil keeps none.
	Refused RefusedOptions
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
	// A token per delivery verifying and recording: slots for bodies over
	// SmallBody, small for the rest.
	slots  chan struct{}
	small  chan struct{}
	budget *byteBudget // the bytes of large bodies being read
	logs   *sampler    // rejection lines
	errs   *sampler    // store-failure lines
	// refused counts refusals for the record; nil when none is kept.
	refused *refusalRecord

	verifiedMu sync.Mutex
	verified   map[string]bool // endpoints whose first verified delivery is recorded
}

var receiverName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// withDefaults is o with every field left zero set to its default: the
// Default* constants, a discarding logger, metrics of a registry of their
// own, time.Now.
func (o Options) withDefaults() Options {
	if o.Window == 0 {
		o.Window = webhook.DefaultWindow
	}
	if o.MaxBody == 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.BodyBudget == 0 {
		o.BodyBudget = DefaultBodyBudget
	}
	o.BodyBudget = max(o.BodyBudget, 2*o.MaxBody)
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
		o.SecretRefresh = DefaultSecretRefresh
	}
	if o.Recheck == 0 {
		o.Recheck = DefaultRecheck
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
	o.Refused = o.Refused.withDefaults()
	return o
}

// NewHandler returns the ingress handler.
func NewHandler(o Options) *Handler {
	o = o.withDefaults()
	h := &Handler{
		opts: o,
		secrets: (&secretSource{
			env: o.EnvSecrets, store: o.Secrets, refresh: o.SecretRefresh, spacing: o.Recheck, now: o.Now, log: o.Logger,
			unreadable: o.Metrics.unreadableSecrets,
		}).init(),
		mux:      http.NewServeMux(),
		admin:    http.NewServeMux(),
		held:     make(chan struct{}, o.MaxHeld),
		slots:    make(chan struct{}, o.MaxConcurrent),
		small:    make(chan struct{}, o.MaxConcurrentSmall),
		budget:   &byteBudget{max: o.BodyBudget},
		logs:     &sampler{perSecond: o.LogsPerSecond, now: o.Now},
		errs:     &sampler{perSecond: o.LogsPerSecond, now: o.Now},
		refused:  newRefusalRecord(o.Refused),
		verified: map[string]bool{store.EnvEndpoint: true},
	}
	healthz := func(w http.ResponseWriter, _ *http.Request) { answer(w, http.StatusOK, "ok") }
	h.mux.HandleFunc(routeDeliveries, func(w http.ResponseWriter, r *http.Request) { h.receive(w, r, "") })
	h.mux.HandleFunc(routeReceiver, func(w http.ResponseWriter, r *http.Request) {
		h.receive(w, r, r.PathValue("receiver"))
	})
	h.mux.HandleFunc(routeHealth, healthz)
	h.admin.HandleFunc(routeHealth, healthz)
	h.admin.HandleFunc("GET /readyz", h.ready)
	h.admin.Handle("GET /metrics", promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{}))
	return h
}

// The routes of the webhook port. Only the two delivery routes take a
// body.
const (
	routeDeliveries = "POST /webhooks"
	routeReceiver   = "POST /webhooks/{receiver}"
	routeHealth     = "GET /healthz"
)

// ServeHTTP serves the webhook port. A request for anything but a delivery
// route that announces a body (a Content-Length above 0, or a
// Transfer-Encoding) is refused at once, 413 body_not_allowed, and its
// connection closed: answered as usual, net/http would then wait up to the
// read timeout for the body to drain it, on a connection the cap counts as
// busy. A request that matches no route (404, 405) has its connection
// closed with the answer: no sender of ours makes one.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := h.mux.Handler(r); pattern != routeDeliveries && pattern != routeReceiver {
		if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
			h.reject(w, r, http.StatusRequestEntityTooLarge, "body_not_allowed")
			return
		}
		if pattern != routeHealth {
			w.Header().Set("Connection", "close")
		}
	}
	h.mux.ServeHTTP(w, r)
}

// Admin is the handler of the internal address (SITEOPS_INGRESS_ADMIN_ADDR):
// GET /metrics (the backlog and the rejection rates), GET /readyz (pings
// the store) and GET /healthz. None of it is served on the webhook port,
// which anyone can reach.
func (h *Handler) Admin() http.Handler { return h.admin }

// answer writes a short JSON status that tells the sender what happened
// without echoing anything of ours. It says its length, so that an answer
// flushed before the handler returns (refuse) is not chunked.
func answer(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	b, _ := json.Marshal(map[string]string{"status": msg})
	b = append(b, '\n')
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// retryAfter is the Retry-After of each reason answered 503: the sender
// retries every non-2xx answer, and one that honors Retry-After waits
// longer where the fix takes longer.
var retryAfter = map[string]string{
	"busy":              "1",
	"body_budget":       "1",
	"connection_shed":   "1",
	"store_unavailable": "5",
}

// publicReason is what the answer's body says of a reason. A delivery that
// no secret verifies is answered 401 invalid_signature whatever the reason
// (the receiver does not exist, or its stored secrets do not decrypt), so
// that the answers do not tell which receiver names exist; the logs and
// siteops_webhook_deliveries_total{reason} keep unknown_receiver and
// secret_unreadable for the operators.
func publicReason(reason string) string {
	switch reason {
	case "unknown_receiver", "secret_unreadable":
		return "invalid_signature"
	}
	return reason
}

// reject answers a refused request and counts and logs it (at a bounded
// rate).
func (h *Handler) reject(w http.ResponseWriter, r *http.Request, status int, reason string) {
	if ok, dropped := h.logs.allow(); ok {
		args := []any{"reason", reason, "status", status,
			"event_id", clipLog(r.Header.Get("svc-event-id")), "event_type", clipLog(r.Header.Get("svc-event-type")), "path", clipLog(r.URL.Path)}
		if limit, setting, ok := h.limitOf(r, reason); ok {
			args = append(args, "limit", limit, "setting", setting)
		}
		if dropped > 0 {
			args = append(args, "rejections_not_logged", dropped)
		}
		h.opts.Logger.Warn("webhook delivery rejected", args...)
	} else {
		h.opts.Metrics.logSuppressed(r.Context())
	}
	h.refuse(w, r, status, reason)
}

// storeFailed answers a delivery that the store failed (503, the sender
// retries) and logs the error at a bounded rate of its own, so that a
// store that is down cannot flood the log either, and a flood of
// rejections cannot hide it.
func (h *Handler) storeFailed(w http.ResponseWriter, r *http.Request, msg string, err error, args ...any) {
	if connShed(r) {
		// The store call failed because the cap closed the connection.
		h.reject(w, r, http.StatusServiceUnavailable, "connection_shed")
		return
	}
	if ok, dropped := h.errs.allow(); ok {
		args = append(args, "error", clip(err.Error(), 512), "path", clipLog(r.URL.Path))
		if dropped > 0 {
			args = append(args, "errors_not_logged", dropped)
		}
		h.opts.Logger.Error(msg, args...)
	} else {
		h.opts.Metrics.errorLogSuppressed(r.Context())
	}
	h.refuse(w, r, http.StatusServiceUnavailable, "store_unavailable")
}

// refuse counts and answers a refused request. Its body may be unread
// (most refusals come before it is read): the connection is closed after
// the answer, so that the server neither reads the rest of an upload nor
// keeps the connection for more, and the connection cap may close it at
// once to admit another.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, status int, reason string) {
	h.opts.Metrics.delivery(r.Context(), "rejected", reason)
	h.noteRefusal(r, status, reason)
	if ra, ok := retryAfter[reason]; ok && status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", ra)
	}
	// Connection: close, set before the status is written, keeps net/http
	// from draining an unread body before it writes the answer; the read
	// deadline keeps it from doing so when it closes the body after the
	// handler returns (up to 256 KiB, for as long as the read timeout
	// lets it). A body declared over 256 KiB is not drained, but net/http
	// then waits half a second before it closes the connection: the
	// connection is marked answered, the first the cap closes.
	w.Header().Set("Connection", "close")
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now())
	answer(w, status, publicReason(reason))
	_ = rc.Flush()
	markConn(r, phaseAnswered)
}

// errUnreadable means that no secret verified a delivery while some of its
// receiver's stored secrets do not decrypt: it may be signed with one of
// them. It is answered as a signature that does not verify (401): the
// sender retries it as any non-2xx, and a retry after the fix succeeds.
var errUnreadable = errors.New("secret_unreadable")

// receive handles a delivery in the order that costs an unauthenticated
// client least: the receiver's name, the signature header and its
// timestamp, and the declared length are checked before the body is read.
// The body is then read as its bytes arrive, within a deadline, holding no
// slot; only a body read whole takes a slot of its lane (by its length) to
// verify and record.
//
// Whether the receiver exists is looked at only once the body is read, so
// that a delivery to a receiver that does not exist, to one whose stored
// secrets do not decrypt, and a forged one to a receiver that exists take
// the same way and get the same answer, at the same time (deliver): a
// prober cannot tell which receiver names exist. Reading the body of a
// delivery to a receiver that does not exist costs what any delivery's
// body costs, within the same caps and deadlines.
func (h *Handler) receive(w http.ResponseWriter, r *http.Request, receiver string) {
	if receiver != "" && !receiverName.MatchString(receiver) {
		// A name out of form is no receiver's: that tells nothing of
		// the names that exist.
		h.reject(w, r, http.StatusUnauthorized, "unknown_receiver")
		return
	}
	sig, err := webhook.Check(r.Header.Get("svc-signature"), h.opts.Now(), h.opts.Window)
	switch {
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
	arrived := h.opts.Now()
	markConn(r, phaseReading)
	body, taken, err := h.readBody(w, r)
	markConn(r, phaseBusy)
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			h.reject(w, r, http.StatusRequestEntityTooLarge, "body_too_large")
		case errors.Is(err, errBudget):
			h.reject(w, r, http.StatusServiceUnavailable, "body_budget")
		case connShed(r):
			h.reject(w, r, http.StatusServiceUnavailable, "connection_shed")
		case errors.Is(err, os.ErrDeadlineExceeded):
			h.reject(w, r, http.StatusRequestTimeout, "body_too_slow")
		default:
			h.reject(w, r, http.StatusBadRequest, "unreadable_body")
		}
		return
	}
	defer h.budget.give(taken)
	st, err := h.secrets.lookup(r.Context(), receiver, 0)
	if err != nil {
		h.storeFailed(w, r, "reading the webhook receivers failed", err, "receiver", store.ReceiverName(receiver))
		return
	}
	h.deliver(w, r, receiver, sig, body, st, arrived)
}

// deliver verifies a body read whole and records it, holding a slot of its
// lane while it does, but not while the delivery is held for a new secret.
func (h *Handler) deliver(w http.ResponseWriter, r *http.Request, receiver string, sig webhook.Header, body []byte, st receiverState, arrived time.Time) {
	slot := &laneSlot{h: h, slots: h.slots}
	if len(body) <= SmallBody {
		slot.slots = h.small
	}
	if !slot.take(r.Context()) {
		h.slotRefused(w, r)
		return
	}
	defer slot.release()
	endpointID, err := h.verify(r.Context(), slot, receiver, sig, body, st, arrived)
	if err != nil {
		h.refuseUnverified(w, r, receiver, err)
		return
	}
	h.record(w, r, receiver, endpointID, body)
}

// laneSlot is the slot of its lane a delivery holds while it is verified
// and recorded.
type laneSlot struct {
	h     *Handler
	slots chan struct{}
	held  bool
}

func (s *laneSlot) take(ctx context.Context) bool {
	s.held = s.h.acquire(ctx, s.slots)
	return s.held
}

func (s *laneSlot) release() {
	if s.held {
		<-s.slots
		s.held = false
	}
}

// errNoSlot is a delivery verified after a wait for a new secret that then
// found no slot of its lane.
var errNoSlot = errors.New("no slot after the wait for a new secret")

// verify matches the signature against the receiver's secrets and returns
// the endpoint whose secret verified it. A signature that matches none is
// held, without its slot, for a secret being stored (awaitNewSecret), then
// takes a slot again.
func (h *Handler) verify(ctx context.Context, slot *laneSlot, receiver string, sig webhook.Header, body []byte, st receiverState, arrived time.Time) (string, error) {
	idx, err := sig.Match(body, st.secrets)
	if err != nil {
		slot.release()
		st, idx, err = h.awaitNewSecret(ctx, receiver, sig, body, st, arrived)
		if err == nil && !slot.take(ctx) {
			return "", errNoSlot
		}
	}
	if err != nil {
		return "", err
	}
	return st.endpoints[idx], nil
}

// refuseUnverified answers a delivery that did not verify. A receiver that
// does not exist, one whose stored secrets do not decrypt and a forged
// signature are answered alike (publicReason).
func (h *Handler) refuseUnverified(w http.ResponseWriter, r *http.Request, receiver string, err error) {
	switch {
	case errors.Is(err, errNoSlot):
		h.slotRefused(w, r)
	case errors.Is(err, errUnknownReceiver):
		h.reject(w, r, http.StatusUnauthorized, "unknown_receiver")
	case errors.Is(err, errUnreadable):
		h.reject(w, r, http.StatusUnauthorized, "secret_unreadable")
	case errors.Is(err, errStoreDown):
		h.storeFailed(w, r, "reading the webhook receivers failed", err, "receiver", store.ReceiverName(receiver))
	default:
		h.reject(w, r, http.StatusUnauthorized, "invalid_signature")
	}
}

// record parses a verified body and records it in the inbox: 200 for a new
// event, 204 for one recorded before; a body that is not an envelope is
// kept as malformed (recordMalformed).
func (h *Handler) record(w http.ResponseWriter, r *http.Request, receiver, endpointID string, body []byte) {
	// Only now, the signature verified, is the body parsed.
	env, err := webhook.DecodeEnvelope(body)
	if err != nil {
		h.recordMalformed(w, r, receiver, endpointID, body, err)
		return
	}
	// A refusal from here on (the store failed) is of a verified event.
	r = withVerified(r, env.ID, string(env.Type))
	h.noteHeaderMismatch(r, env)
	if err := h.noteVerified(r.Context(), endpointID, env.ID); err != nil {
		h.storeFailed(w, r, "recording a verified delivery failed", err, "event_id", clipLog(env.ID), "endpoint_id", endpointID)
		return
	}
	lane := relay.LaneFor(string(env.Type))
	fresh, err := h.opts.Inbox.RecordEvent(r.Context(), store.InboxEvent{
		EventID: env.ID, EventType: string(env.Type), Lane: lane, Receiver: receiver, EndpointID: endpointID,
		ReceivedAt: h.opts.Now(), Body: body, TraceContext: traceparent(r),
	})
	if err != nil {
		h.storeFailed(w, r, "recording a webhook event failed", err, "event_id", clipLog(env.ID))
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

// noteHeaderMismatch counts and logs (at the rejections' rate) a verified
// delivery whose svc-event-id or svc-event-type header differs from its
// body. The headers are not signed and the body is: the delivery is
// recorded under the body's id and type, and answered as any other, since
// refusing it would only make the sender try again with the same headers
// until it dropped the event.
func (h *Handler) noteHeaderMismatch(r *http.Request, env webhook.Envelope) {
	var differ []string
	if hid := r.Header.Get("svc-event-id"); hid != env.ID {
		differ = append(differ, "svc-event-id")
	}
	if htyp := r.Header.Get("svc-event-type"); htyp != string(env.Type) {
		differ = append(differ, "svc-event-type")
	}
	for _, header := range differ {
		h.opts.Metrics.headerMismatch(r.Context(), header)
	}
	if len(differ) == 0 {
		return
	}
	if ok, dropped := h.logs.allow(); ok {
		args := []any{"headers", strings.Join(differ, ","), "event_id", clipLog(env.ID), "event_type", clipLog(string(env.Type)),
			"header_event_id", clipLog(r.Header.Get("svc-event-id")), "header_event_type", clipLog(r.Header.Get("svc-event-type")), "path", clipLog(r.URL.Path)}
		if dropped > 0 {
			args = append(args, "rejections_not_logged", dropped)
		}
		h.opts.Logger.Warn("webhook headers differ from the signed body; recorded under the body's id and type", args...)
	} else {
		h.opts.Metrics.logSuppressed(r.Context())
	}
}

// slotRefused answers a delivery that got no slot: 503 busy, or
// connection_shed when the wait ended because the connection cap closed
// its connection.
func (h *Handler) slotRefused(w http.ResponseWriter, r *http.Request) {
	reason := "busy"
	if connShed(r) {
		reason = "connection_shed"
	}
	h.reject(w, r, http.StatusServiceUnavailable, reason)
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
	// A refusal from here on (the store failed) is of a verified body,
	// under the id it would be recorded with; its type is unsigned.
	r = withVerified(r, id, "")
	if err := h.noteVerified(r.Context(), endpointID, id); err != nil {
		h.storeFailed(w, r, "recording a verified delivery failed", err, "event_id", id, "endpoint_id", endpointID)
		return
	}
	fresh, err := h.opts.Inbox.RecordHandled(r.Context(), store.InboxEvent{
		EventID: id, EventType: typ, Lane: relay.LaneFor(typ), Receiver: receiver, EndpointID: endpointID,
		ReceivedAt: h.opts.Now(), Body: body, TraceContext: traceparent(r),
	}, store.OutcomeMalformed, reason)
	if err != nil {
		h.storeFailed(w, r, "recording a malformed webhook body failed", err, "event_id", id)
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

var (
	errStoreDown       = errors.New("store_unavailable")
	errUnknownReceiver = errors.New("unknown receiver")
)

// holdPoll is how often a held delivery looks again.
const holdPoll = 50 * time.Millisecond

// awaitNewSecret handles a delivery that no secret of the list verifies.
// The list may predate a secret stored a moment ago, or an endpoint
// creation just begun, so the delivery waits for a read of the list that
// started after it arrived (shared with every other such delivery; at most
// one per Recheck) and is verified again.
//
// Then it handles the moment of a secret rotation between the service
// creating an endpoint and siteops storing its one-time secret: a delivery
// signed with the new secret cannot verify yet (its header and timestamp
// were checked before the body was read). While an endpoint creation for
// the receiver is in flight, the delivery is held (at most MaxHeld at a
// time, for at most PendingWait) and verified again the moment a secret is
// stored, or refused when the creation ends. Otherwise it is refused:
// errUnreadable when some of the receiver's stored secrets do not decrypt
// (it may be signed with one of them: the sender retries, and succeeds
// once the secret is fixed), errUnknownReceiver for a receiver without
// secrets, else webhook.ErrNoValidSignature.
//
// Held deliveries cost the store one read of the whole list every half
// poll interval at most, however many are held, for however many
// receivers.
func (h *Handler) awaitNewSecret(ctx context.Context, receiver string, sig webhook.Header, body []byte, st receiverState, arrived time.Time) (receiverState, int, error) {
	seen := st.read
	try := func(s receiverState, err error) (receiverState, int, error, bool) {
		if err != nil {
			return s, -1, fmt.Errorf("%w: %w", errStoreDown, err), true
		}
		if s.read.After(seen) {
			seen = s.read
			if idx, err := sig.Match(body, s.secrets); err == nil {
				h.opts.Logger.Info("delivery verified with a newly stored secret", "receiver", store.ReceiverName(receiver), "endpoint_id", s.endpoints[idx])
				return s, idx, nil, true
			}
		}
		st = s
		if !s.exp.Pending {
			return s, -1, refusal(s), true
		}
		return s, -1, nil, false
	}
	if s, idx, err, done := try(h.secrets.lookupSince(ctx, receiver, arrived)); done {
		return s, idx, err
	}
	select {
	case h.held <- struct{}{}:
		defer func() { <-h.held }()
	default:
		h.opts.Metrics.hold(ctx, "refused_full")
		return st, -1, refusal(st)
	}
	h.opts.Metrics.hold(ctx, "held")
	deadline := time.NewTimer(h.opts.PendingWait)
	defer deadline.Stop()
	tick := time.NewTicker(holdPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return st, -1, refusal(st)
		case <-deadline.C:
			return st, -1, refusal(st)
		case <-tick.C:
		}
		// Half the poll interval: every tick of a held delivery reads
		// afresh, once for all held deliveries.
		if s, idx, err, done := try(h.secrets.lookup(ctx, receiver, holdPoll/2)); done {
			return s, idx, err
		}
	}
}

// refusal is why a delivery that no secret of st verifies is refused.
func refusal(st receiverState) error {
	switch {
	case st.unreadable > 0:
		return errUnreadable
	case len(st.secrets) == 0:
		return errUnknownReceiver
	}
	return webhook.ErrNoValidSignature
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
	status, code := "ready", http.StatusOK
	if err := h.opts.Inbox.Ping(ctx); err != nil {
		status, code = "store_unavailable", http.StatusServiceUnavailable
	}
	if h.opts.Checks == nil {
		answer(w, code, status)
		return
	}
	degraded, checks := h.opts.Checks()
	if degraded && code == http.StatusOK {
		status = "degraded"
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "checks": checks})
}

// watchReceivers reads the list of receivers every SecretRefresh until ctx
// is done. A failed read is retried at the next period; requests meanwhile
// read the list themselves, and answer 503 while the store fails.
func (h *Handler) watchReceivers(ctx context.Context) {
	if h.opts.Secrets == nil {
		return
	}
	t := time.NewTicker(h.opts.SecretRefresh)
	defer t.Stop()
	for {
		_ = h.secrets.readNow(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
