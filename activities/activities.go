package activities

import (
	"context"
	"iter"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
)

// API is the part of the Agent-Site client the activities use.
type API interface {
	CreateSite(ctx context.Context, idempotencyKey string, s agentsite.NewSite) (*agentsite.CreatedSite, error)
	UpdateAgent(ctx context.Context, idempotencyKey, siteID string, u agentsite.AgentUpdate) (*agentsite.Agent, error)
	AddKnowledge(ctx context.Context, idempotencyKey, siteID string, k agentsite.KnowledgeSource) (*agentsite.Knowledge, error)
	AddFAQ(ctx context.Context, idempotencyKey, siteID string, f agentsite.FAQ) (*agentsite.FAQ, error)
	Publish(ctx context.Context, idempotencyKey, siteID string, published bool) (*agentsite.PublishResult, error)
	LeadPages(ctx context.Context, siteID string, opts agentsite.ListLeadsOptions) iter.Seq2[*agentsite.LeadPage, error]
	CreateWebhookEndpoint(ctx context.Context, idempotencyKey string, e agentsite.NewWebhookEndpoint) (*agentsite.CreatedWebhookEndpoint, error)
	ListWebhookEndpoints(ctx context.Context) ([]agentsite.WebhookEndpoint, error)
	DeleteWebhookEndpoint(ctx context.Context, idempotencyKey, endpointID string) error
}

var _ API = (*agentsite.Client)(nil)

// Store is the part of the store the activities use.
type Store interface {
	UpsertLeads(ctx context.Context, siteID string, leads []agentsite.Lead) (int, error)
	KnowledgeText(ctx context.Context, hash string) (string, error)
	SetSiteWorkflow(ctx context.Context, siteID, workflowID string) error
	PutSecret(ctx context.Context, endpointID, receiver string, secret agentsite.SigningSecret) error
	RetireSecret(ctx context.Context, endpointID string, at time.Time) error
	SetRotation(ctx context.Context, endpointID, workflowID string) error
	ExpectSecret(ctx context.Context, receiver string, until time.Time) error
	EndRotation(ctx context.Context, endpointID string) error
}

var _ Store = (*store.Store)(nil)

// Activities are the activities of every siteops workflow.
type Activities struct {
	API   API
	Store Store
	Now   func() time.Time

	// leadsSynced counts lead records read and upserted (re-read pages
	// count again: it measures work, not distinct leads).
	leadsSynced metric.Int64Counter
}

// New returns Activities over the given dependencies, with their metrics
// on the global meter provider.
func New(api API, st Store) *Activities {
	synced, _ := otel.Meter("github.com/siteops/siteops/activities").Int64Counter("siteops.leads.synced",
		metric.WithDescription("Lead records read from the API and upserted into the store."))
	return &Activities{API: api, Store: st, Now: time.Now, leadsSynced: synced}
}
