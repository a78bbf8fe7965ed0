package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/activities"
)

// Names of the secret rotation workflow's messages.
const (
	SecretRotationWorkflowName = "SecretRotation"
	// SignalVerifiedDelivery says the new endpoint's secret verified a
	// delivery (VerifiedDeliverySignal); the relay sends it.
	SignalVerifiedDelivery = "verified-delivery"
	// UpdateRotationDecide carries on-call's decision after the
	// verification timeout (RotationDecision).
	UpdateRotationDecide = "decide"
	// QueryRotation answers SecretRotationStatus.
	QueryRotation = "status"
)

// Rotation decisions.
const (
	RotationProceed = "proceed" // delete the old endpoint without a verified delivery
	RotationAbort   = "abort"   // delete the new endpoint and keep the old one
)

// Rotation steps.
const (
	RotationFindingOld = "reading-old-endpoint"
	RotationCreating   = "creating-new-endpoint"
	RotationVerifying  = "waiting-for-verified-delivery"
	RotationDeciding   = "waiting-for-decision"
	RotationDeleting   = "deleting-old-endpoint"
	RotationAborting   = "deleting-new-endpoint"
	RotationDone       = "done"
	RotationAborted    = "aborted"
	// RotationRolledBack ends a rotation that failed or was cancelled
	// before the old endpoint was deleted: the new endpoint is deleted
	// (or its secret retired) and the old one stays as it was.
	RotationRolledBack = "rolled-back"
)

// DecidedByTimeout is who decided when nobody did within the decision
// timeout: the rotation aborts.
const DecidedByTimeout = "decision-timeout"

// rotationLifecycle is the change that gave the rotation a decision
// timeout, clean-up on failure and cancellation, and endpoint reuse across
// re-runs; histories recorded before it replay the first version.
const rotationLifecycle = "rotation-lifecycle"

// rotationEarlyVerified is the change that keeps a verified delivery
// signalled before the rotation knew its new endpoint (the service may
// deliver to the endpoint before CreateEndpoint returns): the rotation
// counts it once the endpoint is known, instead of having dropped it and
// waited out the verify timeout. Histories recorded before it replay as
// they ran.
const rotationEarlyVerified = "rotation-early-verified"

// rotationLimits is the change that bounds a rotation's durations
// (CheckRotationLimits); histories recorded before it replay unchecked.
const rotationLimits = "rotation-limits"

// The longest a rotation may wait for a verified delivery, for on-call's
// decision, and keep the old secret after deleting its endpoint. A week
// covers any reasonable overlap; without a bound, whoever starts a
// rotation could keep a secret accepted for a century.
const (
	MaxVerifyTimeout   = 7 * 24 * time.Hour
	MaxDecisionTimeout = 7 * 24 * time.Hour
	MaxGracePeriod     = activities.MaxGracePeriod
)

