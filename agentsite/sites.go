package agentsite

import (
	"context"
	"fmt"
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

// CreateSite creates a site. An answer without data.id is a
// *ContractError.
//
// POST /api/v1/sites (scope sites:write), 201 with {data: site} and Location.
func (c *Client) CreateSite(ctx context.Context, idempotencyKey string, s NewSite) (*CreatedSite, error) {
	r := newRequest(http.MethodPost, "/sites")
	r.body, r.key, r.answer = s, idempotencyKey, "{ data: <site> }"
	var out data[Site]
	resp, err := c.do(ctx, r, &out)
	if err != nil {
		return nil, err
	}
	if out.Data.ID == "" {
		return nil, c.contractError(r, resp, fmt.Sprintf("the %d answer has no data.id, so the new site cannot be addressed; the site may exist: look for its slug in the dashboard before creating it again", resp.Status), nil)
	}
	return &CreatedSite{Site: out.Data, Location: resp.Header.Get("Location"), Response: resp}, nil
}

// PublishResult is the answer to a publish request.
type PublishResult struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// Publish sets whether a site is published: true moves a draft to published,
// false returns it to draft. An answer without data.id or data.status, or
// one to published true whose status is not published, is a
// *ContractError.
//
// POST /api/v1/sites/{site_id}/publish with {published: bool}, answered
// { data: { id, status } }.
func (c *Client) Publish(ctx context.Context, idempotencyKey, siteID string, published bool) (*PublishResult, error) {
	if err := requireID("site_id", siteID); err != nil {
		return nil, err
	}
	r := newRequest(http.MethodPost, "/sites/{site_id}/publish", siteID)
	r.body, r.key = struct {
		Published bool `json:"published"`
	}{published}, idempotencyKey
	r.answer = "{ data: { id, status } }"
	var out data[PublishResult]
	resp, err := c.do(ctx, r, &out)
	if err != nil {
		return nil, err
	}
	switch {
	case out.Data.ID == "" || out.Data.Status == "":
		return nil, c.contractError(r, resp, "the answer lacks data.id or data.status", nil)
	case published && out.Data.Status != SitePublished:
		return nil, c.contractError(r, resp, fmt.Sprintf("publishing answered status %q, not %q", out.Data.Status, SitePublished), nil)
	}
	return &out.Data, nil
}
