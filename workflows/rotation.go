package workflows

import (
	"errors"
	"fmt"
	"time"

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
)

// rotationPrefix starts the ID of a rotation.
const rotationPrefix = "secret-rotation/"

// SecretRotationID is the workflow ID of the rotation of an endpoint.
func SecretRotationID(oldEndpointID string) string { return rotationPrefix + oldEndpointID }

// SecretRotationPolicy allows one rotation per endpoint at a time.
var SecretRotationPolicy = EmbedIncidentPolicy

// SecretRotationInput starts a rotation of OldEndpointID's signing secret
// onto a new endpoint at NewURL, which delivers to the ingress receiver path
// Receiver (the same URL as before is allowed).
type SecretRotationInput struct {
	OldEndpointID string   `json:"old_endpoint_id"`
	NewURL        string   `json:"new_url"`
	Receiver      string   `json:"receiver"`
	VerifyTimeout Duration `json:"verify_timeout,omitempty"` // default 10m
	GracePeriod   Duration `json:"grace_period,omitempty"`   // default 1h
	Operator      string   `json:"operator,omitempty"`
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
	Step            string    `json:"step"`
	OldEndpointID   string    `json:"old_endpoint_id"`
	NewEndpointID   string    `json:"new_endpoint_id,omitempty"`
	NewFingerprint  string    `json:"new_fingerprint,omitempty"`
	Events          []string  `json:"events,omitempty"`
	VerifiedEventID string    `json:"verified_event_id,omitempty"`
	Decision        string    `json:"decision,omitempty"`
	DecidedBy       string    `json:"decided_by,omitempty"`
	OldSecretStored bool      `json:"old_secret_stored"`
	OldRetiresAt    time.Time `json:"old_retires_at"`
}

// SecretRotation follows the contract's five steps: read the old endpoint's
// events, create a second endpoint with the same events (its one-time
// secret goes straight into the encrypted store), accept both secrets while
// waiting for a verified delivery on the new endpoint (or on-call's word
// after the timeout), delete the old endpoint, and retire its secret after
// the grace period.
func SecretRotation(ctx workflow.Context, in SecretRotationInput) (SecretRotationStatus, error) {
	info := workflow.GetInfo(ctx)
	r := &rotation{
		in:    in,
		st:    SecretRotationStatus{Step: RotationFindingOld, OldEndpointID: in.OldEndpointID},
		keyOf: func(step string) string { return Key(info.WorkflowExecution.ID, info.FirstRunID, step) },
		id:    info.WorkflowExecution.ID,
	}
	if err := r.setup(ctx); err != nil {
		return r.st, err
	}
	return r.run(ctx)
}

type rotation struct {
	in       SecretRotationInput
	st       SecretRotationStatus
	keyOf    func(step string) string
	id       string
	verified bool
	decision *RotationDecision
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
			}
		}
	})
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateRotationDecide,
		func(ctx workflow.Context, d RotationDecision) (SecretRotationStatus, error) {
			r.decision = &d
			err := workflow.Await(ctx, func() bool { return r.st.Step == RotationDone || r.st.Step == RotationAborted })
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
