package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/wiring"
	"github.com/siteops/siteops/workflows"
)

// Exit codes, documented in the README and in `siteops --help`.
const (
	exitOK          = 0   // success
	exitFailed      = 1   // the operation failed (or a wait timed out)
	exitUsage       = 2   // usage or invalid input
	exitNotFound    = 3   // the site, workflow, incident, endpoint, event or store does not exist
	exitAuth        = 4   // Temporal or Agent-Site refused the credentials or a scope
	exitUnreachable = 5   // Temporal, the API or the database cannot be reached
	exitInterrupted = 130 // interrupted (Ctrl-C); workflows go on
)

// exitCodesHelp is the README's table of exit codes, word for word
// (TestExitCodesHelpMatchesTheREADME).
const exitCodesHelp = `Exit codes:
  0    success (also: the same spec onboarded before, "already onboarded")
  1    the operation failed, or --timeout ended a wait, or a rotation
       stopped for on-call's decision (the workflow goes on), or a question
       answered other than yes (nothing changed)
  2    usage or invalid input: bad flags, a setting (also SITEOPS_SECRET_KEY
       unset where it is needed), a spec that breaks the contract, a
       different spec for a slug, a command that asks first run without
       --yes where it cannot ask (nothing changed)
  3    not found: site, workflow, incident, rotation, endpoint, event, or a
       store that no worker or ingress made
  4    authentication or permission: Temporal (API key, certificate) or
       Agent-Site (401/403), or a SITEOPS_SECRET_KEY that cannot read the
       stored secrets
  5    unreachable: Temporal (also unavailable or without an answer until
       --timeout), the Agent-Site API, the database
  130  interrupted (Ctrl-C): "stopped waiting; onboarding/x continues —
       siteops status onboarding/x"`

// usageError is a mistake in how a command was called.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// reported ends the process with code after the command has already said
// what went wrong.
type reported struct{ code int }

func (e reported) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitCode maps an error to the documented exit codes.
func exitCode(err error) int {
	var (
		rep       reported
		usage     usageError
		stopped   *starter.ErrStoppedWaiting
		failed    *starter.WorkflowFailedError
		invalid   *starter.InvalidSpecError
		conflict  *starter.SpecConflictError
		rejected  *starter.RejectedError
		policy    *starter.PolicyError
		apiErr    *agentsite.APIError
		valErr    *agentsite.ValidationError
		transport *agentsite.TransportError
		nf        *serviceerror.NotFound
		denied    *serviceerror.PermissionDenied
		unavail   *serviceerror.Unavailable
		nsMissing *serviceerror.NamespaceNotFound
		gaveUp    *starter.UnavailableError
	)
	switch {
	case errors.As(err, &rep):
		return rep.code
	case errors.As(err, &gaveUp):
		// Before the cases below: what it wraps is only its last try's
		// cause, and Temporal stayed unavailable however it ended.
		return exitUnreachable
	case errors.As(err, &stopped):
		if errors.Is(stopped.Cause, context.DeadlineExceeded) {
			return exitFailed
		}
		return exitInterrupted
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.As(err, &usage), errors.As(err, &invalid), errors.As(err, &conflict), errors.As(err, &rejected), errors.As(err, &policy), errors.As(err, &valErr), errors.Is(err, config.ErrInvalid), errors.Is(err, store.ErrBadURL), errors.Is(err, store.ErrAmbiguous),
		errors.Is(err, store.ErrNoSecretKey): // SITEOPS_SECRET_KEY unset where it is needed: a setting to give
		return exitUsage
	case errors.As(err, &failed):
		return exitForFailure(failed.Cause)
	case errors.Is(err, starter.ErrNotFound), errors.As(err, &nf), errors.Is(err, store.ErrNotFound), errors.As(err, &nsMissing), errors.Is(err, wiring.ErrNoStore):
		return exitNotFound
	case errors.Is(err, wiring.ErrTemporalAuth), errors.As(err, &denied), grpcstatus.Code(err) == codes.Unauthenticated,
		errors.Is(err, store.ErrKeyMismatch): // SITEOPS_SECRET_KEY cannot read what is stored: a credential to fix
		return exitAuth
	case errors.As(err, &apiErr):
		return exitForFailure(starter.Failure{Status: apiErr.Status})
	case errors.Is(err, wiring.ErrTemporalUnreachable), errors.As(err, &unavail), errors.As(err, &transport),
		errors.Is(err, agentsite.ErrBreakerOpen), errors.Is(err, store.ErrUnreachable):
		return exitUnreachable
	}
	return exitFailed
}

// exitForFailure maps the root cause of a failed workflow or a refused API
// call.
func exitForFailure(f starter.Failure) int {
	switch {
	case f.Type == activities.ErrTypeNotFound || f.Status == http.StatusNotFound:
		return exitNotFound
	case f.Type == activities.ErrTypeUnauthorized || f.Type == activities.ErrTypeForbidden ||
		f.Status == http.StatusUnauthorized || f.Status == http.StatusForbidden:
		return exitAuth
	case f.Type == activities.ErrTypeInvalidInput || f.Type == activities.ErrTypeBadRequest || f.Type == activities.ErrTypePolicy ||
		f.Type == activities.ErrTypeUnprocessable || f.Type == workflows.ErrTypeInvalidSpec ||
		f.Status == http.StatusBadRequest || f.Status == http.StatusUnprocessableEntity:
		return exitUsage
	}
	return exitFailed
}
