package agentsite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/siteops/siteops/internal/siteopstest"
)

// fakeClock is a LimiterClock that moves only when the test advances it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at time.Time
	c  chan time.Time
}

func newFakeClock() *fakeClock {
	// Real time, so that context deadlines set from it lie in the real
	// future and only the limiter's own check can trip on them.
	return &fakeClock{now: time.Now()}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- c.now
		return t.c, func() bool { return false }
	}
	c.timers = append(c.timers, t)
	return t.c, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.timers {
			if x == t {
				c.timers = append(c.timers[:i], c.timers[i+1:]...)
				return true
			}
		}
		return false
	}
}

// Advance moves the clock and fires the timers that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	pending := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			pending = append(pending, t)
			continue
		}
		t.c <- c.now
	}
	c.timers = pending
}

// Timers returns how many timers are pending: callers asleep in Wait.
func (c *fakeClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

func newTestLimiter(t *testing.T, opts ...LimiterOption) (*Limiter, *fakeClock) {
	t.Helper()
	clock := newFakeClock()
	l, err := NewLimiter(append([]LimiterOption{WithLimiterClock(clock)}, opts...)...)
	if err != nil {
		t.Fatalf("NewLimiter: %v", err)
	}
	return l, clock
}

// waitAsleep waits until n callers wait in l and the first in line sleeps
// on clock's timers, failing the test with how many did when they do not
// within 5 s.
func waitAsleep(t *testing.T, l *Limiter, clock *fakeClock, n int, what string) {
	t.Helper()
	siteopstest.EventuallyNil(t, 5*time.Second, fmt.Sprintf("%s (%d waiting)", what, n), func() error {
		if got, timers := queued(l), clock.Timers(); got != n || timers == 0 {
			return fmt.Errorf("%d waiting, %d timers", got, timers)
		}
		return nil
	})
}

// queued is how many callers wait in l, of every class.
func queued(l *Limiter) int {
	n := 0
	for _, c := range l.Waiting() {
		n += c
	}
	return n
}

// waiters runs n Waits at once and reports, for each one that returns, the
// fake time at which it did.
func waiters(t *testing.T, ctx context.Context, l *Limiter, clock *fakeClock, n int) <-chan time.Time {
	t.Helper()
	done := make(chan time.Time, n)
	for range n {
		go func() {
			if err := l.Wait(ctx); err != nil {
				if ctx.Err() == nil { // not the end of the test
					t.Errorf("Wait: %v", err)
				}
				return
			}
			done <- clock.Now()
		}()
	}
	return done
}

func TestLimiterPauseBlocksEveryCallerUntilRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter time.Duration
		wantRate   float64 // after the answer, from 1000
	}{
		{"429 pauses and halves the rate", http.StatusTooManyRequests, 5 * time.Second, 500},
		{"503 pauses and keeps the rate", http.StatusServiceUnavailable, 3 * time.Second, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, clock := newTestLimiter(t, WithMaxRate(1000), WithBurst(1))
			start := clock.Now()
			l.Observe(tc.status, tc.retryAfter)
			if got := l.Rate(); got != tc.wantRate {
				t.Errorf("rate = %g, want %g", got, tc.wantRate)
			}
			if got, want := l.PausedUntil(), start.Add(tc.retryAfter); !got.Equal(want) {
				t.Errorf("paused until %s, want %s", got, want)
			}

			const n = 5
			done := waiters(t, t.Context(), l, clock, n)
			waitAsleep(t, l, clock, n, "every caller asleep")
			clock.Advance(tc.retryAfter - time.Millisecond)
			if len(done) != 0 {
				t.Fatalf("%d callers went before the pause ended", len(done))
			}
			clock.Advance(time.Millisecond)
			for i := range n {
				select {
				case at := <-done:
					if at.Before(start.Add(tc.retryAfter)) {
						t.Errorf("caller %d went at +%s, inside the pause", i, at.Sub(start))
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("only %d of %d callers went after the pause", i, n)
				}
				// After the pause the callers go one token at a time (the
				// microsecond absorbs the bucket's floating-point rounding).
				clock.Advance(time.Duration(float64(time.Second)/tc.wantRate) + time.Microsecond)
			}
		})
	}
}

