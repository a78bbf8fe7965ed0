package starter

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// ReceiverFromURL names the ingress receiver a webhook URL delivers to:
// "" for a path ending in /webhooks (POST /webhooks), NAME for one ending in
// /webhooks/NAME. Any other path cannot be told apart; pass the receiver.
func ReceiverFromURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%q is not a URL", raw)
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	switch {
	case len(parts) >= 1 && parts[len(parts)-1] == "webhooks":
		return "", nil
	case len(parts) >= 2 && parts[len(parts)-2] == "webhooks" && parts[len(parts)-1] != "":
		return parts[len(parts)-1], nil
	}
	return "", fmt.Errorf("cannot tell the ingress receiver from %s (paths end in /webhooks or /webhooks/NAME); pass --receiver", u.Redacted())
}

// EndpointRequest registers a webhook endpoint.
type EndpointRequest struct {
	URL      string
	Events   []string
	Receiver string // derived from URL when empty
	// Label makes a deliberate second registration of the same URL,
	// events and receiver a new operation; leave it empty to make
	// repeating a request safe.
	Label    string
	Operator string
}

// Registration says what RegisterEndpoint did.
type Registration struct {
	WorkflowID string
	Status     workflows.EndpointRegistrationStatus
	// Already is true when the same request had been carried out before:
	// Status is its result and no second endpoint was created. What has
	// become of that endpoint's secret since is not in Status: see
	// StoredSecret.
	Already bool
}

// SecretLookup finds stored secrets by fingerprint: *store.Store.
type SecretLookup interface {
	SecretsByFingerprint(ctx context.Context, fingerprint string) ([]store.SecretInfo, error)
}

var _ SecretLookup = (*store.Store)(nil)

// SecretState is what the store holds of a registered endpoint's secret,
// in the words of `siteops webhook list`.
type SecretState string

// The states of a registered endpoint's secret.
const (
	// SecretStored: the ingress accepts it.
	SecretStored SecretState = "stored"
	// SecretRetiring: the ingress accepts it until a set time (a
	// rotation's grace period, or `siteops secret retire --at`).
	SecretRetiring SecretState = "retiring"
	// SecretRetired: the ingress refuses it (the endpoint was deleted
	// and the reconciliation retired it, a rotation ended, or someone ran
	// `siteops secret retire`).
	SecretRetired SecretState = "retired"
	// SecretNotStored: the store has no secret for the endpoint.
	SecretNotStored SecretState = "not-stored"
)

// StoredSecret says what the store holds now of the secret with
// fingerprint of endpoint endpointID — for a registration that succeeded
// earlier (Registration.Already), whose result only says what was stored
// then — and when it retires or retired.
func StoredSecret(ctx context.Context, secrets SecretLookup, endpointID, fingerprint string, now time.Time) (SecretState, *time.Time, error) {
	infos, err := secrets.SecretsByFingerprint(ctx, fingerprint)
	if err != nil {
		return "", nil, err
	}
	for _, info := range infos {
		if info.EndpointID != endpointID {
			continue
		}
		end := info.RetiredAt
		if info.RetireAfter != nil && (end == nil || info.RetireAfter.Before(*end)) {
			end = info.RetireAfter
		}
		switch {
		case end == nil:
			return SecretStored, nil, nil
		case end.After(now):
			return SecretRetiring, end, nil
		default:
			return SecretRetired, end, nil
		}
	}
	return SecretNotStored, nil, nil
}

// PolicyError is a request that siteops' own policy refuses before anything
// starts: an endpoint URL outside the deployment's public receiver URLs, a
// rotation's duration past its maximum. The worker refuses the same,
// whoever starts the workflow; the starter only says so sooner.
type PolicyError struct{ Err error }

func (e *PolicyError) Error() string { return e.Err.Error() }
func (e *PolicyError) Unwrap() error { return e.Err }

// checkReceiver applies s.o.Receivers, when set, to an endpoint URL.
func (s *Starter) checkReceiver(rawURL string) error {
	if s.o.Receivers == nil {
		return nil
	}
	if err := s.o.Receivers.Check(rawURL); err != nil {
		return &PolicyError{Err: err}
	}
	return nil
}

