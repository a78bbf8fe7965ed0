package simulator

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Faults are injected failures. Rates are probabilities from 0 to 1 drawn
// per request or per delivery from the seeded source.
type Faults struct {
	// ErrorRate answers 500 or 503 (half each) before anything is applied.
	ErrorRate float64 `json:"error_rate"`
	// RateLimitRate answers 429 with Retry-After before anything is applied.
	RateLimitRate float64 `json:"rate_limit_rate"`
	// RetryAfter is the Retry-After of 429 and 503 answers (default 1 s).
	RetryAfter Duration `json:"retry_after"`
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
}

// Duration is a time.Duration that reads and writes JSON as "1.5s".
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(time.Duration(d).String())), nil
}

// UnmarshalJSON implements json.Unmarshaler for "1.5s" or a number of
// nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if s, err := strconv.Unquote(string(b)); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("duration %s: use a string such as \"1.5s\"", b)
	}
	*d = Duration(n)
	return nil
}

func (f Faults) validate() error {
	for name, r := range map[string]float64{"error_rate": f.ErrorRate, "rate_limit_rate": f.RateLimitRate, "drop_rate": f.DropRate, "duplicate_rate": f.DuplicateRate, "delay_rate": f.DelayRate} {
		if r < 0 || r > 1 {
			return fmt.Errorf("simulator: fault %s = %g; a rate is from 0 to 1", name, r)
		}
	}
	if f.RetryAfter < 0 || f.Latency < 0 || f.ReorderWindow < 0 || f.Delay < 0 {
		return errors.New("simulator: fault durations must not be negative")
	}
	return nil
}

const (
	faultError     = "error"
	faultRateLimit = "rate_limit"
	faultDrop      = "drop_after_apply"
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
