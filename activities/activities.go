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
	UpsertLeadsAt(ctx context.Context, siteID, syncKey string, leads []agentsite.Lead, pos store.LeadSyncPosition) (int, error)
	LeadSyncPosition(ctx context.Context, siteID, syncKey string) (store.LeadSyncPosition, error)
	CountLeads(ctx context.Context, siteID string) (int, error)
	LeadSweepSites(ctx context.Context, after string, limit int) ([]store.LeadSweepSite, error)
	KnownLeads(ctx context.Context, siteID string, ids []string) (int, error)
	LeadSyncChecked(ctx context.Context, siteID, syncKey string, at time.Time) error
	RecordLeadSweepFailure(ctx context.Context, siteID, reason string, at time.Time) error
	ClearLeadSweepFailure(ctx context.Context, siteID string) error
	LeadSyncFrom(ctx context.Context, siteID string) (*agentsite.Cursor, error)
	RecordLeadSiteSync(ctx context.Context, r store.LeadSiteSync) error
	KnowledgeText(ctx context.Context, hash string) (string, error)
	SetSiteWorkflow(ctx context.Context, siteID, workflowID string) error
	SiteEvents(ctx context.Context, siteID string) ([]store.SiteEvent, error)
	CheckSecretKey(ctx context.Context) error
	PutSecretFrom(ctx context.Context, endpointID, receiver, origin string, secret agentsite.SigningSecret) error
	RetireSecret(ctx context.Context, endpointID string, at time.Time) error
	Retire(ctx context.Context, endpointID string, at time.Time) (store.SecretInfo, error)
	Secrets(ctx context.Context) ([]store.SecretInfo, error)
	SecretsFrom(ctx context.Context, originPrefix string) ([]store.SecretInfo, error)
	Rekey(ctx context.Context, oldKey []byte) (int, error)
	HasSecretKey() bool
	SetRotation(ctx context.Context, endpointID, workflowID string) error
	ExpectSecret(ctx context.Context, receiver, op string, until time.Time) error
	EndExpectation(ctx context.Context, receiver, op string) error
	EndRotation(ctx context.Context, endpointID string) error
}

var _ Store = (*store.Store)(nil)

// Options are what the activities run on.
type Options struct {
	API   API
	Store Store
	// Now is the activities' clock (time.Now when nil).
	Now func() time.Time
	// Receivers is where webhook endpoints may point; the zero value
	// allows nowhere, so a worker registers or rotates no endpoint until
	// it is told the deployment's public URLs.
	Receivers ReceiverPolicy
	// Classes gives each workflow type its class (workflows.ClassOf):
	// an activity's API calls wait in the rate limiter by the type of the
	// workflow that runs it (callClass), never by the priority key its run
	// was started with. Nil lists no type, and every call waits as bulk.
	Classes ClassOf
}

// withDefaults returns o with the clock filled in.
func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Activities are the activities of every siteops workflow.
type Activities struct {
	api       API
	store     Store
	now       func() time.Time
	receivers ReceiverPolicy
	classOf   ClassOf

	// leadsStored counts distinct leads stored for the first time;
	// pagesRead counts pages of leads read (a re-read page counts again).
	leadsStored metric.Int64Counter
	pagesRead   metric.Int64Counter
}

// New returns Activities of o, with their metrics on the global meter
// provider.
func New(o Options) *Activities {
	o = o.withDefaults()
	m := otel.Meter("github.com/siteops/siteops/activities")
	stored, _ := m.Int64Counter("siteops.leads.stored",
		metric.WithDescription("Distinct leads stored for the first time by lead syncs."))
	pages, _ := m.Int64Counter("siteops.lead.pages.read",
		metric.WithDescription("Pages of leads read from the API (a page read again counts again)."))
	return &Activities{api: o.API, store: o.Store, now: o.Now, receivers: o.Receivers, classOf: o.Classes, leadsStored: stored, pagesRead: pages}
}

// countPage counts a page read and the new leads it stored.
func (a *Activities) countPage(ctx context.Context, fresh int) {
	a.leadsStored.Add(ctx, int64(fresh))
	a.pagesRead.Add(ctx, 1)
}
