package overview

import (
	"context"
	"fmt"
	"time"

	"github.com/siteops/siteops/agentsite"
)

// Endpoint is one of the account's webhook endpoints that is not enabled,
// or whose last delivery failed.
type Endpoint struct {
	EndpointID     string    `json:"endpoint_id"`
	URL            string    `json:"url"`
	Status         string    `json:"status,omitempty"`
	LastDeliveryAt time.Time `json:"last_delivery_at,omitzero"`
	LastOutcome    string    `json:"last_outcome,omitempty"`
	LastError      string    `json:"last_error,omitempty"`
	Next           string    `json:"next"`
}

func failingEndpoints(ctx context.Context, o Options) ([]Endpoint, error) {
	eps, err := o.Endpoints(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the webhook endpoints: %w", err)
	}
	out := []Endpoint{}
	for _, e := range eps {
		failed := e.LastDelivery != nil && e.LastDelivery.Outcome == "failed"
		disabled := e.Status != "" && e.Status != "enabled"
		if !failed && !disabled {
			continue
		}
		ep := Endpoint{EndpointID: e.ID, URL: e.URL, Status: e.Status, LastError: deref(e.LastError)}
		if d := e.LastDelivery; d != nil {
			ep.LastDeliveryAt, ep.LastOutcome = d.At.UTC(), d.Outcome
		}
		ep.Next = endpointNext(e, disabled)
		out = append(out, ep)
		if len(out) == o.Limit {
			break
		}
	}
	return out, nil
}

func endpointNext(e agentsite.WebhookEndpoint, disabled bool) string {
	if disabled {
		return fmt.Sprintf("the service stopped delivering to %s: siteops webhook list, then enable it in the dashboard or register another (siteops webhook create)", e.ID)
	}
	return fmt.Sprintf("deliveries to %s fail: siteops webhook list (its last error), and what the ingress refused: siteops events list", e.ID)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
