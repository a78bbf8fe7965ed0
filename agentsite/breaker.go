package agentsite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
)

// BreakerSettings tunes the circuit breaker around every round trip.
// Failures are 5xx answers, timeouts and network errors; 4xx answers and
// cancelled contexts are not counted either way.
type BreakerSettings struct {
	// ConsecutiveFailures opens the breaker (default 5).
	ConsecutiveFailures uint32
	// OpenFor is how long the breaker stays open before letting trial
	// requests through (default 30 s).
	OpenFor time.Duration
	// HalfOpenRequests is how many trial requests may be in flight while
	// half-open (default 1); that many successes close the breaker.
	HalfOpenRequests uint32
}

// DefaultBreakerSettings are used unless WithBreaker says otherwise.
func DefaultBreakerSettings() BreakerSettings {
	return BreakerSettings{ConsecutiveFailures: 5, OpenFor: 30 * time.Second, HalfOpenRequests: 1}
}

func (s BreakerSettings) validate() error {
	if s.ConsecutiveFailures == 0 || s.OpenFor <= 0 || s.HalfOpenRequests == 0 {
		return fmt.Errorf("agentsite: WithBreaker: every setting must be positive, got %+v", s)
	}
	return nil
}

// BreakerState is the state of the client's circuit breaker.
type BreakerState = gobreaker.State

// breaker wraps gobreaker and remembers when it opened, which gobreaker does
// not expose, to tell callers when to come back.
type breaker struct {
	cb      *gobreaker.CircuitBreaker[result]
	openFor time.Duration
	now     func() time.Time

	mu       sync.Mutex
	openedAt time.Time
}

func newBreaker(s BreakerSettings, now func() time.Time) *breaker {
	b := &breaker{openFor: s.OpenFor, now: now}
	b.cb = gobreaker.NewCircuitBreaker[result](gobreaker.Settings{
		Name:        "agentsite",
		MaxRequests: s.HalfOpenRequests,
		Timeout:     s.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= s.ConsecutiveFailures },
		IsExcluded:  excludedFromBreaker,
		OnStateChange: func(_ string, _, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				b.mu.Lock()
				b.openedAt = b.now()
				b.mu.Unlock()
			}
		},
	})
	return b
}

// excludedFromBreaker keeps answers that say nothing about the server's
// health out of the counts: any answer below 500 and a caller's cancellation.
func excludedFromBreaker(err error) bool {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.Status < 500
	}
	return errors.Is(err, context.Canceled)
}

func (b *breaker) execute(fn func() (result, error)) (result, error) {
	res, err := b.cb.Execute(fn)
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		b.mu.Lock()
		retryAt := b.openedAt.Add(b.openFor)
		b.mu.Unlock()
		now := b.now()
		if errors.Is(err, gobreaker.ErrTooManyRequests) || retryAt.Before(now) {
			// Half-open with its trial requests taken: come back shortly.
			retryAt = now.Add(time.Second)
		}
		return res, &BreakerOpenError{RetryAt: retryAt, RetryAfter: retryAt.Sub(now)}
	}
	return res, err
}

// BreakerState reports the breaker's current state.
func (c *Client) BreakerState() BreakerState { return c.breaker.cb.State() }
