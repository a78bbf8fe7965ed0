package agentsite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of a Limiter; each has an option that changes it.
const (
	// DefaultMaxRate is the highest rate a Limiter allows, in requests per
	// second (WithMaxRate).
	DefaultMaxRate = 50.0
	// DefaultMinRate is the floor of the multiplicative decrease
	// (WithMinRate).
	DefaultMinRate = 1.0
	// DefaultBurst is how many requests may go at once (WithBurst).
	DefaultBurst = 10
	// DefaultDecreaseFactor multiplies the rate on a 429 (WithDecrease).
	DefaultDecreaseFactor = 0.5
	// DefaultDecreaseWindow is the shortest time between two decreases, so
	// that the 429s of requests that were in flight together count once
	// (WithDecrease).
	DefaultDecreaseWindow = time.Second
	// DefaultRecovery is how fast the rate grows back, in requests per
	// second gained per second of answers that are not 429 (WithRecovery).
	DefaultRecovery = 2.0
)

// Limiter is one adaptive limit on the calls made with one API key. Every
// Client (and every activity) of a process that uses the key shares the
// same Limiter: create one per API key per process with NewLimiter, pass it
// to each NewClient with WithLimiter, and never create one per request.
//
// Before each request the client calls Wait; after each answer it calls
// Observe with the status and the Retry-After. The Limiter then behaves so:
//
//   - Rate. Requests go out through a token bucket (golang.org/x/time/rate)
//     whose rate starts at the maximum (or WithStartRate, or unlimited with
//     WithUnlimitedStart) and whose burst is DefaultBurst.
//   - Pause. A Retry-After on any answer (a 429, or a 503 that carries one)
//     pauses every caller until that time: no request with the key is sent
//     before it. A later Retry-After can lengthen a pause, never shorten it.
//     When the pause ends, the bucket holds a single token, so the callers
//     that waited resume at the allowed rate instead of all at once.
//   - Deadline. If the pause, or the wait for a token, would end after the
//     deadline of Wait's context, Wait returns at once a *ThrottledError
//     whose RetryAfter is the remaining wait, and nothing is sent. A
//     Temporal activity fails its attempt with NextRetryDelay = RetryAfter
//     instead of burning its timeout in a queue.
//   - AIMD. A 429 multiplies the rate by the decrease factor (0.5), at most
//     once per decrease window (1 s): a burst of 429s from requests that
//     were in flight together is one signal. Each later answer that is not
//     a 429 and not a 5xx adds Recovery/rate, about Recovery requests per
//     second every second while callers use the whole rate, up to the
//     maximum. The rate never goes below the minimum nor above the maximum.
//     A caller that uses less than the allowed rate recovers more slowly,
//     which is right: it has not shown that a higher rate is accepted.
//   - Unlimited start. WithUnlimitedStart sends without a rate limit (pauses
//     still apply) until the first 429, which sets the rate to the maximum;
//     AIMD runs from there. It suits a single worker that rarely meets the
//     service's limit; with several workers, prefer a finite start.
//
// # Several worker processes
//
// The service limits calls per API key, so N worker processes that use the
// same key share one limit, and each process's Limiter adapts on its own:
// the Limiters do not talk to each other. They converge nonetheless,
// because every process backs off multiplicatively on the 429s it gets and
// honours every Retry-After it sees; the processes that send most get most
// 429s and slow down most. Retry-After pauses only the process that
// received it, so the others may meet the limit a moment later and pause in
// turn. Size the limits per process:
//
//   - set the maximum rate to about the service's limit for the key divided
//     by the number of workers, times a small headroom (1.5 to 2) so that
//     capacity left by idle workers is used; a maximum far above the
//     service's limit only adds 429s before each process has backed off;
//   - set the burst to at most the service's burst divided by the number of
//     workers (at least 1);
//   - give each consuming service and environment its own key, as the
//     contract advises, so that one system's load does not throttle
//     another's.
//
// A Limiter is safe for concurrent use. It starts no goroutine: a caller
// waits on its own timer, released when it returns.
type Limiter struct {
	clock    LimiterClock
	max      rate.Limit
	min      rate.Limit
	burst    int
	factor   float64
	window   time.Duration
	recovery float64
	metrics  limiterInstruments

	mu           sync.Mutex
	limit        rate.Limit // the allowed rate; rate.Inf until the first 429 with WithUnlimitedStart
	bucket       *rate.Limiter
	pausedUntil  time.Time
	lastDecrease time.Time
	changed      chan struct{} // closed and replaced when a pause begins or grows
}

