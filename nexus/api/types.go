package api

import "time"

// StoreKnowledgeInput is a knowledge text to store: 5 to 200,000
// characters of UTF-8.
type StoreKnowledgeInput struct {
	Text string `json:"text"`
}

// StoreKnowledgeOutput names a stored text: pass both to OnboardInput's
// knowledge as text_hash and chars. Storing the same text again returns the
// same hash.
type StoreKnowledgeOutput struct {
	TextHash string `json:"text_hash"`
	Chars    int    `json:"chars"`
}

// OnboardInput is an onboarding: the JSON of the Onboarding workflow's
// input (schemas/onboarding-input.schema.json), except that a knowledge
// source's text may be inline at any length (the service stores it and
// the workflow sees its hash) and chars may be left out (the service counts
// them).
type OnboardInput struct {
	Site      Site        `json:"site"`
	Agent     Agent       `json:"agent"`
	Knowledge []Knowledge `json:"knowledge,omitempty"`
	FAQs      []FAQ       `json:"faqs,omitempty"`
	// WaitForKnowledge holds publishing until every source is processed,
	// for at most KnowledgeTimeout (default 10m); then OnKnowledgeTimeout
	// says whether to fail (default) or publish anyway.
	WaitForKnowledge   bool     `json:"wait_for_knowledge,omitempty"`
	KnowledgeTimeout   Duration `json:"knowledge_timeout,omitempty"`
	OnKnowledgeTimeout string   `json:"on_knowledge_timeout,omitempty"`
	// SkipPublish leaves the site in draft.
	SkipPublish bool `json:"skip_publish,omitempty"`
}

// Site is the site to create; its slug names the onboarding
// (onboarding/<slug>).
type Site struct {
	Title       string      `json:"title"`
	Slug        string      `json:"slug"`
	Type        string      `json:"type"`
	Template    string      `json:"template"`
	Content     SiteContent `json:"content"`
	PersonaMode string      `json:"persona_mode"`
	Languages   []string    `json:"languages"`
}

// SiteContent is the site's text.
type SiteContent struct {
	Headline    string `json:"headline"`
	Subheadline string `json:"subheadline"`
	About       string `json:"about"`
}

// Agent is the agent's configuration and embed policy.
type Agent struct {
	DisplayName    string   `json:"display_name,omitempty"`
	PersonaMode    string   `json:"persona_mode,omitempty"`
	Instructions   string   `json:"instructions,omitempty"`
	Languages      []string `json:"languages,omitempty"`
	EmbedEnabled   bool     `json:"embed_enabled"`
	AllowedOrigins []string `json:"allowed_origins,omitempty"`
}

// Knowledge is one knowledge source: by TextHash (from StoreKnowledge) or
// inline in Text, not both.
type Knowledge struct {
	Name     string `json:"name"`
	TextHash string `json:"text_hash,omitempty"`
	Text     string `json:"text,omitempty"`
	// Chars is the text's length in code points; counted by the service
	// when left out.
	Chars int `json:"chars,omitempty"`
}

// FAQ is a question and its answer; Approved marks it as confirmed.
type FAQ struct {
	ID       string `json:"id,omitempty"`
	Question string `json:"question"`
	Answer   string `json:"answer"`
	Approved bool   `json:"approved"`
}

// OnboardResult is what an onboarding made.
type OnboardResult struct {
	SiteID            string   `json:"site_id"`
	Status            string   `json:"status"`
	KnowledgeIDs      []string `json:"knowledge_ids"`
	FAQIDs            []string `json:"faq_ids"`
	KnowledgeReady    int      `json:"knowledge_ready"`
	KnowledgeTimedOut bool     `json:"knowledge_timed_out,omitempty"`
}

// OnboardingStatusInput names an onboarding by its site's slug.
type OnboardingStatusInput struct {
	Slug string `json:"slug"`
}

// Onboarding is how an onboarding stands.
type Onboarding struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	// Status is Running, Completed, Failed, Canceled, Terminated or
	// TimedOut.
	Status    string    `json:"status"`
	StartedAt time.Time `json:"started_at"`
	ClosedAt  time.Time `json:"closed_at,omitzero"`
	// Progress is the step it is at, as the workflow reports it.
	Progress *OnboardingProgress `json:"progress,omitempty"`
	// Result is set once it completed.
	Result *OnboardResult `json:"result,omitempty"`
	// Failure is the root cause of an onboarding that did not succeed.
	Failure *Failure `json:"failure,omitempty"`
}

// OnboardingProgress is the Onboarding workflow's status query.
type OnboardingProgress struct {
	Step           string `json:"step"`
	SiteID         string `json:"site_id,omitempty"`
	KnowledgeTotal int    `json:"knowledge_total"`
	KnowledgeAdded int    `json:"knowledge_added"`
	KnowledgeReady int    `json:"knowledge_ready"`
	FAQsAdded      int    `json:"faqs_added"`
	LastSiteEvent  string `json:"last_site_event,omitempty"`
	Error          string `json:"error,omitempty"`
}

// Failure is the root cause of a workflow that did not succeed: the
// innermost message, its error type and, when the Agent-Site API answered,
// its status, code and request id.
type Failure struct {
	Message   string `json:"message"`
	Type      string `json:"type,omitempty"`
	Status    int    `json:"status,omitempty"`
	Code      string `json:"code,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// LeadSyncStatusInput names a site's lead sync.
type LeadSyncStatusInput struct {
	SiteID string `json:"site_id"`
}

// LeadSyncProgress is the LeadSync workflow's progress query.
type LeadSyncProgress struct {
	Leads           int       `json:"leads"`
	Pages           int       `json:"pages"`
	LeadsRead       int       `json:"leads_read"`
	Syncs           int       `json:"syncs"`
	LastSyncAt      time.Time `json:"last_sync_at"`
	CaughtUp        bool      `json:"caught_up"`
	Syncing         bool      `json:"syncing"`
	Events          int       `json:"events"`
	DuplicateEvents int       `json:"duplicate_events"`
	Runs            int       `json:"runs"`
}
