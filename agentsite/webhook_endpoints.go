package agentsite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// SigningSecret is a webhook endpoint's whsec_ signing secret. It prints as
// a fingerprint so that it cannot leak through fmt, slog or JSON by
// accident; Reveal gives the secret itself for the encrypted store.
type SigningSecret struct{ s string }

// NewSigningSecret wraps a secret read from configuration or the store.
func NewSigningSecret(s string) SigningSecret { return SigningSecret{s} }

// Reveal returns the secret.
func (s SigningSecret) Reveal() string { return s.s }

// Fingerprint identifies the secret without revealing it: the first 12 hex
// characters of its SHA-256.
func (s SigningSecret) Fingerprint() string {
	if s.s == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s.s))
	return hex.EncodeToString(sum[:6])
}

// String implements fmt.Stringer without the secret.
func (s SigningSecret) String() string { return "whsec_[redacted " + s.Fingerprint() + "]" }

// GoString keeps %#v from printing the secret.
func (s SigningSecret) GoString() string { return s.String() }

// LogValue keeps the secret out of slog output.
func (s SigningSecret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON keeps the secret out of JSON output.
func (s SigningSecret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }

// WebhookEndpoint is a registered receiver as the list answer shows it.
type WebhookEndpoint struct {
	ID           string        `json:"id"`
	URL          string        `json:"url"`
	Events       []string      `json:"events"`
	Status       string        `json:"status,omitempty"`
	LastDelivery *DeliveryInfo `json:"last_delivery,omitempty"`
	LastError    *string       `json:"last_error,omitempty"`
}

// DeliveryInfo describes the latest delivery attempt to an endpoint. The
// contract names the field but not its shape; this is the simulator's.
type DeliveryInfo struct {
	At         time.Time `json:"at"`
	EventID    string    `json:"event_id,omitempty"`
	Outcome    string    `json:"outcome,omitempty"` // succeeded or failed
	StatusCode int       `json:"status_code,omitempty"`
}

// NewWebhookEndpoint is the body of a create-endpoint request.
type NewWebhookEndpoint struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
}

// CreatedWebhookEndpoint is the answer to a create-endpoint request: the
// endpoint and its signing secret, which the API shows this once only.
type CreatedWebhookEndpoint struct {
	Endpoint WebhookEndpoint
	Secret   SigningSecret
}

// CreateWebhookEndpoint registers a receiver. The URL must be HTTPS on the
// default port with no credentials or fragment and a host that resolves
// only to public addresses, and every event type must be one the service
// emits; all of it is checked before sending. Store the returned secret at
// once: it cannot be read again. An answer without the endpoint's id or a
// whsec_ secret is a *ContractError.
//
// POST /api/v1/webhook-endpoints (scope webhooks:write), 201.
func (c *Client) CreateWebhookEndpoint(ctx context.Context, idempotencyKey string, e NewWebhookEndpoint) (*CreatedWebhookEndpoint, error) {
	if err := errors.Join(ValidateReceiverURL(ctx, e.URL, c.resolver, c.loopback), ValidateEventTypes(e.Events)); err != nil {
		return nil, err
	}
	r := newRequest(http.MethodPost, "/webhook-endpoints")
	r.body, r.key, r.answer = e, idempotencyKey, "{ data: <endpoint with its whsec_ secret> }"
	var out data[struct {
		WebhookEndpoint
		Secret        string `json:"secret"`
		SigningSecret string `json:"signing_secret"`
	}]
	resp, err := c.do(ctx, r, &out)
	if err != nil {
		return nil, err
	}
	secret := out.Data.Secret
	if secret == "" {
		secret = out.Data.SigningSecret
	}
	// The problem names what is missing, never the secret itself.
	var missing []string
	if out.Data.ID == "" {
		missing = append(missing, "the endpoint's id")
	}
	if !strings.HasPrefix(secret, "whsec_") {
		missing = append(missing, "a whsec_ signing secret")
	}
	if len(missing) > 0 {
		return nil, c.contractError(r, resp, "the answer lacks "+strings.Join(missing, " and ")+"; the endpoint may exist without a secret siteops can store: list endpoints and delete it before registering again", nil)
	}
	return &CreatedWebhookEndpoint{Endpoint: out.Data.WebhookEndpoint, Secret: SigningSecret{secret}}, nil
}

// ListWebhookEndpoints lists the registered receivers with their status and
// latest delivery, never their secrets. An entry without an id is a
// *ContractError.
//
// GET /api/v1/webhook-endpoints. The contract names the operation but not
// its path; this one is assumed. Nor does it say whether the list is paged:
// when an answer carries a next_cursor (the shape of the lead pages), the
// rest is read with ?cursor= until it is null, so that a caller deciding
// which endpoints are gone never takes one page for the whole list.
func (c *Client) ListWebhookEndpoints(ctx context.Context) ([]WebhookEndpoint, error) {
	var all []WebhookEndpoint
	followed := map[string]bool{}
	cursor := ""
	for {
		r := newRequest(http.MethodGet, "/webhook-endpoints")
		if cursor != "" {
			r.query = url.Values{"cursor": {cursor}}
		}
		r.answer = "{ data: [endpoint, ...], next_cursor: string or null }"
		var out struct {
			Data       []WebhookEndpoint `json:"data"`
			NextCursor *string           `json:"next_cursor"`
		}
		meta, err := c.do(ctx, r, &out)
		if err != nil {
			return nil, err
		}
		for i, e := range out.Data {
			// Callers match the list with stored secrets and delete by id:
			// an entry without one would read as an endpoint that is gone.
			if e.ID == "" {
				return nil, c.contractError(r, meta, fmt.Sprintf("endpoint %d of the list has no id, so it cannot be matched with its stored secret or deleted", i), nil)
			}
		}
		all = append(all, out.Data...)
		if out.NextCursor == nil || *out.NextCursor == "" {
			return all, nil
		}
		if followed[*out.NextCursor] {
			return nil, c.contractError(r, nil, "the endpoint list's next_cursor repeats a cursor already followed, so following it would read the same pages for ever", ErrCursorStuck)
		}
		followed[*out.NextCursor] = true
		cursor = *out.NextCursor
	}
}

// DeleteWebhookEndpoint removes a receiver.
//
// DELETE /api/v1/webhook-endpoints/{endpoint_id}.
func (c *Client) DeleteWebhookEndpoint(ctx context.Context, idempotencyKey, endpointID string) error {
	if err := requireID("endpoint_id", endpointID); err != nil {
		return err
	}
	r := newRequest(http.MethodDelete, "/webhook-endpoints/{endpoint_id}", endpointID)
	r.key = idempotencyKey
	_, err := c.do(ctx, r, nil)
	return err
}
