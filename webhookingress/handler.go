package webhookingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/store"
)

// DefaultMaxBody caps a delivery's body.
const DefaultMaxBody = 1 << 20

// Inbox records verified events.
type Inbox interface {
	RecordEvent(ctx context.Context, ev store.InboxEvent) (bool, error)
	MarkEndpointVerified(ctx context.Context, endpointID, eventID string) (bool, error)
	ReceiverPending(ctx context.Context, receiver string) (bool, error)
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
	// SecretRefresh is how long stored secrets are cached (2 s).
	SecretRefresh time.Duration
	Now           func() time.Time
	Logger        *slog.Logger
	Metrics       *Metrics
	// Registry serves GET /metrics (prometheus.DefaultGatherer otherwise).
	Registry prometheus.Gatherer
	// Recorded, when set, is told of every new event (the relay's wake-up).
	Recorded func()
	// PendingWait is how long a delivery that does not verify is held
	// while its receiver expects a new secret (5 s, half the sender's
	// timeout).
	PendingWait time.Duration
}

// Handler serves the ingress routes.
type Handler struct {
	opts    Options
	secrets *secretSource
	mux     *http.ServeMux

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
	if o.SecretRefresh == 0 {
		o.SecretRefresh = 2 * time.Second
	}
	if o.PendingWait == 0 {
		o.PendingWait = 5 * time.Second
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
		o.Registry = prometheus.DefaultGatherer
	}
	h := &Handler{
		opts:     o,
		secrets:  &secretSource{env: o.EnvSecrets, store: o.Secrets, refresh: o.SecretRefresh, now: o.Now, cache: map[string]secretSet{}},
		mux:      http.NewServeMux(),
		verified: map[string]bool{EnvEndpoint: true},
	}
	h.mux.HandleFunc("POST /webhooks", func(w http.ResponseWriter, r *http.Request) { h.receive(w, r, "") })
	h.mux.HandleFunc("POST /webhooks/{receiver}", func(w http.ResponseWriter, r *http.Request) {
		h.receive(w, r, r.PathValue("receiver"))
	})
	h.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { answer(w, http.StatusOK, "ok") })
	h.mux.HandleFunc("GET /readyz", h.ready)
	h.mux.Handle("GET /metrics", promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{}))
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

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

func (h *Handler) reject(w http.ResponseWriter, r *http.Request, status int, reason string) {
	h.opts.Metrics.Deliveries.WithLabelValues("rejected", reason).Inc()
	h.opts.Logger.Warn("webhook delivery rejected", "reason", reason, "status", status,
		"event_id", r.Header.Get("svc-event-id"), "event_type", r.Header.Get("svc-event-type"), "path", r.URL.Path)
	answer(w, status, reason)
}

func (h *Handler) receive(w http.ResponseWriter, r *http.Request, receiver string) {
	if receiver != "" && !receiverName.MatchString(receiver) {
		h.reject(w, r, http.StatusNotFound, "unknown receiver")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			h.reject(w, r, http.StatusRequestEntityTooLarge, "body too large")
			return
		}
		h.reject(w, r, http.StatusBadRequest, "unreadable body")
		return
	}
	set, env, idx, err := h.verify(r.Context(), receiver, body, r.Header.Get("svc-signature"))
	if errors.Is(err, errUnknownReceiver) || errors.Is(err, webhook.ErrNoValidSignature) {
		set, env, idx, err = h.awaitNewSecret(r.Context(), receiver, body, r.Header.Get("svc-signature"), err)
	}
	switch {
	case errors.Is(err, errUnknownReceiver):
		h.reject(w, r, http.StatusNotFound, "unknown receiver")
		return
	case errors.Is(err, errStoreDown):
		h.opts.Logger.Error("secret lookup failed", "receiver", receiver, "error", err)
		h.reject(w, r, http.StatusServiceUnavailable, "store unavailable")
		return
	case errors.Is(err, webhook.ErrMalformedHeader):
		h.reject(w, r, http.StatusBadRequest, "malformed signature header")
		return
	case errors.Is(err, webhook.ErrTimestampOutsideWindow):
		h.reject(w, r, http.StatusUnauthorized, "timestamp outside window")
		return
	case errors.Is(err, webhook.ErrNoValidSignature):
		h.reject(w, r, http.StatusUnauthorized, "invalid signature")
		return
	case err != nil:
		h.reject(w, r, http.StatusBadRequest, "malformed body")
		return
	}
	if env.ID != r.Header.Get("svc-event-id") {
		h.reject(w, r, http.StatusBadRequest, "event id mismatch")
		return
	}
	if string(env.Type) != r.Header.Get("svc-event-type") {
		h.reject(w, r, http.StatusBadRequest, "event type mismatch")
		return
	}
	endpointID := set.endpoints[idx]
	if err := h.noteVerified(r.Context(), endpointID, env.ID); err != nil {
		h.opts.Logger.Error("recording a verified delivery failed", "event_id", env.ID, "endpoint_id", endpointID, "error", err)
		h.reject(w, r, http.StatusServiceUnavailable, "store unavailable")
		return
	}
	fresh, err := h.opts.Inbox.RecordEvent(r.Context(), store.InboxEvent{
		EventID: env.ID, EventType: string(env.Type), Receiver: receiver, EndpointID: endpointID,
		ReceivedAt: h.opts.Now(), Body: body, TraceContext: traceparent(r),
	})
	if err != nil {
		h.opts.Logger.Error("recording a webhook event failed", "event_id", env.ID, "error", err)
		h.reject(w, r, http.StatusServiceUnavailable, "store unavailable")
		return
	}
	if !fresh {
		h.opts.Metrics.Deliveries.WithLabelValues("duplicate", "").Inc()
		h.opts.Logger.Info("duplicate webhook delivery", "event_id", env.ID, "event_type", env.Type)
		answer(w, http.StatusNoContent, "")
		return
	}
	h.opts.Metrics.Deliveries.WithLabelValues("accepted", "").Inc()
	h.opts.Logger.Info("webhook event recorded", "event_id", env.ID, "event_type", env.Type, "receiver", receiver, "endpoint_id", endpointID)
	if h.opts.Recorded != nil {
		h.opts.Recorded()
	}
	answer(w, http.StatusOK, "accepted")
}

