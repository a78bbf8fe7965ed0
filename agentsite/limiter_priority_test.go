package agentsite

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/siteops/siteops/internal/siteopstest"
)

// served runs a Wait as p and sends p to order when it is granted.
func served(t *testing.T, ctx context.Context, l *Limiter, p Priority, order chan<- Priority) {
	t.Helper()
	go func() {
		if err := l.Wait(WithPriority(ctx, p)); err != nil {
			if ctx.Err() == nil {
				t.Errorf("Wait(%+v): %v", p, err)
			}
			return
		}
		order <- p
	}()
}

// waitQueued waits until n callers wait in l.
func waitQueued(t *testing.T, l *Limiter, n int) {
	t.Helper()
	siteopstest.EventuallyNil(t, 5*time.Second, fmt.Sprintf("%d callers waiting", n), func() error {
		if got := queued(l); got != n {
			return fmt.Errorf("%d waiting", got)
		}
		return nil
	})
}

// next advances the clock by a token's time until one caller is served,
// and returns it.
func next(t *testing.T, clock *fakeClock, every time.Duration, order <-chan Priority) Priority {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case p := <-order:
			return p
		case <-time.After(time.Millisecond):
			clock.Advance(every / 10)
		}
	}
	t.Fatal("no caller was served")
	return Priority{}
}

// A playbook call queued behind a hundred bulk calls takes the next token;
// onboarding calls go before bulk ones.
func TestLimiterServesTheMostUrgentClassFirst(t *testing.T) {
	l, clock := newTestLimiter(t, WithMaxRate(10), WithBurst(1))
	if err := l.Wait(t.Context()); err != nil { // the bucket's one token
		t.Fatal(err)
	}
	order := make(chan Priority, 200)
	for i := range 100 {
		served(t, t.Context(), l, Priority{Class: ClassBulk, Key: fmt.Sprint("site_", i%5)}, order)
	}
	waitQueued(t, l, 100)
	served(t, t.Context(), l, Priority{Class: ClassOnboarding, Key: "partner-a"}, order)
	waitQueued(t, l, 101)
	served(t, t.Context(), l, Priority{Class: ClassPlaybook, Key: "site_9"}, order)
	waitQueued(t, l, 102)
	if got := next(t, clock, 100*time.Millisecond, order); got.Class != ClassPlaybook {
		t.Fatalf("the first token went to %+v, want the playbook call", got)
	}
	if got := next(t, clock, 100*time.Millisecond, order); got.Class != ClassOnboarding {
		t.Fatalf("the second token went to %+v, want the onboarding call", got)
	}
	if got := next(t, clock, 100*time.Millisecond, order); got.Class != ClassBulk {
		t.Fatalf("the third token went to %+v, want a bulk call", got)
	}
}