// CheckRotationLimits refuses durations that are negative or past their
// maximum, naming the limit. The workflow checks it whoever started it;
// the starter checks it first, so that a command fails before anything
// starts.
func CheckRotationLimits(in SecretRotationInput) error {
	var problems []string
	for _, d := range []struct {
		field string
		value Duration
		most  time.Duration
	}{
		{"verify_timeout", in.VerifyTimeout, MaxVerifyTimeout},
		{"decision_timeout", in.DecisionTimeout, MaxDecisionTimeout},
		{"grace_period", in.GracePeriod, MaxGracePeriod},
	} {
		switch v := time.Duration(d.value); {
		case v < 0:
			problems = append(problems, fmt.Sprintf("%s is %s; it must not be negative", d.field, v))
		case v > d.most:
			problems = append(problems, fmt.Sprintf("%s is %s; the most it may be is %s", d.field, v, d.most))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("rotation refused: %s", strings.Join(problems, "; "))
	}
	return nil
}

// SecretRotationInput starts a rotation of OldEndpointID's signing secret
// onto a new endpoint at NewURL, which delivers to the ingress receiver path
// Receiver (the same URL as before is allowed).
type SecretRotationInput struct {
	OldEndpointID string   `json:"old_endpoint_id"`
	NewURL        string   `json:"new_url"`
	Receiver      string   `json:"receiver"`
	VerifyTimeout Duration `json:"verify_timeout,omitempty"` // default 10m
	// DecisionTimeout is how long on-call has to decide after the
	// verification timeout; then the rotation aborts (the new endpoint is
	// deleted, the old secret stays). Default 24h.
	DecisionTimeout Duration `json:"decision_timeout,omitempty"`
	GracePeriod     Duration `json:"grace_period,omitempty"` // default 1h
	Operator        string   `json:"operator,omitempty"`
}

// VerifiedDeliverySignal is the first verified delivery on an endpoint.
type VerifiedDeliverySignal struct {
	EventID    string `json:"event_id"`
	EndpointID string `json:"endpoint_id"`
}

// RotationDecision is on-call's decision when no verified delivery came.
type RotationDecision struct {
	Action   string `json:"action"`
	Operator string `json:"operator,omitempty"`
}

// SecretRotationStatus answers QueryRotation and is the result.
type SecretRotationStatus struct {
	Step            string   `json:"step"`
	OldEndpointID   string   `json:"old_endpoint_id"`
	NewEndpointID   string   `json:"new_endpoint_id,omitempty"`
	NewFingerprint  string   `json:"new_fingerprint,omitempty"`
	Events          []string `json:"events,omitempty"`
	VerifiedEventID string   `json:"verified_event_id,omitempty"`
	Decision        string   `json:"decision,omitempty"`
	DecidedBy       string   `json:"decided_by,omitempty"`
	// OldSecretStored says the store holds the old endpoint's secret
	// (false: it comes from SITEOPS_WEBHOOK_SECRETS), as the first step
	// finds it (runs recorded before the first step reported it learn it
	// only when the old endpoint is deleted). A rotation that ends without
	// deleting the old endpoint (aborted, rolled back) leaves its secret
	// as it was: accepted, and retired by nothing.
	OldSecretStored bool `json:"old_secret_stored"`
	// OldRetiresAt is when the ingress stops accepting the old secret,
	// once the old endpoint is deleted and the secret stored; omitted
	// when nothing retires it.
	OldRetiresAt time.Time `json:"old_retires_at,omitzero"`
	// NewEndpointReused says the new endpoint was created by an earlier
	// run of this rotation and taken over (no second endpoint).
	NewEndpointReused bool `json:"new_endpoint_reused,omitempty"`
	// DecisionDeadline is when the rotation aborts if nobody decides.
	DecisionDeadline time.Time `json:"decision_deadline,omitzero"`
	// CleanUp says what the clean-up after a failure or a cancellation
	// did, or why it failed.
	CleanUp string `json:"clean_up,omitempty"`
}

// SecretRotation follows the contract's five steps: read the old endpoint's
// events, create a second endpoint with the same events (its one-time
// secret goes straight into the encrypted store), accept both secrets while
// waiting for a verified delivery on the new endpoint (or on-call's word
// after the timeout), delete the old endpoint, and retire its secret after
// the grace period.
//
// Nobody deciding within the decision timeout aborts. A failure or a
// cancellation cleans up in a disconnected context: before the old
// endpoint is deleted it rolls back (the new endpoint deleted and its
// secret retired, the old one untouched); after, it completes (the old
// secret retires after the grace period). Idempotency keys derive from the
// workflow ID and the request, never the run, and a re-run first looks for
// the endpoint an earlier run created and takes it over.
func SecretRotation(ctx workflow.Context, in SecretRotationInput) (SecretRotationStatus, error) {
	info := workflow.GetInfo(ctx)
	r := &rotation{
		in: in,
		st: SecretRotationStatus{Step: RotationFindingOld, OldEndpointID: in.OldEndpointID},
		id: info.WorkflowExecution.ID,
	}
	if err := r.setup(ctx); err != nil {
		return r.st, err
	}
	if workflow.GetVersion(ctx, rotationLimits, workflow.DefaultVersion, 1) >= 1 {
		if err := CheckRotationLimits(r.in); err != nil {
			workflow.GetLogger(ctx).Warn("rotation refused", "operator", in.Operator, "error", err)
			return r.st, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrTypePolicy, nil)
		}
	}
	if workflow.GetVersion(ctx, rotationLifecycle, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		r.keyOf = func(step string) string { return Key(info.WorkflowExecution.ID, info.FirstRunID, step) }
		return r.run(ctx)
	}
	r.keyOf = func(step string) string { return Key(info.WorkflowExecution.ID, step) }
	return r.runWithCleanUp(ctx)
}

type rotation struct {
	in       SecretRotationInput
	st       SecretRotationStatus
	keyOf    func(step string) string
	id       string
	verified bool
	// early are the verified deliveries signalled before NewEndpointID was
	// known, event id by endpoint id (rotationEarlyVerified).
	early    map[string]string
	decision *RotationDecision
	// oldDeleted is set once the old endpoint is known to be deleted.
	oldDeleted bool
}

