package agentsite

import (
	"context"
	"encoding/json"
	"net/http"
)

// AgentUpdate is a partial update of a site's agent: only the fields that
// are set are sent. A nil pointer or nil slice leaves the field alone; an
// empty, non-nil slice sends [] and clears the list.
type AgentUpdate struct {
	DisplayName    *string
	PersonaMode    *string
	Instructions   *string
	Languages      []string
	EmbedEnabled   *bool
	AllowedOrigins []string
}

type wireAgentUpdate struct {
	DisplayName    *string   `json:"display_name,omitempty"`
	PersonaMode    *string   `json:"persona_mode,omitempty"`
	Instructions   *string   `json:"instructions,omitempty"`
	Languages      *[]string `json:"languages,omitempty"`
	EmbedEnabled   *bool     `json:"embed_enabled,omitempty"`
	AllowedOrigins *[]string `json:"allowed_origins,omitempty"`
}

// MarshalJSON writes only the fields that are set.
func (u AgentUpdate) MarshalJSON() ([]byte, error) {
	return json.Marshal(wireAgentUpdate{u.DisplayName, u.PersonaMode, u.Instructions, slicePtr(u.Languages), u.EmbedEnabled, slicePtr(u.AllowedOrigins)})
}

// UnmarshalJSON reads the wire form back, keeping an empty list distinct
// from an absent one.
func (u *AgentUpdate) UnmarshalJSON(b []byte) error {
	var w wireAgentUpdate
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*u = AgentUpdate{DisplayName: w.DisplayName, PersonaMode: w.PersonaMode, Instructions: w.Instructions, EmbedEnabled: w.EmbedEnabled}
	if w.Languages != nil {
		u.Languages = *w.Languages
	}
	if w.AllowedOrigins != nil {
		u.AllowedOrigins = *w.AllowedOrigins
	}
	return nil
}

func slicePtr(s []string) *[]string {
	if s == nil {
		return nil
	}
	return &s
}

// Empty reports whether the update sets nothing.
func (u AgentUpdate) Empty() bool {
	return u.DisplayName == nil && u.PersonaMode == nil && u.Instructions == nil &&
		u.Languages == nil && u.EmbedEnabled == nil && u.AllowedOrigins == nil
}

// Agent is a site's agent as far as the API returns it.
type Agent struct {
	DisplayName    string   `json:"display_name,omitempty"`
	PersonaMode    string   `json:"persona_mode,omitempty"`
	Instructions   string   `json:"instructions,omitempty"`
	Languages      []string `json:"languages,omitempty"`
	EmbedEnabled   *bool    `json:"embed_enabled,omitempty"`
	AllowedOrigins []string `json:"allowed_origins,omitempty"`
}

// UpdateAgent applies a partial update to the site's agent. Allowed origins
// are checked to be exact origins before anything is sent.
//
// PATCH /api/v1/sites/{site_id}/agent (scope agents:write).
func (c *Client) UpdateAgent(ctx context.Context, idempotencyKey, siteID string, u AgentUpdate) (*Agent, error) {
	if err := requireID("site_id", siteID); err != nil {
		return nil, err
	}
	if u.Empty() {
		return nil, &ValidationError{Field: "agent", Reason: "the update sets no field"}
	}
	// The canonical form is the one a browser's Origin header carries, so
	// it is the one that matches whatever way the service compares. It is a
	// function of the input, so a retry sends the same body.
	origins, err := CanonicalOrigins(u.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	u.AllowedOrigins = origins
	r := newRequest(http.MethodPatch, "/sites/{site_id}/agent", siteID)
	r.body, r.key = u, idempotencyKey
	r.answer = "{ data: <agent> }"
	var out data[Agent]
	if _, err := c.do(ctx, r, &out); err != nil {
		return nil, err
	}
	return &out.Data, nil
}

// SetEmbed turns the embeddable launcher on or off with a body of only
// embed_enabled.
func (c *Client) SetEmbed(ctx context.Context, idempotencyKey, siteID string, enabled bool) (*Agent, error) {
	return c.UpdateAgent(ctx, idempotencyKey, siteID, AgentUpdate{EmbedEnabled: &enabled})
}
