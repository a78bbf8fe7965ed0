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
			s := &Starter{Patience: tc.patience, Address: "127.0.0.1:7233"}
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
	s := &Starter{Patience: time.Minute}
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
