package agentsite

import (
	"context"
	"errors"
	"net/http"
)

// Site status values.
const (
	SiteDraft     = "draft"
	SitePublished = "published"
)

// SiteContent is the content block of a site.
type SiteContent struct {
	Headline    string `json:"headline"`
	Subheadline string `json:"subheadline"`
	About       string `json:"about"`
}

// Site is a site as the API returns it. Only ID and Status are sure to be
// present in answers; the other fields are what was sent on create.
type Site struct {
	ID          string       `json:"id"`
	Title       string       `json:"title,omitempty"`
	Slug        string       `json:"slug,omitempty"`
	Type        string       `json:"type,omitempty"`
	Template    string       `json:"template,omitempty"`
	Content     *SiteContent `json:"content,omitempty"`
	PersonaMode string       `json:"persona_mode,omitempty"`
	Languages   []string     `json:"languages,omitempty"`
	Status      string       `json:"status,omitempty"`
}

// NewSite is the body of a create-site request.
type NewSite struct {
	Title       string      `json:"title"`
	Slug        string      `json:"slug"`
	Type        string      `json:"type"`
	Template    string      `json:"template"`
	Content     SiteContent `json:"content"`
	PersonaMode string      `json:"persona_mode"`
	Languages   []string    `json:"languages"`
}

// CreatedSite is the answer to a create-site request.
type CreatedSite struct {
	Site Site
	// Location is the canonical path of the new site, from the Location
	// header.
	Location string
	Response *Response
}

// CreateSite creates a site.
//
// POST /api/v1/sites (scope sites:write), 201 with {data: site} and Location.
func (c *Client) CreateSite(ctx context.Context, idempotencyKey string, s NewSite) (*CreatedSite, error) {
	r := newRequest(http.MethodPost, "/sites")
	r.body, r.key = s, idempotencyKey
	var out data[Site]
	resp, err := c.do(ctx, r, &out)
	if err != nil {
		return nil, err
	}
	if out.Data.ID == "" {
		return nil, errors.New("agentsite: POST /api/v1/sites answered without data.id")
	}
	return &CreatedSite{Site: out.Data, Location: resp.Header.Get("Location"), Response: resp}, nil
}

// PublishResult is the answer to a publish request.
type PublishResult struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// Publish sets whether a site is published: true moves a draft to published,
// false returns it to draft.
//
// POST /api/v1/sites/{site_id}/publish with {published: bool}.
func (c *Client) Publish(ctx context.Context, idempotencyKey, siteID string, published bool) (*PublishResult, error) {
	if err := requireID("site_id", siteID); err != nil {
		return nil, err
	}
	r := newRequest(http.MethodPost, "/sites/{site_id}/publish", siteID)
	r.body, r.key = struct {
		Published bool `json:"published"`
	}{published}, idempotencyKey
	var out data[PublishResult]
	if _, err := c.do(ctx, r, &out); err != nil {
		return nil, err
	}
	return &out.Data, nil
}
