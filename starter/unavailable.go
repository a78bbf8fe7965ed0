package starter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// Connecting is the What of an *UnavailableError for a connection that
// could not be made.
const Connecting = "connecting"

// UnavailableError is Temporal not answering, or answering Unavailable,
// for as long as the starter was willing to retry (Patience, or until the
// caller's context ended). Nothing in it was refused: the same request may
// succeed once Temporal is back.
type UnavailableError struct {
	// Address is Temporal's frontend, "" when not known.
	Address   string
	Namespace string
	// What is what was tried, e.g. "starting onboarding/acme".
	What     string
	Attempts int
	// For is how long Temporal was unavailable: from the start of the
	// first failed try to giving up.
	For time.Duration
	// Err is the last try's error (of the one before it when ctx cut the
	// last one short); Waited the longest a try waited for an answer.
	Err    error
	Waited time.Duration
	// Said is what Temporal answered one request sent without the SDK's
	// retries, when the tries themselves got no answer: the SDK retries an
	// Unavailable answer until the call's deadline and then reports only
	// the deadline.
	Said error
}

func (e *UnavailableError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s is unavailable: %s failed %d time(s) over %s, the last with %s",
		e.temporal(), e.What, e.Attempts, roundDuration(e.For), Unavailability(e.Err, e.Waited))
	if e.Said != nil {
		fmt.Fprintf(&b, "; asked once without retries, it answered %s", Unavailability(e.Said, 0))
	}
	if e.What == Connecting {
		b.WriteString("; check the address (TEMPORAL_ADDRESS, --address or the profile's) and")
	} else {
		b.WriteString(";")
	}
	b.WriteString(" check that the Temporal server is up (frontend and history service)")
	if e.Address != "" {
		b.WriteString(": temporal operator cluster health --address " + e.Address)
	}
	b.WriteString(", or give it longer with --timeout")
	return b.String()
}