func (r *rotation) setup(ctx workflow.Context) error {
	if r.in.OldEndpointID == "" || r.in.NewURL == "" {
		return errors.New("a rotation needs the old endpoint id and the new URL")
	}
	if r.in.VerifyTimeout == 0 {
		r.in.VerifyTimeout = Duration(10 * time.Minute)
	}
	if r.in.GracePeriod == 0 {
		r.in.GracePeriod = Duration(time.Hour)
	}
	if r.in.DecisionTimeout == 0 {
		r.in.DecisionTimeout = Duration(24 * time.Hour)
	}
	if err := workflow.SetQueryHandler(ctx, QueryRotation, func() (SecretRotationStatus, error) { return r.st, nil }); err != nil {
		return err
	}
	ch := workflow.GetSignalChannel(ctx, SignalVerifiedDelivery)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var sig VerifiedDeliverySignal
			ch.Receive(ctx, &sig)
			if sig.EndpointID != "" && sig.EndpointID == r.st.NewEndpointID && !r.verified {
				r.verified, r.st.VerifiedEventID = true, sig.EventID
			} else if r.st.NewEndpointID == "" && sig.EndpointID != "" {
				if r.early == nil {
					r.early = map[string]string{}
				}
				if _, seen := r.early[sig.EndpointID]; !seen {
					r.early[sig.EndpointID] = sig.EventID
				}
			}
		}
	})
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateRotationDecide,
		func(ctx workflow.Context, d RotationDecision) (SecretRotationStatus, error) {
			r.decision = &d
			err := workflow.Await(ctx, func() bool {
				return r.st.Step == RotationDone || r.st.Step == RotationAborted || r.st.Step == RotationRolledBack
			})
			return r.st, err
		},
		workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, d RotationDecision) error {
			if d.Action != RotationProceed && d.Action != RotationAbort {
				return fmt.Errorf("action %q: use %q or %q", d.Action, RotationProceed, RotationAbort)
			}
			if r.decision != nil {
				return fmt.Errorf("already decided: %s", r.decision.Action)
			}
			if r.st.Step != RotationDeciding {
				return fmt.Errorf("the rotation is at %q; a decision is taken only after the verification timeout", r.st.Step)
			}
			return nil
		}},
	)
}

// run is the rotation as first released: no decision timeout, no
// clean-up, keys that include the first run id. It replays the histories
// recorded before rotationLifecycle.
func (r *rotation) run(ctx workflow.Context) (SecretRotationStatus, error) {
	actx := apiActivity(ctx)
	var a *activities.Activities

	var old activities.EndpointInfo
	if err := workflow.ExecuteActivity(actx, a.FindEndpoint, activities.FindEndpointInput{EndpointID: r.in.OldEndpointID}).Get(ctx, &old); err != nil {
		return r.st, err
	}
	r.st.Events = old.Events

	r.st.Step = RotationCreating
	var created activities.CreatedEndpoint
	createIn := activities.CreateEndpointInput{
		IdempotencyKey: r.keyOf("create-endpoint"), URL: r.in.NewURL, Events: old.Events,
		Receiver: r.in.Receiver, RotationWorkflowID: r.id,
	}
	if err := workflow.ExecuteActivity(actx, a.CreateEndpoint, createIn).Get(ctx, &created); err != nil {
		return r.st, err
	}
	r.st.NewEndpointID, r.st.NewFingerprint = created.EndpointID, created.Fingerprint

	r.st.Step = RotationVerifying
	ok, err := workflow.AwaitWithTimeout(ctx, r.in.VerifyTimeout.D(), func() bool { return r.verified })
	if err != nil {
		return r.st, err
	}
	if !ok {
		r.st.Step = RotationDeciding
		workflow.GetLogger(ctx).Warn("no verified delivery on the new endpoint; waiting for on-call", "new_endpoint_id", created.EndpointID)
		if err := workflow.Await(ctx, func() bool { return r.verified || r.decision != nil }); err != nil {
			return r.st, err
		}
		if !r.verified && r.decision != nil {
			r.st.Decision, r.st.DecidedBy = r.decision.Action, r.decision.Operator
			if r.decision.Action == RotationAbort {
				return r.abort(ctx, actx)
			}
		}
	}

	r.st.Step = RotationDeleting
	delOld := activities.DeleteEndpointInput{IdempotencyKey: r.keyOf("delete-old-endpoint"), EndpointID: r.in.OldEndpointID}
	if err := workflow.ExecuteActivity(actx, a.DeleteEndpoint, delOld).Get(ctx, nil); err != nil {
		return r.st, err
	}
	r.st.OldRetiresAt = workflow.Now(ctx).Add(r.in.GracePeriod.D())
	var retired activities.RetireSecretResult
	if err := workflow.ExecuteActivity(actx, a.RetireSecret, activities.RetireSecretInput{EndpointID: r.in.OldEndpointID, At: r.st.OldRetiresAt}).Get(ctx, &retired); err != nil {
		return r.st, err
	}
	r.st.OldSecretStored = retired.Stored
	if !retired.Stored {
		workflow.GetLogger(ctx).Warn("the old secret is not in the store: remove it from SITEOPS_WEBHOOK_SECRETS after the grace period", "old_endpoint_id", r.in.OldEndpointID)
	}
	if err := workflow.ExecuteActivity(actx, a.EndRotation, activities.EndRotationInput{EndpointID: created.EndpointID}).Get(ctx, nil); err != nil {
		return r.st, err
	}
	r.st.Step = RotationDone
	return r.st, r.finish(ctx)
}

