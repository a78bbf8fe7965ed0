package nexus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	nexusrpc "github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/sdk/temporal"

	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

// refused is a request the service will not carry out, as a Nexus handler
// error of kind t that no retry can fix. Its cause is an application error
// of errType, so that a caller workflow tells it apart with errors.As (the
// server passes the cause on, not the handler error's own message).
func refused(t nexusrpc.HandlerErrorType, errType, msg string, details ...any) error {
	return &nexusrpc.HandlerError{
		Type: t, Message: msg, RetryBehavior: nexusrpc.HandlerErrorRetryBehaviorNonRetryable,
		Cause: temporal.NewNonRetryableApplicationError(msg, errType, nil, details...),
	}
}

// badInput refuses an input that is incomplete or malformed.
func badInput(format string, args ...any) error {
	return refused(nexusrpc.HandlerErrorTypeBadRequest, api.ErrTypeInvalidInput, fmt.Sprintf(format, args...))
}

// handlerError turns what the starter (or the client) returned into what a
// Nexus caller acts on: an input that breaks the contract, a spec that
// conflicts with the slug's onboarding and a decision that does not apply
// are BAD_REQUEST; a missing onboarding, lead sync or incident NOT_FOUND;
// a workflow that ran and did not succeed a failed (or canceled) operation
// carrying its root cause. Anything else (Temporal unavailable, say) is
// left to the SDK, which makes service errors retryable handler errors of
// their kind.
func handlerError(err error) error {
	var (
		he       *nexusrpc.HandlerError
		oe       *nexusrpc.OperationError
		invalid  *starter.InvalidSpecError
		conflict *starter.SpecConflictError
		rejected *starter.RejectedError
		failed   *starter.WorkflowFailedError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &he), errors.As(err, &oe):
		return err
	case errors.As(err, &invalid):
		return refused(nexusrpc.HandlerErrorTypeBadRequest, api.ErrTypeInvalidSpec, invalid.Error(), invalid.Problems)
	case errors.As(err, &conflict):
		return refused(nexusrpc.HandlerErrorTypeBadRequest, api.ErrTypeSpecConflict, specConflictMessage(conflict), conflict.Differences)
	case errors.As(err, &rejected):
		return refused(nexusrpc.HandlerErrorTypeBadRequest, api.ErrTypeRejected, rejected.Error())
	case errors.Is(err, starter.ErrNotFound):
		return refused(nexusrpc.HandlerErrorTypeNotFound, api.ErrTypeNotFound, err.Error())
	case errors.As(err, &failed):
		cause := temporal.NewNonRetryableApplicationError(failed.Cause.Message, failed.Cause.Type, nil, api.Failure(failed.Cause))
		if failed.Status == "Canceled" {
			return &nexusrpc.OperationError{State: nexusrpc.OperationStateCanceled, Message: failed.Error(), Cause: cause}
		}
		return &nexusrpc.OperationError{State: nexusrpc.OperationStateFailed, Message: failed.Error(), Cause: cause}
	}
	return err
}

// specConflictMessage says what a partner can do about a slug onboarded
// from another spec. The starter's own message points on-call at `siteops
// status`, a command of siteops' CLI that partners do not have; a partner
// has the operation onboarding-status and the choice of another slug.
func specConflictMessage(c *starter.SpecConflictError) string {
	slug := strings.TrimPrefix(c.WorkflowID, workflows.OnboardingKind.Prefix)
	return fmt.Sprintf("%s was started with a different spec (%s differ); a slug is onboarded once — onboard under another slug, or read how %s stands with the operation %s {\"slug\": %q}",
		c.WorkflowID, strings.Join(c.Differences, ", "), c.WorkflowID, api.OnboardingStatusName, slug)
}

// convert copies a value into the type that mirrors it (an api type and a
// workflows type write the same JSON); a field one side lacks is an error,
// not a silent loss.
func convert(from, to any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(to)
}

// required refuses a request that lacks one of the named fields, given
// as name, value pairs.
func required(pairs ...string) error {
	var missing []string
	for i := 0; i+1 < len(pairs); i += 2 {
		if strings.TrimSpace(pairs[i+1]) == "" {
			missing = append(missing, pairs[i])
		}
	}
	if len(missing) > 0 {
		return badInput("%s: is required", strings.Join(missing, ", "))
	}
	return nil
}
