package agentsite

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/siteops/siteops/internal/siteopstest"
)

// switchable answers with the status held in code.
func switchable(code *atomic.Int32) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		answer(int(code.Load()), `{"error":{"code":"x"}}`)(w, r)
	}
}

// waitForState waits until c's breaker is in state want, failing the test
// with the state it was in when that does not come within 5 s.
func waitForState(t *testing.T, c *Client, want gobreaker.State) {
	t.Helper()
	siteopstest.EventuallyNil(t, 5*time.Second, "the breaker to be "+want.String(), func() error {
		if got := c.BreakerState(); got != want {
			return fmt.Errorf("breaker state = %s, want %s", got, want)
		}
		return nil
	})
}

func TestBreakerOpensHalfOpensAndCloses(t *testing.T) {
	var code atomic.Int32
	code.Store(500)
	srv := newAPIServer(t, switchable(&code))
	const openFor = 150 * time.Millisecond
	c := newTestClient(t, srv.URL, WithBreaker(BreakerSettings{ConsecutiveFailures: 3, OpenFor: openFor, HalfOpenRequests: 1}))
	ctx := t.Context()

	for i := range 3 {
		_, err := c.ListWebhookEndpoints(ctx)
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Status != 500 {
			t.Fatalf("call %d: error = %v, want a 500 APIError", i, err)
		}
	}
	if c.BreakerState() != gobreaker.StateOpen {
		t.Fatalf("after 3 failures state = %s, want open", c.BreakerState())
	}

	// Open: nothing is sent, and the error says when to come back.
	sent := len(srv.requests())
	_, err := c.Publish(ctx, "k", "site_1", true)
	var open *BreakerOpenError
	if !errors.As(err, &open) || !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("while open: error = %v, want *BreakerOpenError", err)
	}
	if open.RetryAfter <= 0 || open.RetryAfter > openFor {
		t.Errorf("RetryAfter = %s, want within (0, %s]", open.RetryAfter, openFor)
	}
	if len(srv.requests()) != sent {
		t.Errorf("a request was sent while the breaker was open")
	}

	// Half-open, and the trial fails: open again.
	waitForState(t, c, gobreaker.StateHalfOpen)
	if _, err := c.ListWebhookEndpoints(ctx); err == nil || errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("half-open trial: error = %v, want the server's 500", err)
	}
	if c.BreakerState() != gobreaker.StateOpen {
		t.Fatalf("after a failed trial state = %s, want open", c.BreakerState())
	}

	// Half-open, and the trial succeeds: closed.
	code.Store(200)
	waitForState(t, c, gobreaker.StateHalfOpen)
	if _, err := c.ListWebhookEndpoints(ctx); err != nil {
		t.Fatalf("half-open trial: %v", err)
	}
	if c.BreakerState() != gobreaker.StateClosed {
		t.Fatalf("after a good trial state = %s, want closed", c.BreakerState())
	}
}

func TestBreakerIgnoresClientErrorsAndCancellation(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 409, 422, 429} {
		var code atomic.Int32
		code.Store(int32(status))
		srv := newAPIServer(t, switchable(&code))
		c := newTestClient(t, srv.URL, WithBreaker(BreakerSettings{ConsecutiveFailures: 2, OpenFor: time.Minute, HalfOpenRequests: 1}))
		for range 5 {
			_, _ = c.ListWebhookEndpoints(t.Context())
		}
		if c.BreakerState() != gobreaker.StateClosed {
			t.Errorf("after five %d answers state = %s, want closed", status, c.BreakerState())
		}
	}

	srv := newHangingServer(t)
	c := newTestClient(t, srv.URL, WithBreaker(BreakerSettings{ConsecutiveFailures: 2, OpenFor: time.Minute, HalfOpenRequests: 1}))
	for range 4 {
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			for len(srv.requests()) == 0 {
				time.Sleep(time.Millisecond)
			}
			cancel()
		}()
		if _, err := c.ListWebhookEndpoints(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("error = %v, want context.Canceled", err)
		}
		cancel()
	}
	if c.BreakerState() != gobreaker.StateClosed {
		t.Errorf("after cancelled calls state = %s, want closed", c.BreakerState())
	}
}

func TestBreakerCountsNetworkErrorsAndTimeouts(t *testing.T) {
	t.Run("refused connection", func(t *testing.T) {
		srv := newAPIServer(t, answer(200, `{}`))
		url := srv.URL
		srv.Close()
		c := newTestClient(t, url, WithBreaker(BreakerSettings{ConsecutiveFailures: 2, OpenFor: time.Minute, HalfOpenRequests: 1}))
		for range 2 {
			_, _ = c.ListWebhookEndpoints(t.Context())
		}
		if _, err := c.ListWebhookEndpoints(t.Context()); !errors.Is(err, ErrBreakerOpen) {
			t.Errorf("third call: error = %v, want ErrBreakerOpen", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		srv := newHangingServer(t)
		c := newTestClient(t, srv.URL, WithTimeout(20*time.Millisecond), WithBreaker(BreakerSettings{ConsecutiveFailures: 2, OpenFor: time.Minute, HalfOpenRequests: 1}))
		for range 2 {
			_, _ = c.ListWebhookEndpoints(t.Context())
		}
		if c.BreakerState() != gobreaker.StateOpen {
			t.Errorf("after two timeouts state = %s, want open", c.BreakerState())
		}
	})
}
