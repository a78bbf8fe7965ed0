package agentsite

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"
)

// ErrMissingIdempotencyKey is returned, before any request is sent, by a
// mutating method called with an empty idempotency key.
var ErrMissingIdempotencyKey = errors.New("agentsite: an idempotency key is required for every mutating request; derive one from the logical operation (for example <workflowID>/create-site) and reuse it on retries")

// APIError is a non-2xx answer of the API.
type APIError struct {
	Method    string
	Path      string // the request path, e.g. /api/v1/sites/site_1/agent
	Status    int
	RequestID string
	// Code, Message and Field come from the JSON error body when it has them.
	Code    string
	Message string
	Field   string
	// Body is the raw error body, read through a size cap.
	Body []byte
	// RetryAfter is the wait the server asked for with Retry-After on a 429
	// or 503; zero when it gave none.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "agentsite: %s %s: %d %s", e.Method, e.Path, e.Status, http.StatusText(e.Status))
	if e.Code != "" {
		fmt.Fprintf(&b, ": %s", e.Code)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, " (field %s)", e.Field)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, "; retry after %s", e.RetryAfter)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " [request id %s]", e.RequestID)
	}
	return b.String()
}

// Temporary reports whether the same request may succeed later: 409 (the
// same idempotency key is still in flight), 408, 429 and every 5xx.
func (e *APIError) Temporary() bool {
	switch {
	case e.Status == http.StatusConflict, e.Status == http.StatusRequestTimeout, e.Status == http.StatusTooManyRequests:
		return true
	case e.Status >= 500:
		return true
	}
	return false
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
}

func (e *APIError) parseBody() {
	var eb errorBody
	if json.Unmarshal(e.Body, &eb) == nil {
		e.Code, e.Message, e.Field = eb.Error.Code, eb.Error.Message, eb.Error.Field
	}
}

// ValidationError is input refused by the client before any request: it
// names the field and says what a valid value looks like.
type ValidationError struct {
	Field  string // e.g. allowed_origins[1]
	Value  string // the offending value when it is safe and short to show
	Reason string
}

func (e *ValidationError) Error() string {
	if e.Value != "" {
		return fmt.Sprintf("agentsite: invalid %s %q: %s", e.Field, e.Value, e.Reason)
	}
	return fmt.Sprintf("agentsite: invalid %s: %s", e.Field, e.Reason)
}

// BreakerOpenError is returned without sending anything while the circuit
// breaker is open after repeated server failures.
type BreakerOpenError struct {
	// RetryAt is when the breaker lets a trial request through.
	RetryAt time.Time
	// RetryAfter is RetryAt less the time of the call, never negative.
	RetryAfter time.Duration
}

// ErrBreakerOpen matches any *BreakerOpenError with errors.Is.
var ErrBreakerOpen = errors.New("agentsite: circuit breaker open")

func (e *BreakerOpenError) Error() string {
	return fmt.Sprintf("agentsite: circuit breaker open after repeated failures of the Agent-Site API; nothing was sent; try again in %s (at %s)",
		e.RetryAfter.Round(time.Millisecond), e.RetryAt.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrBreakerOpen) true.
func (e *BreakerOpenError) Is(target error) bool { return target == ErrBreakerOpen }

// ErrContractViolation matches every *ContractError with errors.Is.
var ErrContractViolation = errors.New("agentsite: the answer breaks the API contract")

// ErrCursorStuck is wrapped by the *ContractError a paged list (leads,
// webhook endpoints) returns when the server hands back a cursor the
// iteration has already followed, which would read the same pages for ever.
var ErrCursorStuck = errors.New("agentsite: the API returned a next_cursor it had already returned; stopping instead of looping")

// ContractError is a 2xx answer that breaks the API contract: a body that
// does not decode into what the contract says, a created site without
// data.id, a created webhook endpoint without its id or one-time whsec_
// secret, a publish that does not answer published, a record without the
// id the client keys it by, a cursor that leads back to a page already
// read. Every resource method that checks a 2xx body returns it, so that
// callers tell it apart with one errors.As (or errors.Is with
// ErrContractViolation). Sending the same request again gets the same
// answer (an idempotent replay of it, for a mutation), so it is not worth
// retrying; Problem says what the API did wrong, for a report to
// Agent-Site. It never holds the body, which may carry personal data or a
// signing secret.
type ContractError struct {
	Method    string
	Path      string // the request path, e.g. /api/v1/sites/site_1/leads
	RequestID string
	Problem   string
	// Err is the decoding error or sentinel behind Problem, when there is one.
	Err error
}

func (e *ContractError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "agentsite: %s %s: the answer breaks the API contract: %s", e.Method, e.Path, e.Problem)
	if e.RequestID != "" {
		fmt.Fprintf(&b, " [request id %s]", e.RequestID)
	}
	b.WriteString("; retrying gets the same answer: report it to Agent-Site")
	return b.String()
}

// Unwrap returns the error behind Problem.
func (e *ContractError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrContractViolation) true.
func (e *ContractError) Is(target error) bool { return target == ErrContractViolation }

// contractError is the one way a resource method reports a 2xx answer that
// breaks the contract. meta may be nil when the problem is found after the
// answers (a cursor that loops).
func (c *Client) contractError(r *request, meta *Response, problem string, err error) *ContractError {
	ce := &ContractError{Method: r.method, Path: c.base.EscapedPath() + apiPrefix + r.path, Problem: problem, Err: err}
	if meta != nil {
		ce.RequestID = meta.RequestID
	}
	return ce
}

// decodeProblem says where decoding a 2xx body failed without quoting the
// body.
func decodeProblem(err error) string {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		field := typ.Field
		if field == "" {
			field = "the body"
		}
		want := typ.Type.Kind().String()
		switch typ.Type.Kind() {
		case reflect.Struct, reflect.Map:
			want = "an object"
		case reflect.Slice, reflect.Array:
			want = "an array"
		case reflect.String:
			want = "a string"
		}
		return fmt.Sprintf("%s is a JSON %s where %s belongs", field, typ.Value, want)
	}
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return fmt.Sprintf("the body is not valid JSON (at byte %d)", syntax.Offset)
	}
	return err.Error()
}
