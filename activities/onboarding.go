package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/siteops/siteops/agentsite"
)

// CreateSiteInput creates a site and records which workflow owns it.
type CreateSiteInput struct {
	IdempotencyKey string            `json:"idempotency_key"`
	WorkflowID     string            `json:"workflow_id"`
	Site           agentsite.NewSite `json:"site"`
}

// CreateSiteResult is the new site.
type CreateSiteResult struct {
	SiteID string `json:"site_id"`
	Status string `json:"status"`
}

// CreateSite creates the site, then records site → workflow so that the
// relay can route the site's webhooks to its onboarding workflow.
func (a *Activities) CreateSite(ctx context.Context, in CreateSiteInput) (CreateSiteResult, error) {
	created, err := a.api.CreateSite(a.calling(ctx, agentsite.ClassOnboarding), in.IdempotencyKey, in.Site)
	if err != nil {
		return CreateSiteResult{}, classify(err)
	}
	if err := a.store.SetSiteWorkflow(ctx, created.Site.ID, in.WorkflowID); err != nil {
		return CreateSiteResult{}, classify(err)
	}
	activity.GetLogger(ctx).Info("site created", "site_id", created.Site.ID, "slug", in.Site.Slug)
	return CreateSiteResult{SiteID: created.Site.ID, Status: created.Site.Status}, nil
}

// UpdateAgentInput applies a partial update to a site's agent.
type UpdateAgentInput struct {
	IdempotencyKey string                `json:"idempotency_key"`
	SiteID         string                `json:"site_id"`
	Update         agentsite.AgentUpdate `json:"update"`
}

// UpdateAgent configures the agent: name, persona, instructions, languages,
// embed switch and allowed origins, whichever are set.
func (a *Activities) UpdateAgent(ctx context.Context, in UpdateAgentInput) error {
	_, err := a.api.UpdateAgent(a.calling(ctx, agentsite.ClassOnboarding), in.IdempotencyKey, in.SiteID, in.Update)
	return classify(err)
}

// AddKnowledgeInput adds one knowledge source. The text is either in the
// store under TextHash (so that it never enters workflow history) or, when
// small, inline in Text.
type AddKnowledgeInput struct {
	IdempotencyKey string `json:"idempotency_key"`
	SiteID         string `json:"site_id"`
	Name           string `json:"name"`
	TextHash       string `json:"text_hash,omitempty"`
	Text           string `json:"text,omitempty"`
}

// AddKnowledgeResult identifies the new source.
type AddKnowledgeResult struct {
	KnowledgeID string `json:"knowledge_id"`
}

// AddKnowledge reads the text from the store when given a hash and adds it.
func (a *Activities) AddKnowledge(ctx context.Context, in AddKnowledgeInput) (AddKnowledgeResult, error) {
	text := in.Text
	if in.TextHash != "" {
		var err error
		if text, err = a.store.KnowledgeText(ctx, in.TextHash); err != nil {
			return AddKnowledgeResult{}, nonRetryable(ErrTypeMissingText, fmt.Errorf("knowledge source %q: %w", in.Name, err))
		}
	}
	k, err := a.api.AddKnowledge(a.calling(ctx, agentsite.ClassBulk), in.IdempotencyKey, in.SiteID, agentsite.KnowledgeSource{Name: in.Name, Text: text})
	if err != nil {
		return AddKnowledgeResult{}, classify(err)
	}
	return AddKnowledgeResult{KnowledgeID: k.ID}, nil
}

// AddFAQInput adds one FAQ.
type AddFAQInput struct {
	IdempotencyKey string        `json:"idempotency_key"`
	SiteID         string        `json:"site_id"`
	FAQ            agentsite.FAQ `json:"faq"`
}

// AddFAQResult identifies the new FAQ.
type AddFAQResult struct {
	FAQID string `json:"faq_id"`
}

// AddFAQ adds one FAQ to the site.
func (a *Activities) AddFAQ(ctx context.Context, in AddFAQInput) (AddFAQResult, error) {
	f, err := a.api.AddFAQ(a.calling(ctx, agentsite.ClassBulk), in.IdempotencyKey, in.SiteID, in.FAQ)
	if err != nil {
		return AddFAQResult{}, classify(err)
	}
	return AddFAQResult{FAQID: f.ID}, nil
}

// PublishInput publishes (or unpublishes) a site.
type PublishInput struct {
	IdempotencyKey string `json:"idempotency_key"`
	SiteID         string `json:"site_id"`
	Published      bool   `json:"published"`
	// StartedAt is when the onboarding run started, for
	// siteops_onboarding_time_to_published_seconds; no sample without it.
	StartedAt time.Time `json:"started_at,omitzero"`
}

// PublishResult is the site's status after the call.
type PublishResult struct {
	Status string `json:"status"`
}

// Publish sets the site's published state.
func (a *Activities) Publish(ctx context.Context, in PublishInput) (PublishResult, error) {
	res, err := a.api.Publish(a.calling(ctx, agentsite.ClassOnboarding), in.IdempotencyKey, in.SiteID, in.Published)
	if err != nil {
		return PublishResult{}, classify(err)
	}
	a.published(ctx, in)
	return PublishResult{Status: res.Status}, nil
}