// RegisterEndpoint registers a webhook endpoint and stores its one-time
// secret, encrypted, through the EndpointRegistration workflow, and waits
// for it. The workflow ID and the idempotency key derive from the request,
// so repeating a request whose answer was lost creates no second endpoint:
// it joins the running registration or reports the finished one; so it
// is tried again while Temporal is unavailable (Patiently). The secret is
// never returned, only its fingerprint.
func (s *Starter) RegisterEndpoint(ctx context.Context, req EndpointRequest) (Registration, error) {
	var reg Registration
	err := s.Patiently(ctx, "registering the endpoint", func() error {
		var err error
		reg, err = s.registerEndpoint(ctx, req)
		return err
	})
	return reg, err
}

func (s *Starter) registerEndpoint(ctx context.Context, req EndpointRequest) (Registration, error) {
	if err := s.checkReceiver(req.URL); err != nil {
		return Registration{}, err
	}
	if req.Receiver == "" {
		r, err := ReceiverFromURL(req.URL)
		if err != nil {
			return Registration{}, err
		}
		req.Receiver = r
	}
	id := workflows.EndpointRegistrationID(req.URL, req.Events, req.Receiver, req.Label)
	opts := s.options(workflows.EndpointRegistrationKind, id)
	opts.WorkflowExecutionErrorWhenAlreadyStarted = true
	in := workflows.EndpointRegistrationInput{URL: req.URL, Events: req.Events, Receiver: req.Receiver, Operator: req.Operator}
	run, err := s.o.Client.ExecuteWorkflow(ctx, opts, workflows.EndpointRegistrationWorkflowName, in)
	already := false
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		// Succeeded before: its result answers this request.
		run, err, already = s.o.Client.GetWorkflow(ctx, id, ""), nil, true
	}
	if err != nil {
		return Registration{}, err
	}
	var st workflows.EndpointRegistrationStatus
	if err := s.Wait(ctx, run, &st); err != nil {
		return Registration{WorkflowID: id}, err
	}
	return Registration{WorkflowID: id, Status: st, Already: already}, nil
}

// RotationRequest describes a signing-secret rotation.
type RotationRequest struct {
	OldEndpointID string
	NewURL        string
	Receiver      string // derived from NewURL when empty
	VerifyTimeout time.Duration
	// DecisionTimeout is how long on-call has to decide after
	// VerifyTimeout before the rotation aborts; zero is the workflow's
	// default (24h).
	DecisionTimeout time.Duration
	GracePeriod     time.Duration
	Operator        string
}

// RotateSecret starts secret-rotation/<old endpoint>. Its idempotency
// keys derive from the workflow ID and the request, so starting it again
// after a run that was terminated or failed takes over the endpoint that
// run created instead of creating another; a second start while it runs
// joins it (its ID policy), so it is tried again while Temporal is
// unavailable (Patiently).
func (s *Starter) RotateSecret(ctx context.Context, req RotationRequest) (client.WorkflowRun, error) {
	var run client.WorkflowRun
	err := s.Patiently(ctx, "starting "+workflows.SecretRotationID(req.OldEndpointID), func() error {
		var err error
		run, err = s.rotateSecret(ctx, req)
		return err
	})
	return run, err
}

func (s *Starter) rotateSecret(ctx context.Context, req RotationRequest) (client.WorkflowRun, error) {
	if err := s.checkReceiver(req.NewURL); err != nil {
		return nil, err
	}
	if req.Receiver == "" {
		r, err := ReceiverFromURL(req.NewURL)
		if err != nil {
			return nil, err
		}
		req.Receiver = r
	}
	in := workflows.SecretRotationInput{
		OldEndpointID: req.OldEndpointID, NewURL: req.NewURL, Receiver: req.Receiver,
		VerifyTimeout: workflows.Duration(req.VerifyTimeout), DecisionTimeout: workflows.Duration(req.DecisionTimeout),
		GracePeriod: workflows.Duration(req.GracePeriod), Operator: req.Operator,
	}
	if err := workflows.CheckRotationLimits(in); err != nil {
		return nil, &PolicyError{Err: err}
	}
	id := workflows.SecretRotationID(req.OldEndpointID)
	opts := s.options(workflows.SecretRotationKind, id)
	return s.o.Client.ExecuteWorkflow(ctx, opts, workflows.SecretRotationWorkflowName, in)
}