func (r *rotation) abort(ctx, actx workflow.Context) (SecretRotationStatus, error) {
	var a *activities.Activities
	r.st.Step = RotationAborting
	del := activities.DeleteEndpointInput{IdempotencyKey: r.keyOf("delete-new-endpoint"), EndpointID: r.st.NewEndpointID}
	if err := workflow.ExecuteActivity(actx, a.DeleteEndpoint, del).Get(ctx, nil); err != nil {
		return r.st, err
	}
	if err := workflow.ExecuteActivity(actx, a.RetireSecret, activities.RetireSecretInput{EndpointID: r.st.NewEndpointID}).Get(ctx, nil); err != nil {
		return r.st, err
	}
	if err := workflow.ExecuteActivity(actx, a.EndRotation, activities.EndRotationInput{EndpointID: r.st.NewEndpointID}).Get(ctx, nil); err != nil {
		return r.st, err
	}
	r.st.Step = RotationAborted
	return r.st, r.finish(ctx)
}

func (r *rotation) finish(ctx workflow.Context) error {
	return workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

// cleanUpActivity runs the clean-up's calls: like apiActivity, with a
// longer retry budget (about half an hour), since a clean-up that gives up
// leaves two live endpoints.
func cleanUpActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 20 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    40,
		},
	})
}

// runWithCleanUp rotates and, when that fails or is cancelled, cleans up
// in a disconnected context (so that a cancellation does not cancel the
// clean-up) and returns the original error.
func (r *rotation) runWithCleanUp(ctx workflow.Context) (SecretRotationStatus, error) {
	err := r.rotate(ctx)
	if err == nil {
		return r.st, r.finish(ctx)
	}
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	logger := workflow.GetLogger(ctx)
	if cerr := r.cleanUp(dctx); cerr != nil {
		r.st.CleanUp = "clean-up failed: " + cerr.Error()
		logger.Error("the rotation failed and its clean-up failed too: check the endpoints with `siteops webhook list`",
			"old_endpoint_id", r.in.OldEndpointID, "new_endpoint_id", r.st.NewEndpointID, "error", err, "clean_up_error", cerr)
	} else {
		logger.Warn("the rotation failed; cleaned up", "step", r.st.Step, "clean_up", r.st.CleanUp, "error", err)
	}
	return r.st, err
}