func TestLimiterPauseResumesAtTheRateNotInABurst(t *testing.T) {
	l, clock := newTestLimiter(t, WithMaxRate(10), WithBurst(5))
	l.Observe(http.StatusServiceUnavailable, time.Second)
	done := waiters(t, t.Context(), l, clock, 5)
	waitAsleep(t, l, clock, 5, "five callers asleep")

	clock.Advance(time.Second)
	// One token waits at the end of the pause; the other four follow at
	// 10 per second even though the burst is 5.
	siteopstest.EventuallyNil(t, 5*time.Second, "one caller gone, four waiting", func() error {
		if gone, waiting := len(done), queued(l); gone != 1 || waiting != 4 {
			return fmt.Errorf("%d gone, %d waiting", gone, waiting)
		}
		return nil
	})
	for want := 2; want <= 5; want++ {
		clock.Advance(100*time.Millisecond + time.Microsecond)
		siteopstest.EventuallyNil(t, 5*time.Second, fmt.Sprintf("the next caller (%d gone)", want), func() error {
			if gone := len(done); gone != want {
				return fmt.Errorf("%d gone", gone)
			}
			return nil
		})
	}
}

func TestLimiterPauseVoidsTokensHandedOutBeforeIt(t *testing.T) {
	l, clock := newTestLimiter(t, WithMaxRate(1), WithBurst(1))
	if err := l.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	done := waiters(t, t.Context(), l, clock, 1) // has the token due in 1 s
	waitAsleep(t, l, clock, 1, "the caller asleep")

	l.Observe(http.StatusServiceUnavailable, 10*time.Second)
	clock.Advance(time.Second)
	if len(done) != 0 {
		t.Fatal("a token reserved before the pause let a request go inside it")
	}
	clock.Advance(9 * time.Second)
	select {
	case at := <-done:
		if got := at.Sub(l.PausedUntil()); got < 0 {
			t.Errorf("went %s before the pause ended", -got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the caller did not go after the pause")
	}
}

func TestLimiterThrottledErrorWhenTheDeadlineComesFirst(t *testing.T) {
	for _, tc := range []struct {
		name       string
		setup      func(*Limiter) // with the clock at its start
		deadline   time.Duration
		wantErr    bool
		retryAfter time.Duration
		paused     bool
	}{
		{"pause beyond the deadline", func(l *Limiter) { l.Observe(http.StatusTooManyRequests, 10*time.Second) }, 5 * time.Second, true, 10 * time.Second, true},
		{"pause within the deadline", func(l *Limiter) { l.Observe(http.StatusTooManyRequests, 10*time.Second) }, 15 * time.Second, false, 0, false},
		{"rate wait beyond the deadline", func(l *Limiter) { _ = l.Wait(context.Background()) }, 500 * time.Millisecond, true, time.Second, false},
		{"rate wait within the deadline", func(l *Limiter) { _ = l.Wait(context.Background()) }, 2 * time.Second, false, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, clock := newTestLimiter(t, WithMaxRate(1), WithMinRate(1), WithBurst(1))
			tc.setup(l)
			ctx, cancel := context.WithDeadline(t.Context(), clock.Now().Add(tc.deadline))
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- l.Wait(ctx) }()
			if !tc.wantErr {
				waitAsleep(t, l, clock, 1, "the caller asleep")
				clock.Advance(tc.deadline)
			}
			var err error
			select {
			case err = <-errc:
			case <-time.After(5 * time.Second):
				t.Fatal("Wait did not return")
			}
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("Wait = %v, want nil", err)
				}
				return
			}
			var te *ThrottledError
			if !errors.As(err, &te) || !errors.Is(err, ErrThrottled) {
				t.Fatalf("Wait = %v, want *ThrottledError", err)
			}
			if te.RetryAfter != tc.retryAfter || te.Paused != tc.paused {
				t.Errorf("got %+v, want RetryAfter %s, Paused %t", te, tc.retryAfter, tc.paused)
			}
			if !strings.Contains(err.Error(), "nothing was sent") {
				t.Errorf("message %q does not say that nothing was sent", err)
			}
			if clock.Timers() != 0 {
				t.Errorf("a refused Wait left %d timers", clock.Timers())
			}
		})
	}
}

func TestLimiterRefusedWaitGivesItsTokenBack(t *testing.T) {
	l, clock := newTestLimiter(t, WithMaxRate(1), WithMinRate(1), WithBurst(1))
	if err := l.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithDeadline(t.Context(), clock.Now().Add(100*time.Millisecond))
	defer cancel()
	if err := l.Wait(short); !errors.Is(err, ErrThrottled) {
		t.Fatalf("Wait = %v, want throttled", err)
	}
	// Had the refused Wait kept its token, the next one would be due in 2 s.
	done := waiters(t, t.Context(), l, clock, 1)
	waitAsleep(t, l, clock, 1, "the caller asleep")
	clock.Advance(time.Second + time.Millisecond)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the next caller waited for a token the refused caller had taken")
	}
}

