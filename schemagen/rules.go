package schemagen

import (
	"errors"
	"reflect"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

// OriginPattern is the shape of an allowed origin: scheme://host[:port],
// http or https in any case, a host name of letters, digits and hyphens
// (or a dotted IPv4 address, or an IPv6 address in brackets), an optional
// port of 1 to 5 digits without a leading zero, and nothing after it: no
// path (not even "/"), query, fragment, credentials or wildcard.
// agentsite.ValidateOrigin checks the rest (a port above 65535, a host
// ending in a number that is not an IPv4 address, an entry listed twice).
const OriginPattern = `^[hH][tT][tT][pP][sS]?://([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(:[1-9][0-9]{0,4})?$`

// slugPattern is a slug: it names the workflow onboarding/<slug>, so it has
// no slash and no whitespace (workflows.Validate).
const slugPattern = `^[^/ \t\r\n]+$`

// rule is what a schema states of one field beyond its shape.
type rule struct {
	field object // keywords for the field's own schema
	items object // keywords for each item of a list field
}

// apply returns s with the rule's keywords.
func (r rule) apply(s object) (object, error) {
	out := append(append(object{}, s...), r.field...)
	if len(r.items) == 0 {
		return out, nil
	}
	for i, p := range out {
		if p.k == "items" {
			out[i].v = append(append(object{}, p.v.(object)...), r.items...)
			return out, nil
		}
	}
	return nil, errors.New("rules give item keywords to a field that is not a list")
}

func text(minChars, maxChars int) rule {
	return rule{field: object{{"minLength", minChars}, {"maxLength", maxChars}}}
}

func maxItems(n int) rule { return rule{field: object{{"maxItems", n}}} }

func oneOf(values ...string) rule { return rule{field: object{{"enum", values}}} }

var (
	atLeastOne = rule{field: object{{"minItems", 1}}}
	origins    = rule{items: object{{"pattern", OriginPattern}}}
	slug       = rule{field: object{{"pattern", slugPattern}, {"maxLength", 63}}}
	faqField   = rule{field: object{{"maxLength", workflows.MaxFAQChars}}}
	// onTimeout is on_knowledge_timeout: empty is the default, fail.
	onTimeout = oneOf("", workflows.TimeoutFail, workflows.TimeoutProceed)
)

// eventTypes are the event types an endpoint may subscribe to: those the
// service emits, not the retired domain.activated.
func eventTypes() rule {
	var names []string
	for _, t := range webhook.EventTypes() {
		names = append(names, string(t))
	}
	return rule{field: object{{"minItems", 1}}, items: object{{"enum", names}}}
}

// rules are the contract's and siteops' rules that a schema can state, by
// type and JSON field: the shape of an allowed origin, a knowledge text's 5
// to 200,000 characters (code points, which minLength and maxLength count
// too), the limits of an onboarding (workflows.MaxKnowledgeSources,
// MaxFAQs, MaxFAQChars, MaxInlineTextChars), a slug's form, and the values
// a field takes. What they cannot state stays with the code that reads the
// documents (workflows.Validate, agentsite's validators, the workflows'
// update validators): a text inline or by hash but not both, a FAQ's
// question and answer together at most 10,000 characters and all FAQs
// 100,000, an origin listed twice. No rule refuses what that code accepts.
var rules = map[reflect.Type]map[string]rule{
	reflect.TypeFor[agentsite.NewSite](): {"slug": slug, "languages": atLeastOne},
	reflect.TypeFor[api.Site]():          {"slug": slug, "languages": atLeastOne},
	reflect.TypeFor[workflows.AgentSpec](): {
		"languages": atLeastOne, "allowed_origins": origins,
	},
	reflect.TypeFor[api.Agent](): {"languages": atLeastOne, "allowed_origins": origins},

	reflect.TypeFor[starter.Spec](): {
		"knowledge": maxItems(workflows.MaxKnowledgeSources), "faqs": maxItems(workflows.MaxFAQs), "on_knowledge_timeout": onTimeout,
	},
	reflect.TypeFor[workflows.OnboardingInput](): {
		"knowledge": maxItems(workflows.MaxKnowledgeSources), "faqs": maxItems(workflows.MaxFAQs), "on_knowledge_timeout": onTimeout,
	},
	reflect.TypeFor[api.OnboardInput](): {
		"knowledge": maxItems(workflows.MaxKnowledgeSources), "faqs": maxItems(workflows.MaxFAQs), "on_knowledge_timeout": onTimeout,
	},

	// A spec's text is stored by the starter, and the onboard operation's
	// by the service, so either may be as long as the contract allows; the
	// workflow's own input holds only short texts inline.
	reflect.TypeFor[starter.SpecKnowledge](): {"text": text(agentsite.MinKnowledgeText, agentsite.MaxKnowledgeText)},
	reflect.TypeFor[workflows.KnowledgeSpec](): {
		"text":  text(agentsite.MinKnowledgeText, workflows.MaxInlineTextChars),
		"chars": {field: object{{"minimum", agentsite.MinKnowledgeText}, {"maximum", agentsite.MaxKnowledgeText}}},
	},
	reflect.TypeFor[api.Knowledge](): {
		"text":  text(agentsite.MinKnowledgeText, agentsite.MaxKnowledgeText),
		"chars": {field: object{{"minimum", 0}, {"maximum", agentsite.MaxKnowledgeText}}},
	},
	reflect.TypeFor[api.StoreKnowledgeInput](): {"text": text(agentsite.MinKnowledgeText, agentsite.MaxKnowledgeText)},

	reflect.TypeFor[agentsite.FAQ](): {"question": faqField, "answer": faqField},
	reflect.TypeFor[api.FAQ]():       {"question": faqField, "answer": faqField},

	reflect.TypeFor[workflows.EmbedDecision](): {
		"action": oneOf(workflows.DecisionRestore, workflows.DecisionClose), "allowed_origins": origins,
	},
	reflect.TypeFor[workflows.RotationDecision]():          {"action": oneOf(workflows.RotationProceed, workflows.RotationAbort)},
	reflect.TypeFor[workflows.EndpointRegistrationInput](): {"events": eventTypes()},
}