// rotate is the rotation's happy path, and the decision timeout's abort.
func (r *rotation) rotate(ctx workflow.Context) error {
	actx := apiActivity(ctx)
	var a *activities.Activities

	var old activities.EndpointInfo
	if err := workflow.ExecuteActivity(actx, a.FindEndpoint, activities.FindEndpointInput{EndpointID: r.in.OldEndpointID}).Get(ctx, &old); err != nil {
		return err
	}
	r.st.Events, r.st.OldSecretStored = old.Events, old.SecretStored

	r.st.Step = RotationCreating
	found, err := r.findCreated(ctx, actx)
	if err != nil {
		return err
	}
	for _, id := range found.Stale {
		if err := r.removeNew(ctx, actx, id); err != nil {
			return err
		}
	}
	if found.Reuse != nil {
		r.st.NewEndpointID, r.st.NewFingerprint, r.st.NewEndpointReused = found.Reuse.EndpointID, found.Reuse.Fingerprint, true
		if found.VerifiedEventID != "" && !r.verified {
			r.verified, r.st.VerifiedEventID = true, found.VerifiedEventID
		}
	} else {
		var created activities.CreatedEndpoint
		createIn := activities.CreateEndpointInput{
			IdempotencyKey: r.createKey(found.Created), URL: r.in.NewURL, Events: old.Events,
			Receiver: r.in.Receiver, RotationWorkflowID: r.id,
		}
		if err := workflow.ExecuteActivity(actx, a.CreateEndpoint, createIn).Get(ctx, &created); err != nil {
			return err
		}
		r.st.NewEndpointID, r.st.NewFingerprint = created.EndpointID, created.Fingerprint
	}
	if ev, ok := r.early[r.st.NewEndpointID]; ok && !r.verified && workflow.GetVersion(ctx, rotationEarlyVerified, workflow.DefaultVersion, 1) >= 1 {
		r.verified, r.st.VerifiedEventID = true, ev
	}

	r.st.Step = RotationVerifying
	ok, err := workflow.AwaitWithTimeout(ctx, r.in.VerifyTimeout.D(), func() bool { return r.verified })
	if err != nil {
		return err
	}
	if !ok {
		r.st.Step = RotationDeciding
		r.st.DecisionDeadline = workflow.Now(ctx).Add(r.in.DecisionTimeout.D())
		workflow.GetLogger(ctx).Warn("no verified delivery on the new endpoint; waiting for on-call", "new_endpoint_id", r.st.NewEndpointID, "decide_by", r.st.DecisionDeadline)
		decided, err := workflow.AwaitWithTimeout(ctx, r.in.DecisionTimeout.D(), func() bool { return r.verified || r.decision != nil })
		if err != nil {
			return err
		}
		switch {
		case !decided:
			r.st.Decision, r.st.DecidedBy = RotationAbort, DecidedByTimeout
			workflow.GetLogger(ctx).Warn("nobody decided within the decision timeout; aborting", "new_endpoint_id", r.st.NewEndpointID)
			return r.rollBack(ctx, actx, RotationAborted)
		case !r.verified:
			r.st.Decision, r.st.DecidedBy = r.decision.Action, r.decision.Operator
			if r.decision.Action == RotationAbort {
				return r.rollBack(ctx, actx, RotationAborted)
			}
		}
	}

	r.st.Step = RotationDeleting
	delOld := activities.DeleteEndpointInput{IdempotencyKey: r.keyOf("delete-old-endpoint"), EndpointID: r.in.OldEndpointID}
	if err := workflow.ExecuteActivity(actx, a.DeleteEndpoint, delOld).Get(ctx, nil); err != nil {
		return err
	}
	r.oldDeleted = true
	return r.complete(ctx, actx)
}

// requestKey is the part of the create key that names the request: a
// re-run with another URL or receiver is another creation.
func (r *rotation) requestKey() string {
	return fingerprint(struct {
		URL      string `json:"url"`
		Receiver string `json:"receiver"`
	}{r.in.NewURL, r.in.Receiver})
}

// createdByPrefix starts the key of every endpoint creation of this
// rotation's workflow ID, whatever its request, including those of runs of
// the first version (whose keys hold a run id): only creations record
// their key beside the secret.
func (r *rotation) createdByPrefix() string { return r.id + "/" }

// createKey is the idempotency key of the creation after n earlier ones:
// the first keeps the plain key, so that a run whose create was applied but
// never stored replays it; after an abort the next is a new operation.
func (r *rotation) createKey(n int) string {
	k := r.keyOf("create-endpoint") + "/" + r.requestKey()
	if n > 0 {
		k += fmt.Sprintf("#%d", n+1)
	}
	return k
}

func (r *rotation) findCreated(ctx, actx workflow.Context) (activities.FoundCreated, error) {
	var a *activities.Activities
	var found activities.FoundCreated
	err := workflow.ExecuteActivity(actx, a.FindCreatedEndpoint, activities.FindCreatedInput{
		KeyPrefix: r.createdByPrefix(), URL: r.in.NewURL, Receiver: r.in.Receiver, RotationWorkflowID: r.id,
	}).Get(ctx, &found)
	return found, err
}

