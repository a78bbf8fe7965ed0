package activities

import (
	"context"

	"go.temporal.io/sdk/activity"

	"github.com/siteops/siteops/agentsite"
)

// SetEmbedInput turns a site's embed on or off, optionally replacing its
// allowed origins in the same request.
type SetEmbedInput struct {
	IdempotencyKey string   `json:"idempotency_key"`
	SiteID         string   `json:"site_id"`
	Enabled        bool     `json:"enabled"`
	AllowedOrigins []string `json:"allowed_origins,omitempty"`
}

// SetEmbed sends one PATCH of the agent: embed_enabled alone, or with
// allowed_origins when corrected origins are given.
func (a *Activities) SetEmbed(ctx context.Context, in SetEmbedInput) error {
	u := agentsite.AgentUpdate{EmbedEnabled: &in.Enabled}
	if len(in.AllowedOrigins) > 0 {
		u.AllowedOrigins = in.AllowedOrigins
	}
	if _, err := a.api.UpdateAgent(a.calling(ctx, agentsite.ClassPlaybook), in.IdempotencyKey, in.SiteID, u); err != nil {
		return classify(err)
	}
	activity.GetLogger(ctx).Info("embed switched", "site_id", in.SiteID, "enabled", in.Enabled)
	return nil
}
