package agentsite

import (
	"context"
	"net/http"
)

// KnowledgeSource is a pasted-text knowledge source to add.
type KnowledgeSource struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// Knowledge is a knowledge source as the API returns it; the text is not
// echoed back.
type Knowledge struct {
	ID     string `json:"id"`
	Name   string `json:"name,omitempty"`
	Status string `json:"status,omitempty"`
}

// AddKnowledge adds a pasted-text knowledge source. The text must be 5 to
// 200,000 characters (code points); it is checked before sending. The
// service emits knowledge.ready when the source has been processed.
//
// POST /api/v1/sites/{site_id}/knowledge (scope knowledge:write).
func (c *Client) AddKnowledge(ctx context.Context, idempotencyKey, siteID string, k KnowledgeSource) (*Knowledge, error) {
	if err := requireID("site_id", siteID); err != nil {
		return nil, err
	}
	if err := ValidateKnowledgeText(k.Text); err != nil {
		return nil, err
	}
	r := newRequest(http.MethodPost, "/sites/{site_id}/knowledge", siteID)
	r.body, r.key = k, idempotencyKey
	r.answer = "{ data: <knowledge source> }"
	var out data[Knowledge]
	if _, err := c.do(ctx, r, &out); err != nil {
		return nil, err
	}
	return &out.Data, nil
}
