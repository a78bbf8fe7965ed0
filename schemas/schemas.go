// Package schemas publishes the JSON Schemas (draft 2020-12) of what
// siteops reads and answers: the onboarding spec file that `siteops onboard
// -f` reads; the input and the result of every workflow, the answers of
// their status queries and the messages a caller may send them; and the
// input and output of every operation of the Nexus service. They are
// generated from the Go types that read and write those documents (`go
// generate ./schemas`, see schemagen), never written by hand, and
// a test fails when they no longer match the types.
//
// Validate checks a JSON or YAML document against one of them, every
// problem at once with its line and column; it understands exactly the
// keywords the generator writes (type, properties, required,
// additionalProperties, items, minItems, maxItems, enum, pattern,
// minLength, maxLength, minimum, maximum; format and descriptions are
// annotations), not JSON Schema at large.
package schemas

import "embed"

//go:generate go run ../schemagen/cmd/schemagen

// The schema files, by name.
const (
	// OnboardingSpec is a spec file of siteops onboard -f.
	OnboardingSpec = "onboarding-spec.schema.json"

	// The workflows: inputs, results, status queries' answers, and the
	// signals and updates a caller may send.
	OnboardingInput           = "onboarding-input.schema.json"
	OnboardingResult          = "onboarding-result.schema.json"
	OnboardingStatus          = "onboarding-status.schema.json"
	LeadSyncInput             = "lead-sync-input.schema.json"
	LeadSyncProgress          = "lead-sync-progress.schema.json"
	LeadSyncSyncSignal        = "lead-sync-sync-signal.schema.json"
	EmbedIncidentInput        = "embed-incident-input.schema.json"
	EmbedIncidentStatus       = "embed-incident-status.schema.json"
	EmbedIncidentAwaitOff     = "embed-incident-await-off-update.schema.json"
	EmbedIncidentAwaitOffDone = "embed-incident-await-off-result.schema.json"
	EmbedIncidentDecide       = "embed-incident-decide-update.schema.json"
	SecretRotationInput       = "secret-rotation-input.schema.json"
	SecretRotationStatus      = "secret-rotation-status.schema.json"
	SecretRotationDecide      = "secret-rotation-decide-update.schema.json"
	EndpointRegistration      = "endpoint-registration-input.schema.json"
	EndpointRegistrationState = "endpoint-registration-status.schema.json"
	SecretReconcileInput      = "secret-reconcile-input.schema.json"
	SecretReconcileStatus     = "secret-reconcile-status.schema.json"
	LeadSweepInput            = "lead-sweep-input.schema.json"
	LeadSweepStatus           = "lead-sweep-status.schema.json"
	LeadEventsInput           = "lead-events-input.schema.json"
	LeadEventsStatus          = "lead-events-status.schema.json"

	// The operations of the Nexus service siteops.
	NexusStoreKnowledgeInput   = "nexus-store-knowledge-input.schema.json"
	NexusStoreKnowledgeOutput  = "nexus-store-knowledge-output.schema.json"
	NexusOnboardInput          = "nexus-onboard-input.schema.json"
	NexusOnboardOutput         = "nexus-onboard-output.schema.json"
	NexusOnboardingStatusInput = "nexus-onboarding-status-input.schema.json"
	NexusOnboardingStatus      = "nexus-onboarding-status-output.schema.json"
	NexusLeadSyncStatusInput   = "nexus-lead-sync-status-input.schema.json"
	NexusLeadSyncStatus        = "nexus-lead-sync-status-output.schema.json"
)

//go:embed *.schema.json
var files embed.FS

// File returns the bytes of the schema file name.
func File(name string) ([]byte, error) { return files.ReadFile(name) }
