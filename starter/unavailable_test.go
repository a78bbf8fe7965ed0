package starter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
)

// TestPatiently checks what Patiently retries (Temporal unavailable) and
// what it returns at once (everything else), and how it gives up.
func TestPatiently(t *testing.T) {
	unavailable := serviceerror.NewUnavailable(`connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`)
	refused := serviceerror.NewInvalidArgument("bad input")
	for _, tc := range []struct {
		name      string
		patience  time.Duration
		errs      []error // what the tries return, the last one for ever
		wantTries int
		want      func(err error) bool
	}{
		{"back before the patience ends", 10 * time.Second, []error{unavailable, unavailable, nil}, 3,
			func(err error) bool { return err == nil }},
		{"a refusal at once", 10 * time.Second, []error{refused}, 1,
			func(err error) bool { return errors.Is(err, refused) }},
		{"unavailable for longer than the patience", 1200 * time.Millisecond, []error{unavailable}, 3,
			func(err error) bool {
				var u *UnavailableError
				return errors.As(err, &u) && u.Attempts == 3 && strings.Contains(err.Error(), "Temporal at 127.0.0.1:7233 (namespace default) is unavailable: starting onboarding/x failed 3 time(s)") &&
					strings.Contains(err.Error(), "Unavailable: transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused")
			}},
		{"no patience: the error as it is", 0, []error{unavailable}, 1,
			func(err error) bool { return errors.Is(err, unavailable) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{Patience: tc.patience, Address: "127.0.0.1:7233"})
			tries := 0
			err := s.Patiently(t.Context(), "starting onboarding/x", func() error {
				e := tc.errs[min(tries, len(tc.errs)-1)]
				tries++
				return e
			})
			if tries != tc.wantTries || !tc.want(err) {
				t.Errorf("%d tries, error %v; want %d tries", tries, err, tc.wantTries)
			}
		})
	}
}

// TestPatientlyStopsWhenInterrupted checks that Ctrl-C (a cancelled
// context) ends the retries with the cancellation, not an outage.
func TestPatientlyStopsWhenInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s := New(Options{Patience: time.Minute})
	tries := 0
	err := s.Patiently(ctx, "starting onboarding/x", func() error {
		tries++
		cancel()
		return serviceerror.NewUnavailable("down")
	})
	if tries != 1 || !errors.Is(err, context.Canceled) {
		t.Errorf("%d tries, error %v; want one try and the interruption", tries, err)
	}
}

// TestRetryKeepsTheCauseOfAWholeTry checks that a try the caller's
// deadline cuts short does not take the place of what the try before it
// found: a connection refused stays the cause, not "no answer".
func TestRetryKeepsTheCauseOfAWholeTry(t *testing.T) {
	refused := serviceerror.NewUnavailable(`connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`)
	ctx, cancel := context.WithTimeout(t.Context(), retryInterval+300*time.Millisecond)
	defer cancel()
	e := &UnavailableError{Address: "127.0.0.1:1", What: Connecting}
	tries := 0
	err := Retry(ctx, time.Minute, e, nil, func() error {
		tries++
		if tries == 1 {
			return refused
		}
		<-ctx.Done() // the second try gets no answer before the deadline
		return ctx.Err()
	}, func(err error, again bool) (bool, error) {
		return IsUnavailable(ctx, err) || (again && ctx.Err() != nil), err
	})
	var u *UnavailableError
	if !errors.As(err, &u) || u.Attempts != 2 || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "no answer") {
		t.Errorf("%d tries, error %v; want an *UnavailableError after 2 tries naming the connection refused", tries, err)
	}
}

// deadlinePassed is a context whose deadline has passed while its own
// timer has not fired yet (Err is still nil): what the caller sees for a
// moment when the SDK's call, under a context of its own with the same
// deadline, ends first.
type deadlinePassed struct{ context.Context }

