// Package api is the contract of siteops' Nexus service for the systems
// that call it — the partners that onboard customers: the service name,
// the operation names, typed references for
// workflow.NexusClient.ExecuteOperation, the operations' input and output
// types, and the error types a caller can tell apart. The on-call
// playbooks are not part of it: NotServed lists the names the service
// refuses.
//
// It imports the standard library and the Nexus SDK's operation
// references (github.com/nexus-rpc/sdk-go/nexus, itself standard library
// only), and no package of siteops, so that a caller imports it without
// pulling siteops in; a test keeps it so. Its types, Duration included,
// write the same JSON as the siteops types they mirror (OnboardInput is
// workflows.OnboardingInput on the wire, and so on); a test in package
// nexus keeps them in step.
//
// A caller workflow reaches the service through a Nexus endpoint that
// targets siteops' namespace and task queue:
//
//	c := workflow.NewNexusClient("siteops", api.ServiceName)
//	var stored api.StoreKnowledgeOutput
//	err := c.ExecuteOperation(ctx, api.StoreKnowledge, api.StoreKnowledgeInput{Text: text}, workflow.NexusOperationOptions{}).Get(ctx, &stored)
//
// Callers without a Temporal SDK use the same operations over HTTP (see
// "Calling siteops from other systems" in the README).
package api

import "github.com/nexus-rpc/sdk-go/nexus"

// ServiceName is the name of siteops' Nexus service.
const ServiceName = "siteops"

// Operation names.
const (
	// StoreKnowledgeName stores a knowledge text and returns its hash
	// (synchronous).
	StoreKnowledgeName = "store-knowledge"
	// OnboardName onboards a site; its result is the onboarding's result
	// (asynchronous: a run of the Onboarding workflow).
	OnboardName = "onboard"
	// OnboardingStatusName reports how an onboarding stands (synchronous).
	OnboardingStatusName = "onboarding-status"
	// LeadSyncStatusName reports a site's lead sync progress (synchronous).
	LeadSyncStatusName = "lead-sync-status"
)

// The on-call playbooks, which releases before 2026-11-25 served through
// the service. They are refused (UNAUTHORIZED, ErrTypeNotServed): nothing
// in a Nexus request authenticates its caller, so whoever reached the
// service could switch a site's embed off, or on with origins of their
// own, or move every webhook to a URL of their own. On-call runs them with
// the siteops CLI.
const (
	EmbedOffName     = "embed-off"
	EmbedOnName      = "embed-on"
	RotateSecretName = "rotate-secret"
)

// NotServed lists the operation names the service refuses.
var NotServed = []string{EmbedOffName, EmbedOnName, RotateSecretName}

// Typed references to the operations, for workflow.NexusClient.
var (
	StoreKnowledge   = nexus.NewOperationReference[StoreKnowledgeInput, StoreKnowledgeOutput](StoreKnowledgeName)
	Onboard          = nexus.NewOperationReference[OnboardInput, OnboardResult](OnboardName)
	OnboardingStatus = nexus.NewOperationReference[OnboardingStatusInput, Onboarding](OnboardingStatusName)
	LeadSyncStatus   = nexus.NewOperationReference[LeadSyncStatusInput, LeadSyncProgress](LeadSyncStatusName)
)

// Error types. A refused request is a Nexus handler error (BAD_REQUEST,
// NOT_FOUND, UNAUTHORIZED or RESOURCE_EXHAUSTED) whose cause is an
// application error of one of these types; an operation that ran and
// failed carries the root cause's own type (an
// activity error type such as NotFound or Unprocessable, a workflow's such
// as KnowledgeNotReady).
const (
	// ErrTypeInvalidSpec: the onboarding input breaks the contract; the
	// message lists every problem (the Onboarding workflow's own type).
	ErrTypeInvalidSpec = "InvalidOnboardingSpec"
	// ErrTypeSpecConflict: the slug was onboarded, or is being onboarded,
	// from a different spec; a slug is onboarded once.
	ErrTypeSpecConflict = "OnboardingSpecConflict"
	// ErrTypeInvalidInput: another operation's input is incomplete or
	// malformed.
	ErrTypeInvalidInput = "InvalidInput"
	// ErrTypeNotFound: the onboarding, lead sync or open incident asked
	// for does not exist (unlike NotFound, the Agent-Site API's 404 that
	// fails an operation that ran).
	ErrTypeNotFound = "WorkflowNotFound"
	// ErrTypeRejected: the workflow refused the request before acting on
	// it (a decision that does not apply, origins that are not exact).
	ErrTypeRejected = "Rejected"
	// ErrTypeNotServed: the operation is an on-call playbook, which the
	// service does not serve (NotServed).
	ErrTypeNotServed = "NotServed"
	// ErrTypeQuotaExceeded: the caller's knowledge texts, or every
	// caller's together, take the bytes the quota allows; texts no
	// onboarding used for the retention period are purged.
	ErrTypeQuotaExceeded = "QuotaExceeded"
	// ErrTypeTooManyOnboardings: the caller has as many onboardings
	// running as siteops allows one caller (the message names the limit
	// and its setting); nothing was started. Try again once one of them
	// ended. Joining an onboarding that runs is never refused so.
	ErrTypeTooManyOnboardings = "TooManyOnboardings"
)