// temporal names the server: "Temporal at HOST:PORT (namespace NS)".
func (e *UnavailableError) temporal() string {
	if e.Address == "" {
		return "Temporal"
	}
	at := "Temporal at " + e.Address
	if e.Namespace != "" {
		at += " (namespace " + e.Namespace + ")"
	}
	return at
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Warning is the line a command shows at the first failed try, before it
// tries again.
func (e *UnavailableError) Warning(patience time.Duration) string {
	return fmt.Sprintf("%s is unavailable (%s: %s); retrying for up to %s", e.temporal(), e.What, Unavailability(e.Err, e.Waited), roundDuration(patience))
}

// Unavailability words why a call to Temporal failed for a person: the
// Unavailable answer and its innermost cause (e.g. connection refused), or
// no answer within the time it waited.
func Unavailability(err error, waited time.Duration) string {
	var unavailable *serviceerror.Unavailable
	switch {
	case errors.As(err, &unavailable):
		return "Unavailable: " + innermost(unavailable.Message)
	case grpcstatus.Code(err) == codes.Unavailable:
		return "Unavailable: " + innermost(grpcstatus.Convert(err).Message())
	case waited > 0:
		return fmt.Sprintf("no answer within %s", roundDuration(waited))
	}
	return "no answer"
}

// answered reports whether Temporal answered err (Unavailable) rather than
// leaving the call to its deadline.
func answered(err error) bool {
	var unavailable *serviceerror.Unavailable
	return errors.As(err, &unavailable) || grpcstatus.Code(err) == codes.Unavailable
}

// IsUnavailable reports whether err, from a call to Temporal made under
// ctx, says that Temporal is unavailable rather than that it refused the
// request: it answered Unavailable (a connection that cannot be made, a
// service that is down), or the call got no answer within its own
// deadline while ctx still had time. A deadline of ctx itself is the
// caller's, not Temporal's: also when ctx's deadline has passed but its
// own timer has not fired yet. The SDK's call runs under a context of its
// own with the same deadline, whose timer can fire first; `onboard --wait
// --timeout 5s` then said Temporal gave no answer within 5 s (exit 5)
// instead of that it stopped waiting (exit 1).
func IsUnavailable(ctx context.Context, err error) bool {
	if err == nil || ContextEnded(ctx) != nil {
		return false
	}
	var (
		gaveUp      *UnavailableError
		unavailable *serviceerror.Unavailable
		deadline    *serviceerror.DeadlineExceeded
	)
	switch {
	case errors.As(err, &gaveUp):
		return false // retried already, for as long as it was allowed
	case errors.As(err, &unavailable), errors.As(err, &deadline), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	switch grpcstatus.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// ContextEnded is ctx.Err(), or context.DeadlineExceeded once ctx's
// deadline has passed though its timer has not fired yet: whoever asks
// whether the caller's time is up asks this, not ctx.Err(), or a try that
// ends just as the deadline passes is told apart from one that ends a
// moment later.
func ContextEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if deadline, ok := ctx.Deadline(); ok && !time.Now().Before(deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// retryInterval is the first wait between two tries while Temporal is
// unavailable; it doubles up to maxRetryInterval.
const (
	retryInterval    = 500 * time.Millisecond
	maxRetryInterval = 5 * time.Second
)

// TryTimeout is the longest one call to Temporal may take, the SDK's
// retries included, in a starter with patience (the client's
// RPCTimeout): half the patience, between 1 s and 10 s. A call that gets
// no answer, or only Unavailable, then ends with a deadline of its own
// while the caller still has time, which IsUnavailable counts as Temporal
// unavailable; Patiently tries again, asks once without retries (ask),
// and gives up with an *UnavailableError. Without it the call runs until
// the caller's deadline, and a command whose --timeout ends during it
// says that it stopped waiting (exit 1) although Temporal never answered.
// SDK v1.50 and before gave every call half of its context's remaining
// time, so; v1.51 gives it the caller's deadline (or 10 s).
func TryTimeout(patience time.Duration) time.Duration {
	return min(max(patience/2, minTryTimeout), maxTryTimeout)
}

const (
	minTryTimeout = time.Second
	maxTryTimeout = 10 * time.Second
)

// Patiently runs call, and while Temporal is unavailable (IsUnavailable)
// runs it again with backoff, for at most s.o.Patience from the start of the
// first failed try and never past ctx. It then returns an
// *UnavailableError naming what (e.g. "starting onboarding/acme"). call
// must be safe to repeat: a request whose workflow or update ID derives
// from the request, so that a try whose answer was lost is joined, not
// applied twice. The starter's own methods use it where that holds;
// callers may wrap other calls that do. With no Patience it runs call once
// and returns its error as it is.
func (s *Starter) Patiently(ctx context.Context, what string, call func() error) error {
	if s.o.Patience <= 0 {
		return call()
	}
	e := &UnavailableError{Address: s.o.Address, Namespace: s.namespace(), What: what}
	return retry(ctx, s.o.Patience, e, s.o.Retrying, call, func(err error, again bool) (bool, error) {
		switch {
		case errors.Is(ctx.Err(), context.Canceled):
			if IsUnavailable(context.Background(), err) {
				return false, ctx.Err() // interrupted: the person stopped it, not Temporal
			}
			return false, err
		case IsUnavailable(ctx, err):
			return true, nil
		case again && ContextEnded(ctx) != nil:
			// ctx ran out during a try after earlier ones found Temporal
			// unavailable: it still was.
			return true, nil
		}
		return false, err
	}, s.ask)
}

// Retry is Patiently's loop for a call that is not the starter's, such as
// connecting to Temporal: it runs call, and while retryable says that its
// error is Temporal being unavailable runs it again with backoff, for at
// most patience from the start of the first failed try and never past
// ctx; then it returns e with the tries filled in. retryable is told
// whether an earlier try found Temporal unavailable already; when it says
// not to try again, Retry returns the error it gives. retrying, when set,
// is told once, after the first failed try.
func Retry(ctx context.Context, patience time.Duration, e *UnavailableError, retrying func(msg string), call func() error, retryable func(err error, again bool) (bool, error)) error {
	return retry(ctx, patience, e, retrying, call, retryable, nil)
}

// retry is Retry, and after a try that got no answer asks Temporal once
// without the SDK's retries what it says (ask), when ask is given.
func retry(ctx context.Context, patience time.Duration, e *UnavailableError, retrying func(msg string), call func() error,
	retryable func(err error, again bool) (bool, error), ask func(ctx context.Context, within time.Duration) error) error {
	var (
		first    time.Time
		attempts int
		wait     = retryInterval
	)
	for {
		began := time.Now()
		err := call()
		attempts++
		if err == nil {
			return nil
		}
		if again, err := retryable(err, !first.IsZero()); !again {
			return err
		}
		if first.IsZero() {
			first = began
		}
		// A try that ctx cut short says nothing of Temporal: the one
		// before it, when there was one, names the cause.
		if e.Err == nil || ContextEnded(ctx) == nil {
			e.Err = err
		}
		e.Attempts, e.Waited = attempts, max(e.Waited, time.Since(began))
		left := patience - time.Since(first)
		if ask != nil && ctx.Err() == nil && left > 0 && !answered(err) {
			e.Said = ask(ctx, min(time.Second, left))
		}
		e.For = time.Since(first)
		if ContextEnded(ctx) != nil || left <= 0 {
			return e
		}
		if attempts == 1 && retrying != nil {
			retrying(e.Warning(patience))
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return ctx.Err()
			}
			e.For = time.Since(first)
			return e
		case <-time.After(min(wait, time.Until(first.Add(patience)))):
		}
		wait = min(2*wait, maxRetryInterval)
	}
}

// probeWorkflowID is the workflow ask describes: any ID is served by the
// history service, and this one is never started, so the answer is
// NotFound when the history service is up.
const probeWorkflowID = "siteops-availability-probe"

// ask sends one request that the history service answers, without the
// SDK's retries (they apply only to contexts the SDK made), and returns
// what Temporal said when it was more than no answer, or nil.
func (s *Starter) ask(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	_, err := s.o.Client.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: s.namespace(), Execution: &commonpb.WorkflowExecution{WorkflowId: probeWorkflowID},
	})
	if answered(err) {
		return err
	}
	return nil
}

// innermost keeps the innermost cause of a gRPC error message, the part a
// person can act on ("connection refused").
func innermost(msg string) string {
	if i := strings.LastIndex(msg, "desc = "); i >= 0 {
		msg = msg[i+len("desc = "):]
	}
	return strings.Trim(strings.ReplaceAll(msg, "\n", " "), `" `)
}

// roundDuration rounds d for a message: tenths of a second below ten
// seconds, whole seconds above.
func roundDuration(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}
