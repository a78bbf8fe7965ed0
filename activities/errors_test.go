package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
)

func TestClassify(t *testing.T) {
	apiErr := func(status int, code string, retryAfter time.Duration) error {
		return fmt.Errorf("wrapped: %w", &agentsite.APIError{Method: "POST", Path: "/api/v1/sites", Status: status, Code: code, RetryAfter: retryAfter})
	}
	tests := []struct {
		name          string
		err           error
		nonRetryable  bool
		typ           string
		nextDelay     time.Duration
		plainRetryErr bool // returned as it is, retried under the policy
	}{
		{"400", apiErr(http.StatusBadRequest, "invalid_json", 0), true, ErrTypeBadRequest, 0, false},
		{"401", apiErr(http.StatusUnauthorized, "", 0), true, ErrTypeUnauthorized, 0, false},
		{"403", apiErr(http.StatusForbidden, "insufficient_scope", 0), true, ErrTypeForbidden, 0, false},
		{"404", apiErr(http.StatusNotFound, "", 0), true, ErrTypeNotFound, 0, false},
		{"422", apiErr(http.StatusUnprocessableEntity, "", 0), true, ErrTypeUnprocessable, 0, false},
		{"409 slug taken", apiErr(http.StatusConflict, "slug_taken", 0), true, ErrTypeConflict, 0, false},
		{"409 in flight", apiErr(http.StatusConflict, "idempotency_in_flight", 0), false, "Retryable", time.Second, false},
		{"409 in flight with Retry-After", apiErr(http.StatusConflict, "idempotency_in_flight", 3*time.Second), false, "Retryable", 3 * time.Second, false},
		{"429 Retry-After", apiErr(http.StatusTooManyRequests, "", 7*time.Second), false, "Retryable", 7 * time.Second, false},
		{"429 without Retry-After", apiErr(http.StatusTooManyRequests, "", 0), false, "Retryable", 5 * time.Second, false},
		{"503 Retry-After", apiErr(http.StatusServiceUnavailable, "", 2*time.Second), false, "Retryable", 2 * time.Second, false},
		{"500", apiErr(http.StatusInternalServerError, "", 0), false, "", 0, true},
		{"502", apiErr(http.StatusBadGateway, "", 0), false, "", 0, true},
		{"302", apiErr(http.StatusFound, "", 0), true, ErrTypeUnexpected, 0, false},
		{"validation", &agentsite.ValidationError{Field: "text", Reason: "short"}, true, ErrTypeInvalidInput, 0, false},
		{"missing key", agentsite.ErrMissingIdempotencyKey, true, ErrTypeMissingKey, 0, false},
		{"contract: stuck cursor", fmt.Errorf("page 3: %w", &agentsite.ContractError{Method: "GET", Path: "/api/v1/sites/s/leads", Problem: "next_cursor repeats", Err: agentsite.ErrCursorStuck}), true, ErrTypeContract, 0, false},
		{"contract: created site without data.id", fmt.Errorf("create: %w", &agentsite.ContractError{Method: "POST", Path: "/api/v1/sites", Problem: "no data.id"}), true, ErrTypeContract, 0, false},
		{"contract: undecodable page", &agentsite.ContractError{Method: "GET", Path: "/api/v1/sites/s/leads", Problem: "not valid JSON"}, true, ErrTypeContract, 0, false},
		{"breaker open", &agentsite.BreakerOpenError{RetryAfter: 12 * time.Second}, false, "Retryable", 12 * time.Second, false},
		{"transport", &agentsite.TransportError{Method: "POST", Path: "/x", Err: errors.New("connection reset")}, false, "", 0, true},
		{"store", errors.New("database is locked"), false, "", 0, true},
		{"secret under another key", fmt.Errorf("retiring: %w", &store.SecretUnreadableError{EndpointID: "we_1", SealedBy: "k2-aaaaaaaaaaaa", KeyID: "k2-bbbbbbbbbbbb"}), false, ErrTypeSecretUnreadable, 0, false},
		{"secret damaged under this key", &store.SecretUnreadableError{EndpointID: "we_1", SealedBy: "k2-bbbbbbbbbbbb", KeyID: "k2-bbbbbbbbbbbb"}, true, ErrTypeSecretUnreadable, 0, false},
		{"cancelled", context.Canceled, false, "", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(tc.err)
			var ae *temporal.ApplicationError
			if tc.plainRetryErr {
				if errors.As(got, &ae) {
					t.Fatalf("classify = application error %v, want the error as it is", got)
				}
				return
			}
			if !errors.As(got, &ae) {
				t.Fatalf("classify = %v (%T), want an ApplicationError", got, got)
			}
			if ae.NonRetryable() != tc.nonRetryable || ae.Type() != tc.typ || ae.NextRetryDelay() != tc.nextDelay {
				t.Errorf("nonRetryable=%v type=%q next=%s; want %v %q %s", ae.NonRetryable(), ae.Type(), ae.NextRetryDelay(), tc.nonRetryable, tc.typ, tc.nextDelay)
			}
		})
	}
	if classify(nil) != nil {
		t.Error("classify(nil) != nil")
	}
}

func TestClassifiedErrorsCarryNoKey(t *testing.T) {
	err := classify(&agentsite.APIError{Method: "GET", Path: "/api/v1/sites/s/leads", Status: 401, Message: "bad key"})
	if s := err.Error(); s == "" || strings.Contains(s, "svc_live_") || strings.Contains(s, "Bearer") {
		t.Errorf("error %q", s)
	}
}
