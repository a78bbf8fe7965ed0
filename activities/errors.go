package activities

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
)

// Error types of non-retryable activity failures, for workflows and callers
// to match with temporal.ApplicationError.Type().
const (
	ErrTypeInvalidInput   = "InvalidInput"  // refused by client-side validation
	ErrTypeBadRequest     = "BadRequest"    // 400
	ErrTypeUnauthorized   = "Unauthorized"  // 401: the API key is wrong
	ErrTypeForbidden      = "Forbidden"     // 403: the API key lacks a scope
	ErrTypeNotFound       = "NotFound"      // 404
	ErrTypeUnprocessable  = "Unprocessable" // 422
	ErrTypeConflict       = "Conflict"      // 409 that a retry cannot fix (e.g. slug taken)
	ErrTypeUnexpected     = "UnexpectedAnswer"
	ErrTypeMissingKey     = "MissingIdempotencyKey"
	ErrTypeMissingText    = "KnowledgeTextMissing"
	ErrTypeSecretKey      = "SecretKey"         // SITEOPS_SECRET_KEY missing or not the stored secrets' key
	ErrTypeStalled        = "LeadSyncStalled"   // no page read for the stall timeout
	ErrTypeContract       = "ContractViolation" // a 2xx answer that breaks the API contract: retrying gets the same answer
	ErrTypeRetryable      = "Retryable"         // a transient failure, retried after a delay the service asked for
	defaultInFlightRetry  = time.Second
	defaultThrottledRetry = 5 * time.Second
)

// ErrTypeSecretUnreadable is the failure of an activity that was to
// rewrite (retire) a stored secret that does not open with the worker's
// SITEOPS_SECRET_KEY: it left the secret as it was. Retryable when the
// secret was sealed under another key: the key is the worker's, not the
// input's, so another worker (or this one, restarted with the right key)
// may do it, and a rotation waits for that rather than failing half done.
// Non-retryable when it was sealed under this very key yet does not open:
// its row was changed outside siteops, and no key fixes that.
const ErrTypeSecretUnreadable = "SecretUnreadable"

// classify turns an error of the client or the store into what Temporal
// should do with it. It is the only place that decides retryability.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var (
		apiErr    *agentsite.APIError
		valErr    *agentsite.ValidationError
		openErr   *agentsite.BreakerOpenError
		throttled *agentsite.ThrottledError
		sealed    *store.SecretUnreadableError
	)
	switch {
	case errors.As(err, &sealed) && sealed.Damaged():
		return nonRetryable(ErrTypeSecretUnreadable, err)
	case errors.As(err, &sealed):
		return temporal.NewApplicationErrorWithOptions(err.Error(), ErrTypeSecretUnreadable, temporal.ApplicationErrorOptions{})
	case errors.As(err, &valErr):
		return nonRetryable(ErrTypeInvalidInput, err)
	case errors.Is(err, agentsite.ErrMissingIdempotencyKey):
		return nonRetryable(ErrTypeMissingKey, err)
	case errors.Is(err, agentsite.ErrContractViolation):
		// Every 2xx that breaks the contract, from any resource: a body
		// that does not decode, a created site without data.id, a created
		// endpoint without its id or one-time secret, a lead without an
		// id, a cursor that loops. The same request gets the same answer
		// (a mutation's is replayed under its idempotency key), so fail at
		// once rather than retry 12 times, until the stall timeout, or for
		// ever when each attempt stores a page again.
		return nonRetryable(ErrTypeContract, err)
	case errors.As(err, &openErr):
		return retryAfter(err, openErr.RetryAfter)
	case errors.As(err, &throttled):
		// Nothing was sent: the key's shared limit is paused or full for
		// longer than this attempt has left.
		return retryAfter(err, max(throttled.RetryAfter, time.Second))
	case errors.As(err, &apiErr):
		return classifyAPI(apiErr, err)
	case errors.Is(err, context.Canceled):
		return err
	}
	// Transport errors, timeouts and store errors: retry under the policy.
	return err
}

func classifyAPI(apiErr *agentsite.APIError, err error) error {
	switch apiErr.Status {
	case http.StatusBadRequest:
		return nonRetryable(ErrTypeBadRequest, err)
	case http.StatusUnauthorized:
		return nonRetryable(ErrTypeUnauthorized, fmt.Errorf("%w; check AGENTSITE_API_KEY", err))
	case http.StatusForbidden:
		return nonRetryable(ErrTypeForbidden, fmt.Errorf("%w; give the API key the scope named above", err))
	case http.StatusNotFound:
		return nonRetryable(ErrTypeNotFound, err)
	case http.StatusUnprocessableEntity:
		return nonRetryable(ErrTypeUnprocessable, err)
	case http.StatusConflict:
		if apiErr.Code == "slug_taken" {
			return nonRetryable(ErrTypeConflict, err)
		}
		// The same idempotency key is still being processed: retry soon.
		return retryAfter(err, max(apiErr.RetryAfter, defaultInFlightRetry))
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		d := apiErr.RetryAfter
		if d == 0 {
			d = defaultThrottledRetry
		}
		return retryAfter(err, d)
	}
	if apiErr.Status >= 500 || apiErr.Status == http.StatusRequestTimeout {
		return err
	}
	return nonRetryable(ErrTypeUnexpected, err)
}

// APIFailure is the detail a classified error carries when the API
// answered: what callers (the CLI's status, Go callers) show besides the
// message, without parsing it.
type APIFailure struct {
	Method    string `json:"method"`
	Path      string `json:"path"`
	Status    int    `json:"status"`
	Code      string `json:"code,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

func details(err error) []any {
	var apiErr *agentsite.APIError
	if !errors.As(err, &apiErr) {
		return nil
	}
	return []any{APIFailure{Method: apiErr.Method, Path: apiErr.Path, Status: apiErr.Status, Code: apiErr.Code, RequestID: apiErr.RequestID}}
}

func nonRetryable(typ string, err error) error {
	return temporal.NewApplicationErrorWithOptions(err.Error(), typ, temporal.ApplicationErrorOptions{NonRetryable: true, Details: details(err)})
}

func retryAfter(err error, d time.Duration) error {
	return temporal.NewApplicationErrorWithOptions(err.Error(), ErrTypeRetryable, temporal.ApplicationErrorOptions{NextRetryDelay: d, Details: details(err)})
}

// failureReason is the class of an error of the client or the store as a
// short token for records and the overview ("http_500", "network",
// "timeout", ...): never its message, which may quote a body.
func failureReason(err error) string {
	var (
		apiErr  *agentsite.APIError
		valErr  *agentsite.ValidationError
		openErr *agentsite.BreakerOpenError
		netErr  net.Error
	)
	switch {
	case errors.As(err, &apiErr):
		return fmt.Sprintf("http_%d", apiErr.Status)
	case errors.As(err, &valErr):
		return "invalid_input"
	case errors.Is(err, agentsite.ErrContractViolation):
		return "contract_violation"
	case errors.As(err, &openErr):
		return "breaker_open"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.As(err, &netErr):
		return "network"
	}
	return "error"
}