// LimiterClock is the time source of a Limiter: the real clock unless a test
// injects another with WithLimiterClock.
type LimiterClock interface {
	Now() time.Time
	// NewTimer returns a channel that receives once d has passed and a
	// function that stops the timer early.
	NewTimer(d time.Duration) (<-chan time.Time, func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

type limiterConfig struct {
	clock     LimiterClock
	max, min  float64
	start     float64 // 0 = max
	unlimited bool
	burst     int
	factor    float64
	window    time.Duration
	recovery  float64
	name      string
}

// LimiterOption configures a Limiter. Options validate their argument:
// NewLimiter fails with the option's error rather than running with a bad
// setting.
type LimiterOption func(*limiterConfig) error

func positiveRate(opt string, r float64) error {
	if math.IsNaN(r) || math.IsInf(r, 0) || r <= 0 {
		return fmt.Errorf("agentsite: %s: %g is not a positive, finite number of requests per second", opt, r)
	}
	return nil
}

// WithMaxRate sets the highest allowed rate in requests per second
// (DefaultMaxRate otherwise). With several worker processes on one key, see
// the sizing guidance on Limiter.
func WithMaxRate(r float64) LimiterOption {
	return func(cfg *limiterConfig) error {
		if err := positiveRate("WithMaxRate", r); err != nil {
			return err
		}
		cfg.max = r
		return nil
	}
}

// WithMinRate sets the lowest rate the decrease may reach, in requests per
// second (DefaultMinRate otherwise).
func WithMinRate(r float64) LimiterOption {
	return func(cfg *limiterConfig) error {
		if err := positiveRate("WithMinRate", r); err != nil {
			return err
		}
		cfg.min = r
		return nil
	}
}

// WithStartRate sets the rate before any 429, from the minimum to the
// maximum (the maximum otherwise). Starting low and growing suits many
// workers that start together.
func WithStartRate(r float64) LimiterOption {
	return func(cfg *limiterConfig) error {
		if err := positiveRate("WithStartRate", r); err != nil {
			return err
		}
		cfg.start = r
		return nil
	}
}

// WithUnlimitedStart sends without a rate limit until the first 429, which
// sets the rate to the maximum. Pauses from Retry-After apply throughout.
func WithUnlimitedStart() LimiterOption {
	return func(cfg *limiterConfig) error {
		cfg.unlimited = true
		return nil
	}
}

// WithBurst sets how many requests may go at once after a quiet time
// (DefaultBurst otherwise).
func WithBurst(n int) LimiterOption {
	return func(cfg *limiterConfig) error {
		if n < 1 {
			return fmt.Errorf("agentsite: WithBurst: %d; the burst must be at least 1", n)
		}
		cfg.burst = n
		return nil
	}
}

// WithDecrease sets the factor that multiplies the rate on a 429, from 0 to
// 1 exclusive, and the shortest time between two decreases
// (DefaultDecreaseFactor and DefaultDecreaseWindow otherwise). The window
// should be about the time a request takes, so that the 429s of requests
// in flight together count once.
func WithDecrease(factor float64, window time.Duration) LimiterOption {
	return func(cfg *limiterConfig) error {
		if math.IsNaN(factor) || factor <= 0 || factor >= 1 {
			return fmt.Errorf("agentsite: WithDecrease: factor %g; use a number between 0 and 1, e.g. 0.5", factor)
		}
		if window < 0 {
			return fmt.Errorf("agentsite: WithDecrease: window %s must not be negative", window)
		}
		cfg.factor, cfg.window = factor, window
		return nil
	}
}

// WithRecovery sets how fast the rate grows back after a decrease, in
// requests per second gained per second of accepted answers at the allowed
// rate (DefaultRecovery otherwise).
func WithRecovery(perSecond float64) LimiterOption {
	return func(cfg *limiterConfig) error {
		if err := positiveRate("WithRecovery", perSecond); err != nil {
			return err
		}
		cfg.recovery = perSecond
		return nil
	}
}

// WithLimiterName sets the "limiter" attribute of the Limiter's metrics
// ("agentsite" otherwise), to tell the limiters of several keys apart. It
// must not be the key itself.
func WithLimiterName(name string) LimiterOption {
	return func(cfg *limiterConfig) error {
		if name == "" {
			return errors.New("agentsite: WithLimiterName: empty name")
		}
		cfg.name = name
		return nil
	}
}

// WithLimiterClock sets the Limiter's clock (the real clock otherwise). The
// deadline of Wait's context is compared with this clock.
func WithLimiterClock(c LimiterClock) LimiterOption {
	return func(cfg *limiterConfig) error {
		if c == nil {
			return errors.New("agentsite: WithLimiterClock: nil clock")
		}
		cfg.clock = c
		return nil
	}
}

// NewLimiter returns a Limiter with the defaults above changed by opts.
func NewLimiter(opts ...LimiterOption) (*Limiter, error) {
	cfg := limiterConfig{
		clock:    realClock{},
		max:      DefaultMaxRate,
		min:      DefaultMinRate,
		burst:    DefaultBurst,
		factor:   DefaultDecreaseFactor,
		window:   DefaultDecreaseWindow,
		recovery: DefaultRecovery,
		name:     "agentsite",
	}
	for _, opt := range opts {
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.min > cfg.max {
		return nil, fmt.Errorf("agentsite: NewLimiter: the minimum rate %g is above the maximum %g", cfg.min, cfg.max)
	}
	start := cfg.max
	if cfg.start != 0 {
		if cfg.start < cfg.min || cfg.start > cfg.max {
			return nil, fmt.Errorf("agentsite: NewLimiter: the start rate %g is outside [%g, %g]", cfg.start, cfg.min, cfg.max)
		}
		start = cfg.start
	}
	limit := rate.Limit(start)
	if cfg.unlimited {
		limit = rate.Inf
	}
	l := &Limiter{
		clock:    cfg.clock,
		max:      rate.Limit(cfg.max),
		min:      rate.Limit(cfg.min),
		burst:    cfg.burst,
		factor:   cfg.factor,
		window:   cfg.window,
		recovery: cfg.recovery,
		limit:    limit,
		bucket:   rate.NewLimiter(limit, cfg.burst),
		changed:  make(chan struct{}),
	}
	l.metrics = newLimiterInstruments(l, cfg.name)
	return l, nil
}

// ThrottledError is returned by Wait, and by every Client method, without
// sending anything when the wait for the Limiter (a Retry-After pause or the
// allowed rate) would outlast the caller's deadline.
type ThrottledError struct {
	// RetryAfter is how long the wait still was when the call gave up: the
	// time to come back.
	RetryAfter time.Duration
	// Paused is true when the wait was a pause asked for with Retry-After,
	// false when it was the allowed rate.
	Paused bool
}

// ErrThrottled matches any *ThrottledError with errors.Is.
var ErrThrottled = errors.New("agentsite: throttled")

func (e *ThrottledError) Error() string {
	d := e.RetryAfter.Round(time.Millisecond)
	if e.Paused {
		return fmt.Sprintf("agentsite: throttled: the Agent-Site API asked (Retry-After) every caller of this API key to pause for %s more, past this call's deadline; nothing was sent; retry in %s", d, d)
	}
	return fmt.Sprintf("agentsite: throttled: the allowed request rate of this API key has no free slot for %s, past this call's deadline; nothing was sent; retry in %s, or spread the load", d, d)
}

// Is makes errors.Is(err, ErrThrottled) true.
func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }

// Wait blocks until the Limiter lets one request go, and returns nil then.
// It returns a *ThrottledError at once when the wait would end after ctx's
// deadline, and ctx's error when ctx is done first.
func (l *Limiter) Wait(ctx context.Context) error {
	start := l.clock.Now()
	err := l.wait(ctx)
	l.metrics.waited(ctx, l.clock.Now().Sub(start), err)
	return err
}

func (l *Limiter) wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline, hasDeadline := ctx.Deadline()
	for {
		l.mu.Lock()
		now := l.clock.Now()
		changed := l.changed
		if now.Before(l.pausedUntil) {
			until := l.pausedUntil
			l.mu.Unlock()
			if hasDeadline && until.After(deadline) {
				return &ThrottledError{RetryAfter: until.Sub(now), Paused: true}
			}
			if err := l.sleepUntil(ctx, until, changed); err != nil {
				return err
			}
			continue
		}
		res := l.bucket.ReserveN(now, 1)
		d := res.DelayFrom(now)
		if d == 0 {
			l.mu.Unlock()
			return nil
		}
		if hasDeadline && now.Add(d).After(deadline) {
			res.CancelAt(now)
			l.mu.Unlock()
			return &ThrottledError{RetryAfter: d}
		}
		l.mu.Unlock()
		if err := l.sleepUntil(ctx, now.Add(d), changed); err != nil {
			l.mu.Lock()
			res.CancelAt(l.clock.Now())
			l.mu.Unlock()
			return err
		}
		// The token is ours unless a pause began meanwhile: a pause
		// replaces the bucket and voids the tokens handed out before it.
		l.mu.Lock()
		voided := l.changed != changed
		l.mu.Unlock()
		if !voided {
			return nil
		}
	}
}

// sleepUntil waits for the time until, for a change of pause, or for ctx.
// Only ctx's end is an error. The timer runs to an absolute time, so that
// the moments between deciding and sleeping do not lengthen the wait.
func (l *Limiter) sleepUntil(ctx context.Context, until time.Time, changed <-chan struct{}) error {
	d := until.Sub(l.clock.Now())
	if d <= 0 {
		return nil
	}
	c, stop := l.clock.NewTimer(d)
	defer stop()
	select {
	case <-c:
		return nil
	case <-changed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Observe reports one answer of the API: its HTTP status and the wait it
// asked for with Retry-After (zero when none). A Client given WithLimiter
// calls it for every answer; call it yourself only for requests sent some
// other way with the same key.
func (l *Limiter) Observe(status int, retryAfter time.Duration) {
	if status == http.StatusTooManyRequests {
		l.metrics.rateLimited.Add(context.Background(), 1, l.metrics.attrs)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	switch {
	case status == http.StatusTooManyRequests:
		l.decreaseLocked(now)
	case status >= 200 && status < 500:
		l.increaseLocked(now)
	}
	if retryAfter > 0 {
		l.pauseLocked(now.Add(retryAfter))
	}
}

func (l *Limiter) decreaseLocked(now time.Time) {
	if l.limit == rate.Inf {
		l.limit = l.max // the first 429 after WithUnlimitedStart
	} else {
		if !l.lastDecrease.IsZero() && now.Sub(l.lastDecrease) < l.window {
			return
		}
		l.limit = max(l.min, rate.Limit(float64(l.limit)*l.factor))
	}
	l.lastDecrease = now
	l.bucket.SetLimitAt(l.bucketTimeLocked(now), l.limit)
}

func (l *Limiter) increaseLocked(now time.Time) {
	if l.limit == rate.Inf || l.limit >= l.max {
		return
	}
	l.limit = min(l.max, l.limit+rate.Limit(l.recovery/float64(l.limit)))
	l.bucket.SetLimitAt(l.bucketTimeLocked(now), l.limit)
}

// bucketTimeLocked is the time at which to change the bucket's rate: the
// end of a pause in force, which keeps the single token the pause left
// there instead of letting the bucket refill during the pause.
func (l *Limiter) bucketTimeLocked(now time.Time) time.Time {
	if l.pausedUntil.After(now) {
		return l.pausedUntil
	}
	return now
}

func (l *Limiter) pauseLocked(until time.Time) {
	if !until.After(l.pausedUntil) {
		return
	}
	l.metrics.pauses.Add(context.Background(), 1, l.metrics.attrs)
	l.pausedUntil = until
	// A fresh bucket holding one token at the end of the pause: callers
	// resume at the allowed rate, not in one burst, and tokens handed out
	// before the pause are void (their holders see changed closed).
	l.bucket = rate.NewLimiter(l.limit, l.burst)
	l.bucket.ReserveN(until, l.burst-1)
	close(l.changed)
	l.changed = make(chan struct{})
}

// Rate returns the allowed rate in requests per second; +Inf before the
// first 429 with WithUnlimitedStart.
func (l *Limiter) Rate() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.limit == rate.Inf {
		return math.Inf(1)
	}
	return float64(l.limit)
}

// PausedUntil returns the end of the current or last Retry-After pause (the
// zero time if none).
func (l *Limiter) PausedUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pausedUntil
}
