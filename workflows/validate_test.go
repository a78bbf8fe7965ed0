package workflows_test

import (
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/workflows"
)

func validInput() workflows.OnboardingInput {
	return workflows.OnboardingInput{
		Site:      agentsite.NewSite{Title: "T", Slug: "t", Type: "business", Template: "minimal"},
		Agent:     workflows.AgentSpec{EmbedEnabled: true, AllowedOrigins: []string{"https://t.example"}},
		Knowledge: []workflows.KnowledgeSpec{{Name: "n", TextHash: strings.Repeat("a", 64), Chars: 10}},
		FAQs:      []agentsite.FAQ{{Question: "q", Answer: "a"}},
	}
}

func TestValidate(t *testing.T) {
	if ps := workflows.Validate(validInput()); ps != nil {
		t.Fatalf("a valid input has problems: %v", ps)
	}
	tests := []struct {
		name   string
		change func(in *workflows.OnboardingInput)
		field  string
	}{
		{"no title", func(in *workflows.OnboardingInput) { in.Site.Title = " " }, "site.title"},
		{"no slug", func(in *workflows.OnboardingInput) { in.Site.Slug = "" }, "site.slug"},
		{"slug with slash", func(in *workflows.OnboardingInput) { in.Site.Slug = "a/b" }, "site.slug"},
		{"no type", func(in *workflows.OnboardingInput) { in.Site.Type = "" }, "site.type"},
		{"no template", func(in *workflows.OnboardingInput) { in.Site.Template = "" }, "site.template"},
		{"empty languages", func(in *workflows.OnboardingInput) { in.Site.Languages = []string{} }, "site.languages"},
		{"origin with path", func(in *workflows.OnboardingInput) { in.Agent.AllowedOrigins = []string{"https://t.example/"} }, "agent.allowed_origins[0]"},
		{"wildcard origin", func(in *workflows.OnboardingInput) { in.Agent.AllowedOrigins = []string{"https://*.t.example"} }, "agent.allowed_origins[0]"},
		{"embed on without origins", func(in *workflows.OnboardingInput) { in.Agent.AllowedOrigins = nil }, "agent.allowed_origins"},
		{"knowledge without name", func(in *workflows.OnboardingInput) { in.Knowledge[0].Name = "" }, "knowledge[0].name"},
		{"knowledge too short", func(in *workflows.OnboardingInput) { in.Knowledge[0].Chars = 4 }, "knowledge[0].text"},
		{"knowledge too long", func(in *workflows.OnboardingInput) { in.Knowledge[0].Chars = 200_001 }, "knowledge[0].text"},
		{"knowledge without text", func(in *workflows.OnboardingInput) { in.Knowledge[0].TextHash = "" }, "knowledge[0].text"},
		{"big inline text", func(in *workflows.OnboardingInput) {
			in.Knowledge[0] = workflows.KnowledgeSpec{Name: "n", Text: strings.Repeat("x", 9000), Chars: 9000}
		}, "knowledge[0].text"},
		{"FAQ without question", func(in *workflows.OnboardingInput) { in.FAQs[0].Question = "" }, "faqs[0].question"},
		{"FAQ without answer", func(in *workflows.OnboardingInput) { in.FAQs[0].Answer = "" }, "faqs[0].answer"},
		{"too many sources", func(in *workflows.OnboardingInput) {
			in.Knowledge = make([]workflows.KnowledgeSpec, workflows.MaxKnowledgeSources+1)
			for i := range in.Knowledge {
				in.Knowledge[i] = workflows.KnowledgeSpec{Name: "n", TextHash: "h", Chars: 10}
			}
		}, "knowledge"},
		{"FAQs too large in all", func(in *workflows.OnboardingInput) {
			for range 20 {
				in.FAQs = append(in.FAQs, agentsite.FAQ{Question: "q", Answer: strings.Repeat("a", 9000)})
			}
		}, "faqs"},
		{"bad timeout policy", func(in *workflows.OnboardingInput) { in.OnKnowledgeTimeout = "retry" }, "on_knowledge_timeout"},
		{"knowledge timeout past a week", func(in *workflows.OnboardingInput) {
			in.KnowledgeTimeout = workflows.Duration(workflows.MaxKnowledgeTimeout + time.Second)
		}, "knowledge_timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := validInput()
			tc.change(&in)
			ps := workflows.Validate(in)
			found := false
			for _, p := range ps {
				if p.Field == tc.field {
					found = true
				}
			}
			if !found {
				t.Errorf("problems %v do not name %s", ps, tc.field)
			}
		})
	}
	// Every problem at once.
	in := validInput()
	in.Site.Title, in.Site.Slug, in.FAQs[0].Answer = "", "", ""
	if ps := workflows.Validate(in); len(ps) != 3 {
		t.Errorf("three problems reported as %d: %v", len(ps), ps)
	}
}
