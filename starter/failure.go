package starter

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/siteops/siteops/activities"
)

// Failure is the root cause of a failed workflow or activity, as people and
// scripts need it: the innermost message without the SDK's wrapping, its
// error type, and the API's request id when the Agent-Site API answered.
type Failure struct {
	Message string `json:"message"`
	// Type is the error type: one of the activities.ErrType constants, a
	// workflow's own (e.g. InvalidOnboardingSpec), or the SDK's for
	// timeouts, cancellations and terminations.
	Type      string `json:"type,omitempty"`
	Status    int    `json:"status,omitempty"`
	Code      string `json:"code,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

func (f Failure) String() string {
	var b strings.Builder
	b.WriteString(f.Message)
	if f.Type != "" && f.Type != activities.ErrTypeRetryable {
		fmt.Fprintf(&b, " [%s]", f.Type)
	}
	if f.RequestID != "" && !strings.Contains(f.Message, f.RequestID) {
		fmt.Fprintf(&b, " (request id %s)", f.RequestID)
	}
	return b.String()
}

// WorkflowFailedError is a workflow that ended without success; Cause is
// its root cause.
type WorkflowFailedError struct {
	WorkflowID string
	RunID      string
	// Status is how it ended: Failed, TimedOut, Canceled or Terminated.
	Status string
	Cause  Failure
}

func (e *WorkflowFailedError) Error() string {
	return fmt.Sprintf("%s %s: %s", e.WorkflowID, strings.ToLower(e.Status), e.Cause)
}

// RootCause digs the innermost failure out of an error of the Temporal
// SDK: an update's or a workflow's error wraps an activity error that wraps
// the activity's application error, which carries the message to show.
func RootCause(err error) Failure {
	var f Failure
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch x := e.(type) { //nolint:errorlint // walks the chain itself, keeping the innermost
		case *temporal.ApplicationError:
			f = Failure{Message: x.Message(), Type: x.Type()}
			var d activities.APIFailure
			if x.HasDetails() && x.Details(&d) == nil {
				f.Status, f.Code, f.RequestID = d.Status, d.Code, d.RequestID
			}
		case *temporal.TimeoutError:
			f = Failure{Message: "timed out (" + x.TimeoutType().String() + ")", Type: "Timeout"}
		case *temporal.CanceledError:
			f = Failure{Message: "canceled", Type: "Canceled"}
		case *temporal.TerminatedError:
			f = Failure{Message: "terminated", Type: "Terminated"}
		}
	}
	if f.Message == "" && err != nil {
		f.Message = err.Error()
	}
	return f
}

// ErrNotFound is returned when a workflow, incident or rotation asked for
// does not exist.
var ErrNotFound = errors.New("not found")

// ErrStoppedWaiting is returned when the caller's context ended a wait
// while the workflow goes on.
type ErrStoppedWaiting struct {
	WorkflowID string
	Cause      error
}

func (e *ErrStoppedWaiting) Error() string {
	return fmt.Sprintf("stopped waiting; %s continues — siteops status %s", e.WorkflowID, e.WorkflowID)
}

func (e *ErrStoppedWaiting) Unwrap() error { return e.Cause }

// waitErr turns the error of a wait on workflowID into what callers act
// on: a stopped wait when ctx ended it, a not-found, or the workflow's root
// cause.
func waitErr(ctx context.Context, workflowID, runID string, err error) error {
	if err == nil {
		return nil
	}
	var unavailable *UnavailableError
	if errors.As(err, &unavailable) {
		return err // not the workflow's failure: Temporal did not answer
	}
	if ended := ContextEnded(ctx); ended != nil {
		return &ErrStoppedWaiting{WorkflowID: workflowID, Cause: ended}
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("%s: %w", workflowID, ErrNotFound)
	}
	var we *temporal.WorkflowExecutionError
	status := "Failed"
	if errors.As(err, &we) {
		var timeout *temporal.TimeoutError
		var canceled *temporal.CanceledError
		var terminated *temporal.TerminatedError
		switch {
		case errors.As(err, &terminated):
			status = "Terminated"
		case errors.As(err, &canceled):
			status = "Canceled"
		case errors.As(err, &timeout) && errors.Unwrap(we) == timeout: //nolint:errorlint // the workflow's own timeout, not an activity's inside it
			status = "TimedOut"
		}
	}
	return &WorkflowFailedError{WorkflowID: workflowID, RunID: runID, Status: status, Cause: RootCause(err)}
}