// DecideRotation answers a rotation that timed out waiting for a verified
// delivery: proceed or abort.
func (s *Starter) DecideRotation(ctx context.Context, oldEndpointID, action, operator string) (workflows.SecretRotationStatus, error) {
	var st workflows.SecretRotationStatus
	id := workflows.SecretRotationID(oldEndpointID)
	err := s.update(ctx, "deciding "+id, client.UpdateWorkflowOptions{
		WorkflowID:   id,
		UpdateName:   workflows.UpdateRotationDecide,
		Args:         []any{workflows.RotationDecision{Action: action, Operator: operator}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	}, &st)
	if isNotFound(err) {
		return st, fmt.Errorf("no rotation of endpoint %s is running: %w", oldEndpointID, ErrNotFound)
	}
	if err != nil {
		return st, decideErr(ctx, id, "", err)
	}
	return st, nil
}

// RotationOutcome says in one line how the finished rotation id ended,
// and only what is true: a secret from SITEOPS_WEBHOOK_SECRETS never
// retires by itself.
func RotationOutcome(id string, st workflows.SecretRotationStatus) string {
	kept := fmt.Sprintf("the old endpoint %s and its secret stay as they were: deliveries signed with it are accepted, and nothing retires it", st.OldEndpointID)
	switch st.Step {
	case workflows.RotationAborted:
		by := st.DecidedBy
		if by == workflows.DecidedByTimeout {
			by = "the decision timeout (nobody decided)"
		}
		return fmt.Sprintf("%s aborted by %s: new endpoint %s deleted and its secret retired; %s", id, by, st.NewEndpointID, kept)
	case workflows.RotationRolledBack:
		return fmt.Sprintf("%s rolled back (%s); %s", id, st.CleanUp, kept)
	case workflows.RotationDone:
	default:
		return fmt.Sprintf("%s: %s", id, st.Step)
	}
	line := fmt.Sprintf("%s %s: new endpoint %s (fingerprint %s); old endpoint %s deleted", id, st.Step, st.NewEndpointID, st.NewFingerprint, st.OldEndpointID)
	if st.NewEndpointReused {
		line += " (the new endpoint was created by an earlier run and reused)"
	}
	if st.OldSecretStored {
		return line + ", its secret retires at " + st.OldRetiresAt.Format(time.RFC3339)
	}
	return line + "; its secret is not stored here (it comes from SITEOPS_WEBHOOK_SECRETS) and stays accepted on /webhooks until you remove it there after the grace period"
}

// RotationNeedsDecisionError ends a wait for a rotation that stopped at
// on-call's decision: no verified delivery came on the new endpoint within
// its verification timeout. The rotation goes on waiting for the decision
// until its deadline, then aborts; waiting here would only hold the
// terminal until then.
type RotationNeedsDecisionError struct {
	WorkflowID string
	Status     workflows.SecretRotationStatus
}

func (e *RotationNeedsDecisionError) Error() string {
	deadline := ""
	if !e.Status.DecisionDeadline.IsZero() {
		deadline = " by " + e.Status.DecisionDeadline.UTC().Format(time.RFC3339) + " (then it aborts by itself)"
	}
	return fmt.Sprintf("%s waits for your decision: no verified delivery came on the new endpoint %s in time; decide%s with 'siteops secret proceed --endpoint %s' (delete the old endpoint anyway) or 'siteops secret abort --endpoint %s' (keep it); see 'siteops status %s'",
		e.WorkflowID, e.Status.NewEndpointID, deadline, e.Status.OldEndpointID, e.Status.OldEndpointID, e.WorkflowID)
}

// rotationPoll is how often WaitRotation asks a running rotation where it
// stands.
const rotationPoll = 2 * time.Second

// WaitRotation waits for the rotation run to end, as Wait does, and ends
// the wait early with a *RotationNeedsDecisionError when the rotation
// stops at on-call's decision: a wait that only a human can end is not
// held open.
func (s *Starter) WaitRotation(ctx context.Context, run client.WorkflowRun) (workflows.SecretRotationStatus, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		st  workflows.SecretRotationStatus
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = s.Wait(wctx, run, &r.st)
		done <- r
	}()
	tick := time.NewTicker(rotationPoll)
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			return r.st, r.err
		case <-tick.C:
			// A query that fails (no worker answering yet, Temporal busy)
			// is asked again at the next tick; the wait itself decides.
			qctx, qcancel := context.WithTimeout(wctx, rotationPoll)
			v, err := s.o.Client.QueryWorkflow(qctx, run.GetID(), run.GetRunID(), workflows.QueryRotation)
			var st workflows.SecretRotationStatus
			if err == nil && v.Get(&st) == nil && st.Step == workflows.RotationDeciding {
				qcancel()
				return st, &RotationNeedsDecisionError{WorkflowID: run.GetID(), Status: st}
			}
			qcancel()
		}
	}
}