func (deadlinePassed) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// TestADeadlineThatPassedIsTheCallers: a call that ran out of time as the
// caller's deadline passed is the caller's deadline, not Temporal
// unavailable, and a wait that ends so stopped waiting (--timeout: exit 1),
// even before the caller's context says so itself.
func TestADeadlineThatPassedIsTheCallers(t *testing.T) {
	noAnswer := serviceerror.NewDeadlineExceeded("context deadline exceeded")
	if IsUnavailable(deadlinePassed{context.Background()}, noAnswer) {
		t.Error("no answer as the caller's deadline passed counts as Temporal unavailable")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if !IsUnavailable(ctx, noAnswer) {
		t.Error("no answer within the call's own deadline, with an hour left, does not count as Temporal unavailable")
	}
	var stopped *ErrStoppedWaiting
	if err := waitErr(deadlinePassed{context.Background()}, "onboarding/acme", "run", noAnswer); !errors.As(err, &stopped) || !errors.Is(stopped.Cause, context.DeadlineExceeded) {
		t.Errorf("a wait whose deadline passed = %v; want it to have stopped waiting, at the deadline", err)
	}
}

// TestRetryThatEndsAtTheDeadlineSaysUnavailable: a retried call whose last
// try ends as the caller's deadline passes (its context's timer not fired
// yet) ends as Temporal unavailable with the cause of the try before it,
// not with the last try's bare "deadline exceeded". retryable is the
// connection's (wiring's dialUnavailable): after an earlier try found
// Temporal unavailable, a try that the deadline ended still did.
func TestRetryThatEndsAtTheDeadlineSaysUnavailable(t *testing.T) {
	refused := serviceerror.NewUnavailable("connection refused")
	var ctx context.Context
	ctx = context.Background()
	at := deadlineAfter{&ctx}
	tries := 0
	e := &UnavailableError{Address: "127.0.0.1:1", Namespace: "default", What: Connecting}
	err := Retry(at, time.Hour, e, nil, func() error {
		tries++
		if tries == 2 {
			ctx = deadlinePassed{context.Background()} // the deadline passes during the second try
			return serviceerror.NewDeadlineExceeded("context deadline exceeded")
		}
		return refused
	}, func(err error, again bool) (bool, error) {
		return again && ContextEnded(at) != nil || IsUnavailable(at, err), err
	})
	var gaveUp *UnavailableError
	if !errors.As(err, &gaveUp) || !errors.Is(gaveUp.Err, refused) || gaveUp.Attempts != 2 {
		t.Errorf("after %d tries: %v; want Temporal unavailable after 2 tries, for the first's connection refused", tries, err)
	}
}

// deadlineAfter is the context *ctx is: a test swaps it mid-call.
type deadlineAfter struct{ ctx *context.Context }

func (d deadlineAfter) Deadline() (time.Time, bool) { return (*d.ctx).Deadline() }
func (d deadlineAfter) Done() <-chan struct{}       { return (*d.ctx).Done() }
func (d deadlineAfter) Err() error                  { return (*d.ctx).Err() }
func (d deadlineAfter) Value(k any) any             { return (*d.ctx).Value(k) }

// TestTryTimeout: one call under Patiently gets half the patience, between
// 1 s and 10 s, so that a call that gets no answer within --timeout 6s
// ends after 3 s, while the caller still has time, and counts as Temporal
// unavailable rather than as the caller's deadline.
func TestTryTimeout(t *testing.T) {
	for patience, want := range map[time.Duration]time.Duration{
		500 * time.Millisecond: time.Second,
		4 * time.Second:        2 * time.Second,
		6 * time.Second:        3 * time.Second,
		20 * time.Second:       10 * time.Second,
		time.Minute:            10 * time.Second,
	} {
		if got := TryTimeout(patience); got != want {
			t.Errorf("TryTimeout(%s) = %s, want %s", patience, got, want)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
	defer cancel()
	noAnswer := serviceerror.NewDeadlineExceeded("context deadline exceeded")
	if !IsUnavailable(ctx, noAnswer) {
		t.Error("a call that ended at its own TryTimeout, with the caller's time left, does not count as Temporal unavailable")
	}
}