func TestLimiterCancelledWaitersReturnAndLeaveNoTimer(t *testing.T) {
	l, clock := newTestLimiter(t)
	l.Observe(http.StatusTooManyRequests, time.Hour)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 3)
	for range 3 {
		go func() { errc <- l.Wait(ctx) }()
	}
	waitAsleep(t, l, clock, 3, "three callers asleep")
	cancel()
	for range 3 {
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Wait = %v, want context.Canceled", err)
		}
	}
	if n := clock.Timers(); n != 0 {
		t.Errorf("%d timers left behind", n)
	}
}

func TestLimiterLongerPauseRefusesSleepersWithAShortDeadline(t *testing.T) {
	l, clock := newTestLimiter(t)
	l.Observe(http.StatusTooManyRequests, time.Second)
	ctx, cancel := context.WithDeadline(t.Context(), clock.Now().Add(5*time.Second))
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- l.Wait(ctx) }()
	waitAsleep(t, l, clock, 1, "the caller asleep")
	l.Observe(http.StatusTooManyRequests, time.Minute)
	select {
	case err := <-errc:
		var te *ThrottledError
		if !errors.As(err, &te) || te.RetryAfter != time.Minute {
			t.Errorf("Wait = %v, want a ThrottledError of 1m", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a sleeper was not told at once that the pause now outlasts its deadline")
	}
}

func TestLimiterAIMD(t *testing.T) {
	type step struct {
		advance time.Duration
		status  int
		times   int // answers of this status (default 1)
		want    float64
	}
	for _, tc := range []struct {
		name  string
		opts  []LimiterOption
		steps []step
	}{
		{
			name: "decrease once per window, never below the minimum",
			opts: []LimiterOption{WithMaxRate(100), WithMinRate(10), WithDecrease(0.5, time.Second)},
			steps: []step{
				{0, 429, 20, 50}, // a burst of 429s in flight together is one signal
				{500 * time.Millisecond, 429, 1, 50},
				{500 * time.Millisecond, 429, 1, 25},
				{time.Second, 429, 1, 12.5},
				{time.Second, 429, 1, 10},
				{time.Second, 429, 1, 10},
			},
		},
		{
			name: "recover additively up to the maximum",
			opts: []LimiterOption{WithMaxRate(12), WithMinRate(1), WithStartRate(10), WithRecovery(2)},
			steps: []step{
				{0, 200, 1, 10.2},
				{0, 404, 1, 10.2 + 2/10.2}, // a processed 4xx says the rate was accepted
				{0, 500, 5, 10.2 + 2/10.2}, // 5xx say nothing about the rate
				{0, 200, 1000, 12},
			},
		},
		{
			name: "decrease then recover",
			opts: []LimiterOption{WithMaxRate(40), WithDecrease(0.25, time.Second), WithRecovery(10)},
			steps: []step{
				{0, 429, 1, 10},
				{0, 201, 1, 11},
				{0, 429, 1, 11}, // inside the window
				{time.Second, 429, 1, 2.75},
			},
		},
		{
			name: "unlimited until the first 429",
			opts: []LimiterOption{WithMaxRate(30), WithUnlimitedStart()},
			steps: []step{
				{0, 200, 10, math.Inf(1)},
				{0, 429, 3, 30},
				{time.Second, 429, 1, 15},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, clock := newTestLimiter(t, tc.opts...)
			for i, s := range tc.steps {
				clock.Advance(s.advance)
				for range max(s.times, 1) {
					l.Observe(s.status, 0)
				}
				if got := l.Rate(); math.Abs(got-s.want) > 1e-9 && got != s.want {
					t.Fatalf("step %d (%d × %d): rate = %g, want %g", i, max(s.times, 1), s.status, got, s.want)
				}
			}
		})
	}
}

func TestLimiterRateStaysWithinBounds(t *testing.T) {
	l, clock := newTestLimiter(t, WithMaxRate(20), WithMinRate(2), WithDecrease(0.1, 0), WithRecovery(50))
	for i := range 500 {
		clock.Advance(time.Millisecond)
		status := http.StatusOK
		if i%3 == 0 {
			status = http.StatusTooManyRequests
		}
		l.Observe(status, 0)
		if r := l.Rate(); r < 2 || r > 20 {
			t.Fatalf("after answer %d the rate is %g, outside [2, 20]", i, r)
		}
	}
}

func TestLimiterOptionsValidate(t *testing.T) {
	for name, opts := range map[string][]LimiterOption{
		"zero max":           {WithMaxRate(0)},
		"infinite max":       {WithMaxRate(math.Inf(1))},
		"NaN min":            {WithMinRate(math.NaN())},
		"min above max":      {WithMaxRate(5), WithMinRate(6)},
		"start above max":    {WithMaxRate(5), WithStartRate(6)},
		"start below min":    {WithMinRate(5), WithStartRate(4)},
		"zero burst":         {WithBurst(0)},
		"factor 1":           {WithDecrease(1, time.Second)},
		"factor 0":           {WithDecrease(0, time.Second)},
		"negative window":    {WithDecrease(0.5, -time.Second)},
		"negative recovery":  {WithRecovery(-1)},
		"nil clock":          {WithLimiterClock(nil)},
		"empty limiter name": {WithLimiterName("")},
	} {
		if _, err := NewLimiter(opts...); err == nil {
			t.Errorf("%s: NewLimiter accepted it", name)
		}
	}
	l, err := NewLimiter()
	if err != nil {
		t.Fatal(err)
	}
	if l.Rate() != DefaultMaxRate {
		t.Errorf("default rate = %g, want %g", l.Rate(), DefaultMaxRate)
	}
	if _, err := NewClient("https://api.example.com", testKey, WithLimiter(nil)); err == nil {
		t.Error("WithLimiter(nil) accepted")
	}
}

func TestLimiterConcurrentCallersAllGo(t *testing.T) {
	l, err := NewLimiter(WithMaxRate(2000), WithBurst(5))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var sent atomic.Int32
	for i := range 50 {
		wg.Go(func() {
			for j := range 10 {
				if err := l.Wait(t.Context()); err != nil {
					t.Errorf("Wait: %v", err)
					return
				}
				sent.Add(1)
				status := http.StatusOK
				if (i+j)%17 == 0 {
					status = http.StatusTooManyRequests
				}
				l.Observe(status, 0)
				_ = l.Rate()
			}
		})
	}
	wg.Wait()
	if sent.Load() != 500 {
		t.Errorf("%d requests went, want 500", sent.Load())
	}
}

// The client waits for the limiter before the breaker, reports each answer
// to it, and a request it refuses is neither sent nor a breaker failure.
func TestClientWithLimiterHonoursRetryAfterForEveryCaller(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter func(now time.Time) string
	}{
		{"seconds", func(time.Time) string { return "30" }},
		{"HTTP date", func(now time.Time) string { return now.Add(31 * time.Second).UTC().Format(http.TimeFormat) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newAPIServer(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", tc.retryAfter(time.Now()))
				answer(http.StatusTooManyRequests, `{"error":{"code":"rate_limited"}}`)(w, nil)
			})
			lim, err := NewLimiter()
			if err != nil {
				t.Fatal(err)
			}
			c := newTestClient(t, srv.URL, WithLimiter(lim), WithBreaker(BreakerSettings{ConsecutiveFailures: 1, OpenFor: time.Minute, HalfOpenRequests: 1}))
			other := newTestClient(t, srv.URL, WithLimiter(lim)) // another activity, same key

			_, err = c.ListWebhookEndpoints(t.Context())
			var apiErr *APIError
			if !errors.As(err, &apiErr) || apiErr.Status != http.StatusTooManyRequests {
				t.Fatalf("first call: %v, want a 429", err)
			}
			if until := time.Until(lim.PausedUntil()); until < 29*time.Second || until > 31*time.Second {
				t.Errorf("paused for %s, want about 30 s", until)
			}

			for _, cl := range []*Client{c, other, c, other} {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				start := time.Now()
				_, err := cl.Publish(ctx, "k", "site_1", true)
				cancel()
				var te *ThrottledError
				if !errors.As(err, &te) || !te.Paused || te.RetryAfter < 25*time.Second {
					t.Fatalf("during the pause: %v, want a *ThrottledError of about 30 s", err)
				}
				if took := time.Since(start); took > siteopstest.Bound(time.Second) {
					t.Errorf("the refusal took %s; it must not wait", took)
				}
			}
			if n := len(srv.requests()); n != 1 {
				t.Errorf("the server saw %d requests, want only the first", n)
			}
			if c.BreakerState() != gobreaker.StateClosed {
				t.Errorf("breaker %s after throttled calls, want closed", c.BreakerState())
			}

			// A caller without a deadline is held, not refused, and gives up
			// unsent when its context ends.
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() { _, err := other.ListWebhookEndpoints(ctx); errc <- err }()
			cancel()
			err = <-errc
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "nothing was sent") {
				t.Errorf("cancelled while waiting: %v", err)
			}
			if n := len(srv.requests()); n != 1 {
				t.Errorf("the server saw %d requests, want only the first", n)
			}
		})
	}
}
