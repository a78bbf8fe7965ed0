package schemagen

import (
	"reflect"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

// required lists, for each struct type of an input, the JSON fields a
// document must hold: those whose absence the code that reads the document
// refuses. (In an output, every field Go always writes is required; see
// File.Output.) It
// is deliberately not read off the json tags. A field without omitempty is
// one Go always writes, not one a reader needs: agent.embed_enabled and
// faqs[].approved default to false, and siteops has always accepted
// documents without them. A type that is not listed requires nothing.
//
// Each group names the check it follows; TestRequiredIsWhatTheCodeRequires
// (package schemas, for the spec and the workflow input) and
// TestOnboardSchemaRequiresWhatTheServiceRequires (package nexus) drop
// every field of a complete document in turn and hold this list to those
// checks. A rule of the form "this field or that one" (a knowledge
// source's text, file or text_hash) is left to the checks: the keywords
// the generator writes cannot say it.
var required = map[reflect.Type][]string{
	// The onboarding spec and the Onboarding workflow's input:
	// workflows.Validate, which starter.Prepare and the workflow run,
	// needs a site's title, slug, type and template, a knowledge source's
	// name and length (chars, which the starter counts for a spec), and a
	// FAQ's question and answer.
	reflect.TypeFor[starter.Spec]():              {"site"},
	reflect.TypeFor[workflows.OnboardingInput](): {"site"},
	reflect.TypeFor[agentsite.NewSite]():         {"title", "slug", "type", "template"},
	reflect.TypeFor[starter.SpecKnowledge]():     {"name"},
	reflect.TypeFor[workflows.KnowledgeSpec]():   {"name", "chars"},
	reflect.TypeFor[agentsite.FAQ]():             {"question", "answer"},

	// The onboard operation of the Nexus service: the same rules, after the
	// service has counted the characters of every text (nexus.prepare).
	reflect.TypeFor[api.OnboardInput](): {"site"},
	reflect.TypeFor[api.Site]():         {"title", "slug", "type", "template"},
	reflect.TypeFor[api.Knowledge]():    {"name"},
	reflect.TypeFor[api.FAQ]():          {"question", "answer"},

	// The other workflows, by the checks they make before they act: the
	// lead sync's first page (agentsite's ListLeads refuses an empty site
	// id), an embed incident's setup (site id and reason), a rotation's
	// setup (old endpoint and new URL) and a registration's (URL and at
	// least one event type). An empty receiver is the default one
	// (POST /webhooks), so receiver is not required.
	reflect.TypeFor[workflows.LeadSyncInput]():             {"site_id"},
	reflect.TypeFor[workflows.EmbedIncidentInput]():        {"site_id", "reason"},
	reflect.TypeFor[workflows.SecretRotationInput]():       {"old_endpoint_id", "new_url"},
	reflect.TypeFor[workflows.EndpointRegistrationInput](): {"url", "events"},

	// The updates a caller sends, by their validators: a decision without
	// an action is refused before it enters history.
	reflect.TypeFor[workflows.EmbedDecision]():    {"action"},
	reflect.TypeFor[workflows.RotationDecision](): {"action"},

	// The Nexus service's other operations: store-knowledge counts its
	// text (an empty one is refused as too short), onboarding-status needs
	// a slug and lead-sync-status a site id.
	reflect.TypeFor[api.StoreKnowledgeInput]():   {"text"},
	reflect.TypeFor[api.OnboardingStatusInput](): {"slug"},
	reflect.TypeFor[api.LeadSyncStatusInput]():   {"site_id"},
}
