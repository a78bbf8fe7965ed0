package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
)

// FindEndpointInput names an endpoint to look up.
type FindEndpointInput struct {
	EndpointID string `json:"endpoint_id"`
}

// EndpointInfo is what a rotation needs of an endpoint.
type EndpointInfo struct {
	EndpointID string   `json:"endpoint_id"`
	URL        string   `json:"url"`
	Events     []string `json:"events"`
}

// FindEndpoint reads an endpoint's URL and events from the endpoint list.
func (a *Activities) FindEndpoint(ctx context.Context, in FindEndpointInput) (EndpointInfo, error) {
	eps, err := a.API.ListWebhookEndpoints(ctx)
	if err != nil {
		return EndpointInfo{}, classify(err)
	}
	for _, e := range eps {
		if e.ID == in.EndpointID {
			return EndpointInfo{EndpointID: e.ID, URL: e.URL, Events: e.Events}, nil
		}
	}
	return EndpointInfo{}, nonRetryable(ErrTypeNotFound, fmt.Errorf("no webhook endpoint %s in the account's endpoint list", in.EndpointID))
}

// CreateEndpointInput registers a receiver and keeps its secret.
type CreateEndpointInput struct {
	IdempotencyKey string   `json:"idempotency_key"`
	URL            string   `json:"url"`
	Events         []string `json:"events"`
	// Receiver is the ingress path name the endpoint delivers to.
	Receiver string `json:"receiver"`
	// RotationWorkflowID, when set, is told of the endpoint's first
	// verified delivery.
	RotationWorkflowID string `json:"rotation_workflow_id,omitempty"`
}

// CreatedEndpoint identifies the new endpoint and its secret without
// revealing the secret.
type CreatedEndpoint struct {
	EndpointID  string `json:"endpoint_id"`
	Fingerprint string `json:"fingerprint"`
}

// CreateEndpoint registers the endpoint and stores the one-time secret,
// encrypted, straight from the answer: the secret never leaves this
// activity. A retried attempt gets the same answer replayed under the same
// idempotency key, so the stored secret is the right one.
func (a *Activities) CreateEndpoint(ctx context.Context, in CreateEndpointInput) (CreatedEndpoint, error) {
	// The service may deliver with the new secret before this activity has
	// stored it; the ingress holds such deliveries instead of refusing them.
	if err := a.Store.ExpectSecret(ctx, in.Receiver, a.Now().Add(2*time.Minute)); err != nil {
		return CreatedEndpoint{}, classify(err)
	}
	created, err := a.API.CreateWebhookEndpoint(ctx, in.IdempotencyKey, agentsite.NewWebhookEndpoint{URL: in.URL, Events: in.Events})
	if err != nil {
		return CreatedEndpoint{}, classify(err)
	}
	id := created.Endpoint.ID
	// The rotation is known before the secret can verify anything.
	if in.RotationWorkflowID != "" {
		if err := a.Store.SetRotation(ctx, id, in.RotationWorkflowID); err != nil {
			return CreatedEndpoint{}, classify(err)
		}
	}
	if err := a.Store.PutSecret(ctx, id, in.Receiver, created.Secret); err != nil {
		if errors.Is(err, store.ErrNoSecretKey) {
			return CreatedEndpoint{}, nonRetryable(ErrTypeInvalidInput, err)
		}
		return CreatedEndpoint{}, classify(err)
	}
	activity.GetLogger(ctx).Info("webhook endpoint created; secret stored", "endpoint_id", id, "receiver", in.Receiver, "fingerprint", created.Secret.Fingerprint())
	return CreatedEndpoint{EndpointID: id, Fingerprint: created.Secret.Fingerprint()}, nil
}

// DeleteEndpointInput removes an endpoint.
type DeleteEndpointInput struct {
	IdempotencyKey string `json:"idempotency_key"`
	EndpointID     string `json:"endpoint_id"`
}

// DeleteEndpoint deletes the endpoint; one that is already gone counts as
// deleted.
func (a *Activities) DeleteEndpoint(ctx context.Context, in DeleteEndpointInput) error {
	err := a.API.DeleteWebhookEndpoint(ctx, in.IdempotencyKey, in.EndpointID)
	var apiErr *agentsite.APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
		return nil
	}
	return classify(err)
}

// RetireSecretInput stops accepting an endpoint's secret at a time; a zero
// At means now, by the activity's clock.
type RetireSecretInput struct {
	EndpointID string    `json:"endpoint_id"`
	At         time.Time `json:"at,omitzero"`
}

// RetireSecretResult says whether a stored secret was retired; false means
// the secret was not in the store (it is configured in
// SITEOPS_WEBHOOK_SECRETS and must be removed there).
type RetireSecretResult struct {
	Stored bool `json:"stored"`
}

// RetireSecret sets when the ingress stops accepting the secret.
func (a *Activities) RetireSecret(ctx context.Context, in RetireSecretInput) (RetireSecretResult, error) {
	at := in.At
	if at.IsZero() {
		at = a.Now()
	}
	err := a.Store.RetireSecret(ctx, in.EndpointID, at)
	if errors.Is(err, store.ErrNotFound) {
		return RetireSecretResult{}, nil
	}
	if err != nil {
		return RetireSecretResult{}, classify(err)
	}
	return RetireSecretResult{Stored: true}, nil
}

// EndRotationInput names the endpoint whose rotation is over.
type EndRotationInput struct {
	EndpointID string `json:"endpoint_id"`
}

// EndRotation stops routing the endpoint's verifications to the rotation.
func (a *Activities) EndRotation(ctx context.Context, in EndRotationInput) error {
	return classify(a.Store.EndRotation(ctx, in.EndpointID))
}
