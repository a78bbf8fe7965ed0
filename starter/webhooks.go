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

	"github.com/siteops/siteops/agentsite"
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

// SecretStore keeps signing secrets.
type SecretStore interface {
	PutSecret(ctx context.Context, endpointID, receiver string, secret agentsite.SigningSecret) error
	ExpectSecret(ctx context.Context, receiver string, until time.Time) error
}

// EndpointCreator registers webhook endpoints.
type EndpointCreator interface {
	CreateWebhookEndpoint(ctx context.Context, idempotencyKey string, e agentsite.NewWebhookEndpoint) (*agentsite.CreatedWebhookEndpoint, error)
}

// CreateEndpoint registers a webhook endpoint and stores its one-time
// secret, encrypted, for the ingress receiver. It returns the endpoint and
// the secret's fingerprint; the secret itself is never returned.
func CreateEndpoint(ctx context.Context, api EndpointCreator, secrets SecretStore, key, rawURL string, events []string, receiver string) (agentsite.WebhookEndpoint, string, error) {
	if err := secrets.ExpectSecret(ctx, receiver, time.Now().Add(2*time.Minute)); err != nil {
		return agentsite.WebhookEndpoint{}, "", err
	}
	created, err := api.CreateWebhookEndpoint(ctx, key, agentsite.NewWebhookEndpoint{URL: rawURL, Events: events})
	if err != nil {
		return agentsite.WebhookEndpoint{}, "", err
	}
	if err := secrets.PutSecret(ctx, created.Endpoint.ID, receiver, created.Secret); err != nil {
		return created.Endpoint, "", fmt.Errorf("endpoint %s was created but its secret could not be stored (%w); run the same command with --idempotency-key %s to get the answer replayed, or delete the endpoint", created.Endpoint.ID, err, key)
	}
	return created.Endpoint, created.Secret.Fingerprint(), nil
}

// RotationRequest describes a signing-secret rotation.
type RotationRequest struct {
	OldEndpointID string
	NewURL        string
	Receiver      string // derived from NewURL when empty
	VerifyTimeout time.Duration
	GracePeriod   time.Duration
	Operator      string
}

// RotateSecret starts secret-rotation/<old endpoint>.
func (s *Starter) RotateSecret(ctx context.Context, req RotationRequest) (client.WorkflowRun, error) {
	if req.Receiver == "" {
		r, err := ReceiverFromURL(req.NewURL)
		if err != nil {
			return nil, err
		}
		req.Receiver = r
	}
	id := workflows.SecretRotationID(req.OldEndpointID)
	opts := s.options(id, workflows.SecretRotationPolicy)
	return s.Client.ExecuteWorkflow(ctx, opts, workflows.SecretRotationWorkflowName, workflows.SecretRotationInput{
		OldEndpointID: req.OldEndpointID, NewURL: req.NewURL, Receiver: req.Receiver,
		VerifyTimeout: workflows.Duration(req.VerifyTimeout), GracePeriod: workflows.Duration(req.GracePeriod), Operator: req.Operator,
	})
}

// DecideRotation answers a rotation that timed out waiting for a verified
// delivery: proceed or abort.
func (s *Starter) DecideRotation(ctx context.Context, oldEndpointID, action, operator string) (workflows.SecretRotationStatus, error) {
	var st workflows.SecretRotationStatus
	h, err := s.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.SecretRotationID(oldEndpointID),
		UpdateName:   workflows.UpdateRotationDecide,
		Args:         []any{workflows.RotationDecision{Action: action, Operator: operator}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return st, fmt.Errorf("no rotation of endpoint %s is running", oldEndpointID)
	}
	if err != nil {
		return st, err
	}
	return st, h.Get(ctx, &st)
}