// removeNew deletes an endpoint this rotation created and retires its
// secret now: the secret is retired even when the delete failed, so the
// endpoint can at least no longer deliver.
func (r *rotation) removeNew(ctx, actx workflow.Context, endpointID string) error {
	var a *activities.Activities
	del := activities.DeleteEndpointInput{IdempotencyKey: r.keyOf("delete-new-endpoint/" + endpointID), EndpointID: endpointID}
	delErr := workflow.ExecuteActivity(actx, a.DeleteEndpoint, del).Get(ctx, nil)
	if err := workflow.ExecuteActivity(actx, a.RetireSecret, activities.RetireSecretInput{EndpointID: endpointID, Now: true}).Get(ctx, nil); err != nil {
		return err
	}
	if err := workflow.ExecuteActivity(actx, a.EndRotation, activities.EndRotationInput{EndpointID: endpointID}).Get(ctx, nil); err != nil {
		return err
	}
	return delErr
}

// rollBack removes the new endpoint; the old one stays as it was.
func (r *rotation) rollBack(ctx, actx workflow.Context, end string) error {
	r.st.Step = RotationAborting
	if err := r.removeNew(ctx, actx, r.st.NewEndpointID); err != nil {
		return err
	}
	r.st.Step = end
	return nil
}

// complete retires the old secret after the grace period once the old
// endpoint is gone.
func (r *rotation) complete(ctx, actx workflow.Context) error {
	var a *activities.Activities
	// Whole seconds: the time is stored and bound into the secret's
	// sealing, and databases keep different precisions.
	r.st.OldRetiresAt = workflow.Now(ctx).Add(r.in.GracePeriod.D()).Truncate(time.Second)
	var retired activities.RetireSecretResult
	if err := workflow.ExecuteActivity(actx, a.RetireSecret, activities.RetireSecretInput{EndpointID: r.in.OldEndpointID, At: r.st.OldRetiresAt}).Get(ctx, &retired); err != nil {
		return err
	}
	r.st.OldSecretStored = retired.Stored
	if !retired.Stored {
		r.st.OldRetiresAt = time.Time{} // nothing here retires it
		workflow.GetLogger(ctx).Warn("the old secret is not in the store: remove it from SITEOPS_WEBHOOK_SECRETS after the grace period", "old_endpoint_id", r.in.OldEndpointID)
	}
	if r.st.NewEndpointID != "" {
		if err := workflow.ExecuteActivity(actx, a.EndRotation, activities.EndRotationInput{EndpointID: r.st.NewEndpointID}).Get(ctx, nil); err != nil {
			return err
		}
	}
	r.st.Step = RotationDone
	return nil
}

// cleanUp leaves no half-done rotation after a failure or a cancellation
// (ctx is disconnected). If the old endpoint is gone (deleted by this
// rotation, perhaps by an attempt whose answer was lost), the rotation is
// completed: the old secret retires after the grace period. Otherwise it is
// rolled back: the new endpoint (found in the store if its creation was
// interrupted) is deleted and its secret retired, the old one untouched.
func (r *rotation) cleanUp(ctx workflow.Context) error {
	actx := cleanUpActivity(ctx)
	var a *activities.Activities
	switch r.st.Step {
	case RotationFindingOld, RotationDone, RotationAborted, RotationRolledBack:
		return nil // nothing was created, or all is done
	}
	if !r.oldDeleted && r.st.NewEndpointID != "" {
		err := workflow.ExecuteActivity(actx, a.FindEndpoint, activities.FindEndpointInput{EndpointID: r.in.OldEndpointID}).Get(ctx, nil)
		var app *temporal.ApplicationError
		switch {
		case errors.As(err, &app) && app.Type() == activities.ErrTypeNotFound:
			r.oldDeleted = true
		case err != nil:
			return err
		}
	}
	if r.oldDeleted {
		if err := r.complete(ctx, actx); err != nil {
			return err
		}
		r.st.CleanUp = "the old endpoint was deleted: its secret retires after the grace period"
		return nil
	}
	if r.st.NewEndpointID == "" {
		found, err := r.findCreated(ctx, actx)
		if err != nil {
			return err
		}
		if found.Reuse != nil {
			r.st.NewEndpointID, r.st.NewFingerprint = found.Reuse.EndpointID, found.Reuse.Fingerprint
		}
	}
	if r.st.NewEndpointID == "" {
		r.st.Step = RotationRolledBack
		r.st.CleanUp = "no new endpoint was created; the old endpoint is untouched"
		return nil
	}
	if err := r.rollBack(ctx, actx, RotationRolledBack); err != nil {
		return err
	}
	r.st.CleanUp = "the new endpoint was deleted and its secret retired; the old endpoint is untouched"
	return nil
}