var errStoreDown = errors.New("store unavailable")

// verify looks up the receiver's secrets and verifies the delivery.
func (h *Handler) verify(ctx context.Context, receiver string, body []byte, header string) (secretSet, webhook.Envelope, int, error) {
	set, err := h.secrets.lookup(ctx, receiver)
	if errors.Is(err, errUnknownReceiver) {
		return set, webhook.Envelope{}, -1, err
	}
	if err != nil {
		return set, webhook.Envelope{}, -1, fmt.Errorf("%w: %w", errStoreDown, err)
	}
	env, idx, err := webhook.VerifyEnvelope(body, header, set.secrets, h.opts.Now(), h.opts.Window)
	return set, env, idx, err
}

// awaitNewSecret handles the moment of a secret rotation between the
// service creating an endpoint and siteops storing its one-time secret: a
// delivery signed with the new secret cannot verify yet. When the receiver
// expects a new secret, the delivery is held and re-verified against fresh
// secrets for up to PendingWait; otherwise, or if it still fails, the first
// error stands.
func (h *Handler) awaitNewSecret(ctx context.Context, receiver string, body []byte, header string, first error) (secretSet, webhook.Envelope, int, error) {
	pending, err := h.opts.Inbox.ReceiverPending(ctx, receiver)
	if err != nil || !pending {
		return secretSet{}, webhook.Envelope{}, -1, first
	}
	deadline := time.NewTimer(h.opts.PendingWait)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return secretSet{}, webhook.Envelope{}, -1, first
		case <-deadline.C:
			return secretSet{}, webhook.Envelope{}, -1, first
		case <-tick.C:
		}
		h.secrets.forget(receiver)
		set, env, idx, err := h.verify(ctx, receiver, body, header)
		if err == nil {
			h.opts.Logger.Info("held delivery verified with a newly stored secret", "receiver", receiver, "event_id", env.ID)
			return set, env, idx, nil
		}
		if !errors.Is(err, errUnknownReceiver) && !errors.Is(err, webhook.ErrNoValidSignature) {
			return set, env, idx, err
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
	first, err := h.opts.Inbox.MarkEndpointVerified(ctx, endpointID, eventID)
	if err != nil {
		return err
	}
	h.verifiedMu.Lock()
	h.verified[endpointID] = true
	h.verifiedMu.Unlock()
	if first {
		h.opts.Logger.Info("first verified delivery on endpoint", "endpoint_id", endpointID, "event_id", eventID)
		if h.opts.Recorded != nil {
			h.opts.Recorded()
		}
	}
	return nil
}

func (h *Handler) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := h.opts.Inbox.Ping(ctx); err != nil {
		answer(w, http.StatusServiceUnavailable, "store unavailable")
		return
	}
	answer(w, http.StatusOK, "ready")
}
