package simulator

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/siteops/siteops/duration"
)

// Faults are injected failures. Rates are probabilities from 0 to 1 drawn
// per request or per delivery from the seeded source.
type Faults struct {
	// ErrorRate answers 500 or 503 (half each) before anything is applied.
	ErrorRate float64 `json:"error_rate"`
	// RateLimitRate answers 429 with Retry-After before anything is applied.
	RateLimitRate float64 `json:"rate_limit_rate"`
	// RetryAfter is the Retry-After of injected 429 and 503 answers
	// (default 1 s).
	RetryAfter Duration `json:"retry_after"`
	// RateLimitRPS throttles each API key at a fixed rate, as the real
	// service does: a token bucket per key of this many requests per second
	// (0 = no limit). A request beyond it is answered 429 with Retry-After
	// = the time until the key's next token in whole seconds, rounded up
	// and at least 1, before anything is applied. Every request with a
	// known key that is let through spends a token, whatever its answer;
	// a 429 spends none.
	RateLimitRPS float64 `json:"rate_limit_rps"`
	// RateLimitBurst is the size of each key's bucket (0 means 1).
	RateLimitBurst int `json:"rate_limit_burst"`
	// Latency is added to every API request (not scaled).
	Latency Duration `json:"latency"`
	// DropRate applies a mutation, stores its answer under the idempotency
	// key, then drops the connection without answering: the ambiguous case.
	DropRate float64 `json:"drop_rate"`
	// DuplicateRate delivers an event a second time.
	DuplicateRate float64 `json:"duplicate_rate"`
	// ReorderWindow holds each first delivery attempt for a random time up
	// to this (scaled), so that events arrive out of order.
	ReorderWindow Duration `json:"reorder_window"`
	// DelayRate holds a first delivery attempt for Delay (scaled).
	DelayRate float64  `json:"delay_rate"`
	Delay     Duration `json:"delay"`
	// BrokenAnswerRate answers 200 {"data":{}} before anything is applied:
	// a 2xx that breaks the contract for every route that promises a body
	// (no data.id, no whsec_ secret, no array of leads or endpoints).
	BrokenAnswerRate float64 `json:"broken_answer_rate,omitempty"`
}

// Duration is a duration in the simulator's JSON (faults, config): "1.5s",
// or a bare number of seconds, as everywhere in siteops (package duration).
type Duration = duration.Duration

func (f Faults) validate() error {
	for name, r := range map[string]float64{"error_rate": f.ErrorRate, "rate_limit_rate": f.RateLimitRate, "drop_rate": f.DropRate, "duplicate_rate": f.DuplicateRate, "delay_rate": f.DelayRate, "broken_answer_rate": f.BrokenAnswerRate} {
		if r < 0 || r > 1 {
			return fmt.Errorf("simulator: fault %s = %g; a rate is from 0 to 1", name, r)
		}
	}
	if math.IsNaN(f.RateLimitRPS) || math.IsInf(f.RateLimitRPS, 0) || f.RateLimitRPS < 0 {
		return fmt.Errorf("simulator: fault rate_limit_rps = %g; give requests per second per key, 0 for no limit", f.RateLimitRPS)
	}
	if f.RateLimitBurst < 0 || f.RateLimitBurst > 10_000 {
		return fmt.Errorf("simulator: fault rate_limit_burst = %d; give 1 to 10000, or 0 for 1", f.RateLimitBurst)
	}
	if f.RetryAfter < 0 || f.Latency < 0 || f.ReorderWindow < 0 || f.Delay < 0 {
		return errors.New("simulator: fault durations must not be negative")
	}
	return nil
}

const (
	faultError     = "error"
	faultRateLimit = "rate_limit"
	faultFixedRate = "fixed_rate_limit"
	faultDrop      = "drop_after_apply"
	faultBroken    = "broken_answer"
)

// SetFaults replaces the faults in force.
func (s *Simulator) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	s.faults = f
	s.mu.Unlock()
	return nil
}

// Faults returns the faults in force.
func (s *Simulator) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

func (f Faults) retryAfterSeconds() string {
	secs := int(time.Duration(f.RetryAfter).Round(time.Second) / time.Second)
	if f.RetryAfter == 0 {
		secs = 1
	}
	return strconv.Itoa(max(secs, 1))
}

// injectBefore draws the faults that answer before a request is applied.
func (s *Simulator) injectBefore(w http.ResponseWriter) (response, string) {
	f := s.Faults()
	if s.chance(f.RateLimitRate) {
		w.Header().Set("Retry-After", f.retryAfterSeconds())
		return fail(http.StatusTooManyRequests, "rate_limited", "too many requests; wait for Retry-After", ""), faultRateLimit
	}
	if s.chance(f.ErrorRate) {
		if s.chance(0.5) {
			w.Header().Set("Retry-After", f.retryAfterSeconds())
			return fail(http.StatusServiceUnavailable, "unavailable", "the service is briefly unavailable", ""), faultError
		}
		return fail(http.StatusInternalServerError, "internal", "an internal error occurred", ""), faultError
	}
	if s.chance(f.BrokenAnswerRate) {
		return response{status: http.StatusOK, body: []byte(`{"data":{}}`)}, faultBroken
	}
	return response{}, ""
}

func (s *Simulator) injectLatency(r *http.Request) {
	f := s.Faults()
	if f.Latency <= 0 {
		return
	}
	t := time.NewTimer(time.Duration(f.Latency))
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

func (s *Simulator) dropAfterApply() bool { return s.chance(s.Faults().DropRate) }

// dropConnection closes the client's connection without an answer.
func dropConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}
