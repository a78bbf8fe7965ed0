package starter

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"sigs.k8s.io/yaml"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// Spec is an onboarding as a person writes it, in JSON or YAML.
type Spec struct {
	Site               agentsite.NewSite   `json:"site"`
	Agent              workflows.AgentSpec `json:"agent"`
	Knowledge          []SpecKnowledge     `json:"knowledge,omitempty"`
	FAQs               []agentsite.FAQ     `json:"faqs,omitempty"`
	WaitForKnowledge   bool                `json:"wait_for_knowledge,omitempty"`
	KnowledgeTimeout   workflows.Duration  `json:"knowledge_timeout,omitempty"`
	OnKnowledgeTimeout string              `json:"on_knowledge_timeout,omitempty"`
	SkipPublish        bool                `json:"skip_publish,omitempty"`
}

// SpecKnowledge is a knowledge source: its text inline, or in a file whose
// path is relative to the spec.
type SpecKnowledge struct {
	Name string `json:"name"`
	Text string `json:"text,omitempty"`
	File string `json:"file,omitempty"`

	fileErr error // why File could not be read; Prepare reports it
}

// LoadSpec reads a spec file (.json, .yaml or .yml). Unknown fields are
// refused so that a typo does not silently drop a setting. Knowledge files
// are read relative to the spec.
func LoadSpec(path string) (Spec, error) {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	return LoadSpecFS(os.DirFS(dir), name)
}

// LoadSpecFS reads a spec from fsys, with knowledge files relative to it.
func LoadSpecFS(fsys fs.FS, name string) (Spec, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return Spec{}, fmt.Errorf("reading the onboarding spec: %w", err)
	}
	var s Spec
	if err := yaml.UnmarshalStrict(b, &s); err != nil {
		return Spec{}, fmt.Errorf("%s: %w", name, err)
	}
	dir := path.Dir(name)
	for i, k := range s.Knowledge {
		if k.File == "" {
			continue
		}
		text, err := fs.ReadFile(fsys, path.Join(dir, k.File))
		if err != nil {
			s.Knowledge[i].fileErr = err
			continue
		}
		s.Knowledge[i].File, s.Knowledge[i].Text = "", string(text)
		if s.Knowledge[i].Text == "" {
			s.Knowledge[i].Text = " " // an empty file is reported as too short, not as missing
		}
	}
	return s, nil
}

// Prepared is an onboarding ready to start: the workflow input and the
// texts it refers to by hash.
type Prepared struct {
	Input workflows.OnboardingInput
	Texts map[string]string // hash → text
}

// Prepare turns a spec into a workflow input: it reads knowledge files,
// keys every text by its hash, and validates the whole input. It returns
// every problem at once.
func Prepare(s Spec) (Prepared, []workflows.Problem) {
	p := Prepared{Texts: map[string]string{}}
	in := workflows.OnboardingInput{
		Site: s.Site, Agent: s.Agent, FAQs: s.FAQs,
		WaitForKnowledge: s.WaitForKnowledge, KnowledgeTimeout: s.KnowledgeTimeout,
		OnKnowledgeTimeout: s.OnKnowledgeTimeout, SkipPublish: s.SkipPublish,
	}
	var problems []workflows.Problem
	var specIndex []int // spec position of each input source, for problem names
	for i, k := range s.Knowledge {
		field := fmt.Sprintf("knowledge[%d]", i)
		text := k.Text
		switch {
		case k.fileErr != nil:
			problems = append(problems, workflows.Problem{Field: field + ".file", Message: "cannot be read: " + k.fileErr.Error()})
			continue
		case k.File != "" && k.Text != "":
			problems = append(problems, workflows.Problem{Field: field, Message: "give text or file, not both"})
			continue
		case k.File != "":
			problems = append(problems, workflows.Problem{Field: field + ".file", Message: "was not read; load specs with LoadSpec"})
			continue
		}
		if !utf8.ValidString(text) {
			problems = append(problems, workflows.Problem{Field: field + ".text", Message: "is not valid UTF-8"})
			continue
		}
		spec := workflows.KnowledgeSpec{Name: k.Name, Chars: utf8.RuneCountInString(text)}
		if text != "" {
			spec.TextHash = store.KnowledgeHash(text)
			p.Texts[spec.TextHash] = text
		}
		in.Knowledge = append(in.Knowledge, spec)
		specIndex = append(specIndex, i)
	}
	p.Input = in
	for _, pr := range workflows.Validate(in) {
		var i int
		if n, _ := fmt.Sscanf(pr.Field, "knowledge[%d]", &i); n == 1 && i < len(specIndex) {
			pr.Field = strings.Replace(pr.Field, fmt.Sprintf("knowledge[%d]", i), fmt.Sprintf("knowledge[%d]", specIndex[i]), 1)
		}
		problems = append(problems, pr)
	}
	return p, problems
}
