// Package schemas publishes the JSON Schemas (draft 2020-12) of siteops'
// inputs: the onboarding spec file that `siteops onboard -f` reads, the
// input of every workflow, and the input of the Nexus service's onboard
// operation. They are generated from the Go types that read those
// documents (`go generate ./schemas`, see internal/generate), never written
// by hand, and a test fails when they no longer match the types.
//
// Validate checks a JSON or YAML document against one of them, every
// problem at once with its line and column; it understands exactly the
// keywords the generator writes (type, properties, required,
// additionalProperties, items, pattern, minimum; format and descriptions
// are annotations), not JSON Schema at large.
package schemas

import "embed"

//go:generate go run ./internal/gen

// The schema files, by name.
const (
	OnboardingSpec       = "onboarding-spec.schema.json"
	OnboardingInput      = "onboarding-input.schema.json"
	LeadSyncInput        = "lead-sync-input.schema.json"
	EmbedIncidentInput   = "embed-incident-input.schema.json"
	SecretRotationInput  = "secret-rotation-input.schema.json"
	EndpointRegistration = "endpoint-registration-input.schema.json"
	NexusOnboardInput    = "nexus-onboard-input.schema.json"
)

//go:embed *.schema.json
var files embed.FS

// File returns the bytes of the schema file name.
func File(name string) ([]byte, error) { return files.ReadFile(name) }