// When a Retry-After pause ends, the one token it leaves goes to the
// playbook call, whatever queued before it.
func TestLimiterPlaybookGoesFirstAfterAPause(t *testing.T) {
	l, clock := newTestLimiter(t, WithMaxRate(10), WithBurst(5))
	l.Observe(http.StatusTooManyRequests, 2*time.Second)
	order := make(chan Priority, 50)
	for i := range 30 {
		served(t, t.Context(), l, Priority{Class: ClassBulk, Key: fmt.Sprint("site_", i%3)}, order)
	}
	waitQueued(t, l, 30)
	served(t, t.Context(), l, Priority{Class: ClassPlaybook, Key: "site_1"}, order)
	waitQueued(t, l, 31)
	clock.Advance(2*time.Second - time.Millisecond)
	select {
	case p := <-order:
		t.Fatalf("%+v went inside the pause", p)
	case <-time.After(50 * time.Millisecond):
	}
	clock.Advance(time.Millisecond)
	select {
	case p := <-order:
		if p.Class != ClassPlaybook {
			t.Fatalf("the pause's token went to %+v, want the playbook call", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("nobody went when the pause ended")
	}
	// The rest resume at the rate: no second caller before the next token.
	select {
	case p := <-order:
		t.Fatalf("%+v went with the playbook call, in a burst", p)
	case <-time.After(50 * time.Millisecond):
	}
}

// Within a class, a key with one call is not held behind another key's
// many calls: it is served within a round of the keys that wait.
func TestLimiterKeysOfAClassTakeTurns(t *testing.T) {
	l, clock := newTestLimiter(t, WithMaxRate(10), WithBurst(1))
	if err := l.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	order := make(chan Priority, 100)
	for range 50 {
		served(t, t.Context(), l, Priority{Class: ClassBulk, Key: "catalogue"}, order)
	}
	waitQueued(t, l, 50)
	served(t, t.Context(), l, Priority{Class: ClassBulk, Key: "small-partner"}, order)
	waitQueued(t, l, 51)
	for i := range 2 {
		if got := next(t, clock, 100*time.Millisecond, order); got.Key == "small-partner" {
			return
		} else if i == 1 {
			t.Fatalf("the second token went to %q too; the other key waits behind it", got.Key)
		}
	}
}

// A bulk caller whose wait grows while it waits (playbook calls arrive
// ahead of it) is refused with a ThrottledError before its deadline, not
// left to run into it; nothing was sent.
func TestLimiterCallerPushedBackIsRefusedBeforeItsDeadline(t *testing.T) {
	l, clock := newTestLimiter(t, WithMaxRate(1), WithMinRate(1), WithBurst(1))
	if err := l.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(t.Context(), clock.Now().Add(8*time.Second))
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- l.Wait(WithPriority(ctx, Priority{Class: ClassBulk, Key: "site_1"})) }()
	waitQueued(t, l, 1)
	order := make(chan Priority, 20)
	for range 10 {
		served(t, t.Context(), l, Priority{Class: ClassPlaybook, Key: "site_2"}, order)
	}
	// The bulk caller may see itself pushed back as the playbook callers
	// arrive (a nudge it had not yet taken when they came) and be refused
	// then, or later as the clock runs: either way before its deadline.
	siteopstest.EventuallyNil(t, 5*time.Second, "10 playbook callers waiting ahead of the bulk one", func() error {
		if got := queued(l); got != 11 && (got != 10 || len(errc) == 0) {
			return fmt.Errorf("%d waiting, the bulk caller refused: %v", got, len(errc) == 1)
		}
		return nil
	})
	var err error
	for err == nil {
		select {
		case err = <-errc:
		case <-order:
		case <-time.After(time.Millisecond):
			clock.Advance(100 * time.Millisecond)
		}
	}
	var te *ThrottledError
	if !errors.As(err, &te) {
		t.Fatalf("Wait = %v, want a *ThrottledError", err)
	}
	if dl, _ := ctx.Deadline(); !clock.Now().Before(dl) {
		t.Errorf("refused %s after the deadline; it should leave time to report", clock.Now().Sub(dl))
	}
	if te.RetryAfter <= 0 {
		t.Errorf("RetryAfter = %s, want the expected wait", te.RetryAfter)
	}
}

// After a 429 the recovery stops short of the rate that was refused, by
// the headroom, and tries higher only after the probe period.
func TestLimiterKeepsHeadroomBelowTheLast429(t *testing.T) {
	l, clock := newTestLimiter(t, WithMaxRate(100), WithStartRate(40), WithRecovery(50), WithHeadroom(0.1, 30*time.Second))
	l.Observe(http.StatusTooManyRequests, 0) // refused at 40: the ceiling is 36
	if got := l.Rate(); got != 20 {
		t.Fatalf("rate after the 429 = %g, want 20", got)
	}
	for range 1000 {
		clock.Advance(time.Millisecond)
		l.Observe(http.StatusOK, 0)
	}
	if got := l.Rate(); got != 36 {
		t.Fatalf("rate after recovering = %g, want 36 (the 429's 40 less 10 %%)", got)
	}
	clock.Advance(30 * time.Second)
	l.Observe(http.StatusOK, 0)
	if got, want := l.Rate(), 40*1.025*0.9; got > want+1e-9 || got <= 36 {
		t.Fatalf("rate after a probe period = %g, want above 36 and at most %g", got, want)
	}
}
