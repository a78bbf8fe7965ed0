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
	// DefaultHeadroom is the share of the rate at which the API last
	// answered 429 that the Limiter leaves unused (WithHeadroom), so that
	// a playbook's call finds the service's own budget not yet spent.
	DefaultHeadroom = 0.1
	// DefaultProbeEvery is how often a Limiter held at its ceiling tries a
	// slightly higher one, in case the service's limit rose (WithHeadroom).
	DefaultProbeEvery = 30 * time.Second
)

// Limiter is one adaptive limit on the calls made with one API key. Every
// Client (and every activity) of a process that uses the key shares the
// same Limiter: create one per API key per process with NewLimiter, pass it
// to each NewClient with WithLimiter, and never create one per request.
//
// Before each request the client calls Wait; after each answer it calls
// Observe with the status and the Retry-After. The Limiter then behaves so:
//
//   - Rate. Requests go out through a token bucket whose rate starts at
//     the maximum (or WithStartRate, or unlimited with WithUnlimitedStart)
//     and whose burst is DefaultBurst.
//   - Order. When callers wait, each token goes to the most urgent class
//     that waits (the Priority of Wait's context, WithPriority): playbook
//     before onboarding before bulk. Within a class the callers' keys take
//     turns, a token each, so that one key's many calls do not hold
//     another's first one behind them. A playbook call therefore waits
//     for at most the next token, however many bulk calls queued before it.
//   - Pause. A Retry-After on any answer (a 429, or a 503 that carries one)
//     pauses every caller of every class until that time: no request with
//     the key is sent before it. A later Retry-After can lengthen a pause,
//     never shorten it. When the pause ends, the bucket holds a single
//     token, which goes to the most urgent waiter; the others follow at the
//     allowed rate instead of all at once.
//   - Deadline. If the pause, or the wait for a token with the callers
//     served before it, would end after the deadline of Wait's context
//     (less a margin of up to a second to send the request), Wait returns
//     at once a *ThrottledError whose RetryAfter is the expected wait, and
//     nothing is sent. A caller pushed back while it waits (more urgent
//     calls arrived) is told so at that margin, not at its deadline. A
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
//   - Headroom. The rate at which the API last answered 429 is a ceiling:
//     the recovery stops at that rate less the headroom (10 %), instead of
//     climbing into the next 429. So the service's own bucket is not empty
//     when an urgent call comes, and that call is not answered 429 for the
//     bulk traffic's sake. Every DefaultProbeEvery without a 429 at the
//     ceiling, it rises by a quarter of the headroom, so that a limit the
//     service raised is found again.
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
// turn. The order of classes holds within a process: a playbook call goes
// before that process's bulk calls, and the headroom each process keeps is
// what lets it through the service's limit. Size the limits per process:
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
// A Limiter is safe for concurrent use. It starts no goroutine: each caller
// waits on its own timer (the first in line for the next token, the others
// for their deadline), released when it returns.
type Limiter struct {
	clock      LimiterClock
	max        rate.Limit
	min        rate.Limit
	burst      int
	factor     float64
	window     time.Duration
	recovery   float64
	headroom   float64
	probeEvery time.Duration
	metrics    limiterInstruments

	mu    sync.Mutex
	limit rate.Limit // the allowed rate; rate.Inf until the first 429 with WithUnlimitedStart
	// tokens is what the bucket holds at last; refills from last on at
	// limit, up to burst. During a pause last is its end.
	tokens       float64
	last         time.Time
	pausedUntil  time.Time
	lastDecrease time.Time
	// wall is the rate the API last answered 429 at (0: none yet); the
	// recovery stops short of it by the headroom. lastProbe is when it
	// was last set or raised.
	wall      float64
	lastProbe time.Time
	queue     waitQueue
	changed   chan struct{} // closed and replaced when a pause begins or grows
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
	headroom  float64
	probe     time.Duration
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

// WithHeadroom sets the share of the rate at which the API last answered
// 429 that the Limiter leaves unused, from 0 to 0.5 (DefaultHeadroom
// otherwise), and how often a Limiter held at that ceiling tries a higher
// one (DefaultProbeEvery otherwise; zero keeps the default). A headroom of
// 0 climbs back to the rate of the last 429, as plain AIMD does.
func WithHeadroom(fraction float64, probeEvery time.Duration) LimiterOption {
	return func(cfg *limiterConfig) error {
		if math.IsNaN(fraction) || fraction < 0 || fraction > 0.5 {
			return fmt.Errorf("agentsite: WithHeadroom: %g; give a share from 0 to 0.5 of the rate, e.g. 0.1", fraction)
		}
		if probeEvery < 0 {
			return fmt.Errorf("agentsite: WithHeadroom: probe period %s must not be negative", probeEvery)
		}
		cfg.headroom = fraction
		if probeEvery > 0 {
			cfg.probe = probeEvery
		}
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
		headroom: DefaultHeadroom,
		probe:    DefaultProbeEvery,
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
		clock:      cfg.clock,
		max:        rate.Limit(cfg.max),
		min:        rate.Limit(cfg.min),
		burst:      cfg.burst,
		factor:     cfg.factor,
		window:     cfg.window,
		recovery:   cfg.recovery,
		headroom:   cfg.headroom,
		probeEvery: cfg.probe,
		limit:      limit,
		tokens:     float64(cfg.burst),
		last:       cfg.clock.Now(),
		changed:    make(chan struct{}),
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
// The request waits as the Priority of ctx (PriorityFrom). It returns a
// *ThrottledError at once when the wait would end after ctx's deadline,
// and ctx's error when ctx is done first.
func (l *Limiter) Wait(ctx context.Context) error {
	start := l.clock.Now()
	p := PriorityFrom(ctx)
	err := l.wait(ctx, p)
	l.metrics.waited(ctx, p.Class, l.clock.Now().Sub(start), err)
	return err
}

// maxSendMargin is the most of a caller's time before its deadline that
// Wait keeps for sending the request: a token granted later would only
// start a request that the deadline cuts short.
const maxSendMargin = time.Second

func (l *Limiter) wait(ctx context.Context, p Priority) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline, hasDeadline := ctx.Deadline()
	l.mu.Lock()
	now := l.clock.Now()
	if l.queue.n == 0 && l.takeLocked(now) {
		l.mu.Unlock()
		return nil
	}
	giveUp := deadline.Add(-max(0, min(maxSendMargin, deadline.Sub(now)/4)))
	w := l.queue.push(p)
	for {
		l.dispatchLocked(now)
		if w.granted {
			l.mu.Unlock()
			return nil
		}
		at, paused := l.expectedLocked(w, now)
		if hasDeadline && at.After(giveUp) {
			l.leaveLocked(w)
			l.mu.Unlock()
			return &ThrottledError{RetryAfter: at.Sub(now), Paused: paused}
		}
		// The first in line watches for the next token; the others sleep
		// until they are granted one, become first, or must give up.
		var wakeAt time.Time
		if l.queue.head() == w {
			wakeAt = l.nextTokenLocked(now)
		}
		if hasDeadline && (wakeAt.IsZero() || giveUp.Before(wakeAt)) {
			wakeAt = giveUp
		}
		changed := l.changed
		l.mu.Unlock()
		err := l.sleep(ctx, w, wakeAt, changed)
		l.mu.Lock()
		if err != nil {
			if w.granted {
				// Granted as ctx ended: the token goes to the next caller.
				l.tokens = min(float64(l.burst), l.tokens+1)
			}
			l.leaveLocked(w)
			l.mu.Unlock()
			return err
		}
		now = l.clock.Now()
	}
}

// takeLocked spends a token at now if the bucket has one and no pause
// holds every caller.
func (l *Limiter) takeLocked(now time.Time) bool {
	if now.Before(l.pausedUntil) {
		return false
	}
	if l.limit == rate.Inf {
		return true
	}
	l.refillLocked(now)
	if l.tokens < 1 {
		return false
	}
	l.tokens--
	return true
}

// dispatchLocked hands the tokens the bucket holds at now to the waiters,
// in the queue's order, and tells the new first in line.
func (l *Limiter) dispatchLocked(now time.Time) {
	for l.queue.n > 0 && l.takeLocked(now) {
		w := l.queue.pop()
		w.granted = true
		w.nudge()
	}
	if h := l.queue.head(); h != nil {
		h.nudge()
	}
}

// leaveLocked takes w out of the queue; whoever is first in line after it
// is told.
func (l *Limiter) leaveLocked(w *waiter) {
	l.queue.remove(w)
	if h := l.queue.head(); h != nil {
		h.nudge()
	}
}

// refillLocked adds the tokens earned since last, up to the burst. During
// a pause last is its end, so nothing is earned before it.
func (l *Limiter) refillLocked(now time.Time) {
	if l.limit == rate.Inf || !now.After(l.last) {
		return
	}
	l.tokens = min(float64(l.burst), l.tokens+now.Sub(l.last).Seconds()*float64(l.limit))
	l.last = now
}

// nextTokenLocked is when the bucket next holds a token: the end of a
// pause, or the time the rate takes to earn the missing part.
func (l *Limiter) nextTokenLocked(now time.Time) time.Time {
	return l.tokenAtLocked(now, 1)
}

// tokenAtLocked is when the bucket has earned its n-th token from now on,
// if nobody else spends one.
func (l *Limiter) tokenAtLocked(now time.Time, n int) time.Time {
	from, have := now, l.tokens
	if now.Before(l.pausedUntil) {
		from = l.pausedUntil
	} else if l.limit != rate.Inf && now.After(l.last) {
		have = min(float64(l.burst), have+now.Sub(l.last).Seconds()*float64(l.limit))
	}
	if l.limit == rate.Inf {
		return from
	}
	missing := float64(n) - have
	if missing <= 0 {
		return from
	}
	return from.Add(time.Duration(math.Ceil(missing / float64(l.limit) * float64(time.Second))))
}

// expectedLocked is when w should get its token, the queue as it stands
// (it may be pushed back by more urgent callers), and whether a pause is
// part of the wait.
func (l *Limiter) expectedLocked(w *waiter, now time.Time) (time.Time, bool) {
	return l.tokenAtLocked(now, l.queue.ahead(w)+1), now.Before(l.pausedUntil)
}

// sleep waits until w is nudged, the time wakeAt (none when zero), a
// change of pause, or ctx's end. Only ctx's end is an error. The timer
// runs to an absolute time, so that the moments between deciding and
// sleeping do not lengthen the wait.
func (l *Limiter) sleep(ctx context.Context, w *waiter, wakeAt time.Time, changed <-chan struct{}) error {
	var timer <-chan time.Time
	if !wakeAt.IsZero() {
		d := wakeAt.Sub(l.clock.Now())
		if d <= 0 {
			return nil
		}
		c, stop := l.clock.NewTimer(d)
		defer stop()
		timer = c
	}
	select {
	case <-w.wake:
		return nil
	case <-timer:
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
		l.setLimitLocked(now, l.max) // the first 429 after WithUnlimitedStart
	} else {
		if !l.lastDecrease.IsZero() && now.Sub(l.lastDecrease) < l.window {
			return
		}
		l.wall = float64(l.limit)
		l.setLimitLocked(now, max(l.min, rate.Limit(float64(l.limit)*l.factor)))
	}
	l.lastDecrease, l.lastProbe = now, now
}

func (l *Limiter) increaseLocked(now time.Time) {
	if l.limit == rate.Inf || l.limit >= l.max {
		return
	}
	top := l.max
	if l.wall > 0 {
		ceiling := rate.Limit(l.wall * (1 - l.headroom))
		if l.limit >= ceiling {
			if now.Sub(l.lastProbe) < l.probeEvery {
				return
			}
			// Held at the ceiling with no 429 for a while: try a little
			// higher, in case the service's limit rose.
			l.wall *= 1 + l.headroom/4
			l.lastProbe = now
			ceiling = rate.Limit(l.wall * (1 - l.headroom))
		}
		top = min(top, max(l.min, ceiling))
	}
	l.setLimitLocked(now, min(top, l.limit+rate.Limit(l.recovery/float64(l.limit))))
}

// setLimitLocked changes the rate at now: the tokens earned so far were
// earned at the old one.
func (l *Limiter) setLimitLocked(now time.Time, r rate.Limit) {
	l.refillLocked(now)
	if l.limit == rate.Inf {
		l.tokens, l.last = float64(l.burst), now
		if now.Before(l.pausedUntil) {
			l.tokens, l.last = 1, l.pausedUntil
		}
	}
	l.limit = r
	// The first in line may be owed its token sooner now.
	if h := l.queue.head(); h != nil {
		h.nudge()
	}
}

func (l *Limiter) pauseLocked(until time.Time) {
	if !until.After(l.pausedUntil) {
		return
	}
	l.metrics.pauses.Add(context.Background(), 1, l.metrics.attrs)
	l.pausedUntil = until
	// One token at the end of the pause: callers resume at the allowed
	// rate, not in one burst, the most urgent first.
	l.tokens, l.last = 1, until
	close(l.changed)
	l.changed = make(chan struct{})
}

// Waiting returns how many callers wait for a token, by class.
func (l *Limiter) Waiting() map[Class]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[Class]int{}
	for c := range l.queue.classes {
		for _, line := range l.queue.classes[c].ring {
			out[Class(c)] += line.waiters.Len()
		}
	}
	return out
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
