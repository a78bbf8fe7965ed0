package simulator

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

const maxBody = 4 << 20

// response is what an API handler decides; the middleware writes it, and
// stores it for idempotent replay.
type response struct {
	status   int
	body     []byte
	location string
}

type handlerFunc func(r *http.Request, body []byte) response

func ok(status int, v any) response {
	b, err := json.Marshal(v)
	if err != nil {
		return fail(http.StatusInternalServerError, "internal", err.Error(), "")
	}
	return response{status: status, body: b}
}

func fail(status int, code, message, field string) response {
	b, _ := json.Marshal(errorBody(code, message, field))
	return response{status: status, body: b}
}

func errorBody(code, message, field string) map[string]any {
	return map[string]any{"error": map[string]string{"code": code, "message": message, "field": field}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, message, field string) {
	writeJSON(w, status, errorBody(code, message, field))
}

func (resp response) write(w http.ResponseWriter) {
	if resp.location != "" {
		w.Header().Set("Location", resp.location)
	}
	if len(resp.body) > 0 {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(resp.status)
	_, _ = w.Write(resp.body)
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

func (s *Simulator) withRequestID(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", newRequestID())
		h(w, r)
	})
}

// RequestRecord is one API request as the simulator saw it, for tests and
// the /_sim/requests route. It holds no key or body.
type RequestRecord struct {
	At             time.Time `json:"at"`
	Method         string    `json:"method"`
	Path           string    `json:"path"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	Status         int       `json:"status"`
	Replayed       bool      `json:"replayed,omitempty"`
	Fault          string    `json:"fault,omitempty"`
	// KeyID is the fingerprint of a known bearer key (see KeyID), never
	// the key; empty when the key was missing or unknown.
	KeyID string `json:"key_id,omitempty"`
	// RetryAfter is the answer's Retry-After header, if any.
	RetryAfter string `json:"retry_after,omitempty"`
}

// InFlight returns how many API requests are being processed right now.
func (s *Simulator) InFlight() int { return int(s.inFlight.Load()) }

// Requests returns every API request answered so far, oldest first.
func (s *Simulator) Requests() []RequestRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RequestRecord(nil), s.requests...)
}

func (s *Simulator) record(rec RequestRecord) {
	s.mu.Lock()
	s.requests = appendCapped(s.requests, rec)
	s.stats.add(rec)
	s.mu.Unlock()
}

// api wraps an API handler with everything every route shares: request id,
// bearer key and scope, body cap, injected faults, idempotency, and the
// ambiguous dropped connection.
func (s *Simulator) api(scope string, mutating bool, h handlerFunc) http.Handler {
	return s.withRequestID(func(w http.ResponseWriter, r *http.Request) {
		rec := RequestRecord{At: s.now(), Method: r.Method, Path: r.URL.Path, IdempotencyKey: r.Header.Get("Idempotency-Key")}
		s.inFlight.Add(1)
		resp := s.serveAPI(w, r, scope, mutating, h, &rec)
		s.inFlight.Add(-1)
		rec.Status = resp.status
		rec.RetryAfter = w.Header().Get("Retry-After")
		s.record(rec)
		if rec.Fault == faultDrop {
			dropConnection(w)
			return
		}
		resp.write(w)
	})
}

func (s *Simulator) serveAPI(w http.ResponseWriter, r *http.Request, scope string, mutating bool, h handlerFunc, rec *RequestRecord) response {
	token, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found || token == "" {
		return fail(http.StatusUnauthorized, "missing_api_key", "send Authorization: Bearer <API_KEY>", "")
	}
	scopes, known := s.cfg.Keys[token]
	if !known {
		return fail(http.StatusUnauthorized, "invalid_api_key", "the API key is not valid", "")
	}
	rec.KeyID = KeyID(token)
	if resp, limited := s.throttleKey(w, token); limited {
		rec.Fault = faultFixedRate
		return resp
	}
	if !hasScope(scopes, scope) {
		return fail(http.StatusForbidden, "insufficient_scope", "this API key lacks the scope "+scope, "")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fail(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("request bodies are limited to %d bytes", maxBody), "")
		}
		return fail(http.StatusBadRequest, "unreadable_body", "the request body could not be read", "")
	}

	if resp, fault := s.injectBefore(w); fault != "" {
		rec.Fault = fault
		return resp
	}

	if !mutating {
		s.injectLatency(r)
		return h(r, body)
	}

	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return fail(http.StatusBadRequest, "idempotency_key_missing", "mutating requests need an Idempotency-Key header", "")
	}
	ik := idemKey{apiKey: token, key: key}
	fp := fingerprint(r.Method, r.URL.Path, body)
	stored, claimed := s.claim(ik, fp)
	switch {
	case stored != nil && stored.fingerprint != fp:
		return fail(http.StatusUnprocessableEntity, "idempotency_key_reused", "this Idempotency-Key was used for a different request; use a new key for a new operation", "")
	case stored != nil && stored.inFlight:
		w.Header().Set("Retry-After", "1")
		return fail(http.StatusConflict, "idempotency_in_flight", "a request with this Idempotency-Key is still being processed; retry shortly", "")
	case stored != nil:
		w.Header().Set("Idempotent-Replayed", "true")
		rec.Replayed = true
		return stored.resp
	case !claimed:
		return fail(http.StatusInternalServerError, "internal", "idempotency claim failed", "")
	}

	s.injectLatency(r)
	resp := h(r, body)
	s.settle(ik, resp)
	if s.dropAfterApply() {
		rec.Fault = faultDrop
	}
	return resp
}

func hasScope(scopes []string, want string) bool {
	for _, s := range scopes {
		if s == want || s == ScopeAll {
			return true
		}
	}
	return false
}

// fingerprint identifies a request for idempotency: method, path and the
// body with insignificant whitespace removed.
func fingerprint(method, path string, body []byte) [32]byte {
	var compact bytes.Buffer
	if json.Compact(&compact, body) != nil {
		compact.Reset()
		compact.Write(body)
	}
	h := sha256.New()
	h.Write([]byte(method + " " + path + "\n"))
	h.Write(compact.Bytes())
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// admin guards a control route with the admin token.
func (s *Simulator) admin(h http.HandlerFunc) http.Handler {
	return s.withRequestID(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.AdminToken == "" {
			writeError(w, http.StatusNotFound, "not_found", "control routes are disabled; start the simulator with an admin token", "")
			return
		}
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.AdminToken)) != 1 {
			writeError(w, http.StatusUnauthorized, "invalid_admin_token", "control routes need Authorization: Bearer <admin token>", "")
			return
		}
		h(w, r)
	})
}

// decodeStrict decodes a JSON object and refuses unknown fields, so that a
// client's typo is caught here rather than silently ignored. It refuses a
// body that is not UTF-8 (RFC 8259 §8.1) rather than let the decoder put
// U+FFFD in place of the bad bytes and so change what the client sent.
func decodeStrict(body []byte, v any) *response {
	if !utf8.Valid(body) {
		r := fail(http.StatusBadRequest, "invalid_json", "the body is not valid UTF-8", "")
		return &r
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		r := fail(http.StatusBadRequest, "invalid_json", "the body is not the expected JSON object: "+err.Error(), jsonField(err))
		return &r
	}
	if dec.More() {
		r := fail(http.StatusBadRequest, "invalid_json", "the body holds more than one JSON value", "")
		return &r
	}
	return nil
}

func jsonField(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field
	}
	if _, after, ok := strings.Cut(err.Error(), "unknown field "); ok {
		if f, err := strconv.Unquote(after); err == nil {
			return f
		}
	}
	return ""
}
