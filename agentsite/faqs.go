package agentsite

import (
	"context"
	"net/http"
)

// FAQ is a structured question and answer that grounds the agent.
type FAQ struct {
	ID       string `json:"id,omitempty"`
	Question string `json:"question"`
	Answer   string `json:"answer"`
	Approved bool   `json:"approved"`
}

// AddFAQ adds an FAQ to a site. Approved true marks it as confirmed.
//
// POST /api/v1/sites/{site_id}/faqs.
func (c *Client) AddFAQ(ctx context.Context, idempotencyKey, siteID string, f FAQ) (*FAQ, error) {
	if err := requireID("site_id", siteID); err != nil {
		return nil, err
	}
	r := newRequest(http.MethodPost, "/sites/{site_id}/faqs", siteID)
	r.body, r.key = struct {
		Question string `json:"question"`
		Answer   string `json:"answer"`
		Approved bool   `json:"approved"`
	}{f.Question, f.Answer, f.Approved}, idempotencyKey
	r.answer = "{ data: <faq> }"
	var out data[FAQ]
	if _, err := c.do(ctx, r, &out); err != nil {
		return nil, err
	}
	return &out.Data, nil
}
