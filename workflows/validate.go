package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/siteops/siteops/agentsite"
)

// Problem is one way an onboarding input breaks a rule.
type Problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
	// Position is where the field is written in a spec file, when known.
	Position
}

// Position is a place in a spec file; zero when unknown.
type Position struct {
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
}

func (p Problem) String() string { return p.Field + ": " + p.Message }

// In names the problem with its place in the file name, as compilers do:
// name:line:column: field: message.
func (p Problem) In(name string) string {
	switch {
	case p.Line > 0 && p.Column > 0:
		return fmt.Sprintf("%s:%d:%d: %s", name, p.Line, p.Column, p)
	case p.Line > 0:
		return fmt.Sprintf("%s:%d: %s", name, p.Line, p)
	}
	return fmt.Sprintf("%s: %s", name, p)
}

// Limits of an onboarding, so that its input and history stay far below
// Temporal's payload limits: texts live in the store, only hashes travel.
const (
	MaxKnowledgeSources = 500
	MaxFAQs             = 1000
	MaxFAQChars         = 10_000
	MaxFAQTotalChars    = 100_000
	MaxInlineTextChars  = 8_000
)

// MaxKnowledgeTimeout is the longest an onboarding may wait for its
// knowledge. Onboardings are Pinned to the build that started them, and a
// release removes the old build only once they have ended: the bound keeps
// that wait to a week.
const MaxKnowledgeTimeout = 7 * 24 * time.Hour

// Validate checks a whole onboarding input against every rule of the
// Agent-Site contract that can be checked before calling it, and returns
// every problem at once (nil when there are none). It is pure: the workflow
// runs it before any activity, and `siteops onboard --dry-run` runs it too.
func Validate(in OnboardingInput) []Problem {
	var ps []Problem
	add := func(field, format string, args ...any) {
		ps = append(ps, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	s := in.Site
	for _, f := range []struct{ name, v string }{{"site.title", s.Title}, {"site.slug", s.Slug}, {"site.type", s.Type}, {"site.template", s.Template}} {
		if strings.TrimSpace(f.v) == "" {
			add(f.name, "is required")
		}
	}
	if s.Slug != "" && (strings.ContainsAny(s.Slug, "/ \t\r\n") || len(s.Slug) > 63) {
		add("site.slug", "must be at most 63 characters without spaces or slashes (it names the workflow onboarding/<slug>)")
	}
	if s.Languages != nil && len(s.Languages) == 0 {
		add("site.languages", "needs at least one language code, e.g. en")
	}
	if in.Agent.Languages != nil && len(in.Agent.Languages) == 0 {
		add("agent.languages", "needs at least one language code, e.g. en")
	}
	if in.Agent.DisplayName != "" && strings.TrimSpace(in.Agent.DisplayName) == "" {
		add("agent.display_name", "is blank")
	}
	if err := agentsite.ValidateOrigins(in.Agent.AllowedOrigins); err != nil {
		for _, e := range unjoin(err) {
			var ve *agentsite.ValidationError
			if errors.As(e, &ve) {
				add("agent."+ve.Field, "%q: %s", ve.Value, ve.Reason)
			}
		}
	}
	if in.Agent.EmbedEnabled && len(in.Agent.AllowedOrigins) == 0 {
		add("agent.allowed_origins", "embed_enabled is true but no origin may embed the agent; list the exact origins of the sites that embed it")
	}

	if len(in.Knowledge) > MaxKnowledgeSources {
		add("knowledge", "has %d sources; at most %d per onboarding", len(in.Knowledge), MaxKnowledgeSources)
	}
	for i, k := range in.Knowledge {
		f := fmt.Sprintf("knowledge[%d]", i)
		if strings.TrimSpace(k.Name) == "" {
			add(f+".name", "is required")
		}
		switch {
		case k.TextHash == "" && k.Text == "":
			add(f+".text", "is required")
		case k.TextHash != "" && k.Text != "":
			add(f+".text", "give the text inline or by hash, not both")
		case k.Text != "" && k.Chars > MaxInlineTextChars:
			add(f+".text", "inline text of %d characters would enter workflow history; store it and pass text_hash (the starter does this)", k.Chars)
		}
		if k.Chars < agentsite.MinKnowledgeText || k.Chars > agentsite.MaxKnowledgeText {
			add(f+".text", "is %d characters; it must be %d to %d characters", k.Chars, agentsite.MinKnowledgeText, agentsite.MaxKnowledgeText)
		}
	}
	if len(in.FAQs) > MaxFAQs {
		add("faqs", "has %d entries; at most %d per onboarding", len(in.FAQs), MaxFAQs)
	}
	total := 0
	for i, f := range in.FAQs {
		field := fmt.Sprintf("faqs[%d]", i)
		total += len([]rune(f.Question)) + len([]rune(f.Answer))
		if strings.TrimSpace(f.Question) == "" {
			add(field+".question", "is required")
		}
		if strings.TrimSpace(f.Answer) == "" {
			add(field+".answer", "is required")
		}
		if n := len([]rune(f.Question)) + len([]rune(f.Answer)); n > MaxFAQChars {
			add(field, "is %d characters; at most %d", n, MaxFAQChars)
		}
	}
	if total > MaxFAQTotalChars {
		add("faqs", "hold %d characters in all; at most %d per onboarding (FAQs travel in workflow history)", total, MaxFAQTotalChars)
	}
	switch in.OnKnowledgeTimeout {
	case "", TimeoutFail, TimeoutProceed:
	default:
		add("on_knowledge_timeout", "must be %q or %q", TimeoutFail, TimeoutProceed)
	}
	switch d := in.KnowledgeTimeout.D(); {
	case d < 0:
		add("knowledge_timeout", "must not be negative")
	case d > MaxKnowledgeTimeout:
		add("knowledge_timeout", "is %s; the most an onboarding may wait for its knowledge is %s (7 days): its build keeps running until it ends", d, MaxKnowledgeTimeout)
	}
	return ps
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
