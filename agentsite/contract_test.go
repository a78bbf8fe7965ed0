package agentsite

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestTwoHundredsThatBreakTheContract answers every resource method with a
// 2xx body the contract does not allow: each returns a *ContractError that
// names the method, the path, the request id and what is wrong, after one
// request, and never quotes the body (it may carry a secret or a lead).
func TestTwoHundredsThatBreakTheContract(t *testing.T) {
	const leaked = "whsec_must_not_appear_in_errors"
	tests := []struct {
		name       string
		status     int
		body       string
		call       func(ctx context.Context, c *Client) error
		wantMethod string
		wantPath   string
		says       string
	}{
		{"create site without data.id", 201, `{"data":{"status":"draft"}}`,
			func(ctx context.Context, c *Client) error {
				_, err := c.CreateSite(ctx, "k", NewSite{Slug: "acme"})
				return err
			}, "POST", "/api/v1/sites", "no data.id"},
		{"create site, empty body", 201, ``,
			func(ctx context.Context, c *Client) error {
				_, err := c.CreateSite(ctx, "k", NewSite{Slug: "acme"})
				return err
			}, "POST", "/api/v1/sites", "no data.id"},
		{"create site, data not an object", 201, `{"data":"site_1"}`,
			func(ctx context.Context, c *Client) error {
				_, err := c.CreateSite(ctx, "k", NewSite{Slug: "acme"})
				return err
			}, "POST", "/api/v1/sites", "is not { data: <site> }: data is a JSON string where an object belongs"},
		{"publish without data.id", 200, `{"data":{"status":"published"}}`,
			func(ctx context.Context, c *Client) error {
				_, err := c.Publish(ctx, "k", "site_1", true)
				return err
			}, "POST", "/api/v1/sites/site_1/publish", "lacks data.id or data.status"},
		{"publish answered draft", 200, `{"data":{"id":"site_1","status":"draft"}}`,
			func(ctx context.Context, c *Client) error {
				_, err := c.Publish(ctx, "k", "site_1", true)
				return err
			}, "POST", "/api/v1/sites/site_1/publish", `publishing answered status "draft", not "published"`},
		{"endpoint without a secret", 201, `{"data":{"id":"we_1","url":"https://hooks.example.org/in"}}`,
			func(ctx context.Context, c *Client) error {
				_, err := c.CreateWebhookEndpoint(ctx, "k", NewWebhookEndpoint{URL: "https://hooks.example.org/in", Events: []string{"lead.created"}})
				return err
			}, "POST", "/api/v1/webhook-endpoints", "lacks a whsec_ signing secret"},
		{"endpoint without an id", 201, `{"data":{"url":"https://hooks.example.org/in","secret":"` + leaked + `"}}`,
			func(ctx context.Context, c *Client) error {
				_, err := c.CreateWebhookEndpoint(ctx, "k", NewWebhookEndpoint{URL: "https://hooks.example.org/in", Events: []string{"lead.created"}})
				return err
			}, "POST", "/api/v1/webhook-endpoints", "lacks the endpoint's id;"},
		{"endpoint secret a number", 201, `{"data":{"id":"we_1","secret":7}}`,
			func(ctx context.Context, c *Client) error {
				_, err := c.CreateWebhookEndpoint(ctx, "k", NewWebhookEndpoint{URL: "https://hooks.example.org/in", Events: []string{"lead.created"}})
				return err
			}, "POST", "/api/v1/webhook-endpoints", "data.secret is a JSON number where a string belongs"},
		{"endpoint list entry without an id", 200, `{"data":[{"id":"we_1"},{"url":"https://hooks.example.org/in"}]}`,
			func(ctx context.Context, c *Client) error {
				_, err := c.ListWebhookEndpoints(ctx)
				return err
			}, "GET", "/api/v1/webhook-endpoints", "endpoint 1 of the list has no id"},
		{"endpoint list not an array", 200, `{"data":{}}`,
			func(ctx context.Context, c *Client) error {
				_, err := c.ListWebhookEndpoints(ctx)
				return err
			}, "GET", "/api/v1/webhook-endpoints", "data is a JSON object where an array belongs"},
		{"leads page not an array", 200, `{"data":{},"next_cursor":null}`,
			func(ctx context.Context, c *Client) error {
				_, err := c.ListLeads(ctx, "site_1", ListLeadsOptions{})
				return err
			}, "GET", "/api/v1/sites/site_1/leads", "is not { data: [lead, ...], next_cursor: string or null }"},
		{"agent answer not JSON", 200, `<html>ok</html>`,
			func(ctx context.Context, c *Client) error {
				_, err := c.SetEmbed(ctx, "k", "site_1", false)
				return err
			}, "PATCH", "/api/v1/sites/site_1/agent", "the body is not valid JSON"},
		{"knowledge data an array", 201, `{"data":[]}`,
			func(ctx context.Context, c *Client) error {
				_, err := c.AddKnowledge(ctx, "k", "site_1", KnowledgeSource{Name: "About", Text: "We sell anvils."})
				return err
			}, "POST", "/api/v1/sites/site_1/knowledge", "is not { data: <knowledge source> }"},
		{"FAQ data a number", 201, `{"data":1}`,
			func(ctx context.Context, c *Client) error {
				_, err := c.AddFAQ(ctx, "k", "site_1", FAQ{Question: "Q?", Answer: "A."})
				return err
			}, "POST", "/api/v1/sites/site_1/faqs", "is not { data: <faq> }"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newAPIServer(t, answer(tc.status, tc.body))
			c := newTestClient(t, srv.URL, WithResolver(publicResolver()))
			err := tc.call(t.Context(), c)
			var ce *ContractError
			if !errors.As(err, &ce) || !errors.Is(err, ErrContractViolation) {
				t.Fatalf("error = %v (%T), want a *ContractError", err, err)
			}
			if ce.Method != tc.wantMethod || ce.Path != tc.wantPath || ce.RequestID != "req_123" {
				t.Errorf("ContractError names %s %s [%s], want %s %s [req_123]", ce.Method, ce.Path, ce.RequestID, tc.wantMethod, tc.wantPath)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.says) || !strings.Contains(msg, "report it to Agent-Site") {
				t.Errorf("error = %q, want it to say %q and what to do", msg, tc.says)
			}
			if msg := err.Error(); strings.Contains(msg, leaked) || strings.Contains(msg, testKey) {
				t.Errorf("error = %q carries a secret", msg)
			}
			if n := len(srv.requests()); n != 1 {
				t.Errorf("the server saw %d requests, want 1", n)
			}
		})
	}
}
