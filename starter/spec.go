package starter

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v4"
	sigsyaml "sigs.k8s.io/yaml"

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

	// name is the spec's file name, and positions where each field path
	// is written in it, so that problems point at their line; doc is the
	// document as read, for CheckSpec's schema check.
	name      string
	positions map[string]workflows.Position
	doc       []byte
}

// SpecKnowledge is a knowledge source: its text inline, or in a file whose
// path is relative to the spec.
type SpecKnowledge struct {
	Name string `json:"name"`
	Text string `json:"text,omitempty"`
	File string `json:"file,omitempty"`

	fileErr error // why File could not be read; Prepare reports it
}

// SpecError is a spec that cannot be read as an onboarding: every problem
// found, each with its line and column.
type SpecError struct {
	Name     string
	Problems []workflows.Problem
}

func (e *SpecError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return fmt.Sprintf("%s: %s", e.Name, strings.Join(lines, "; "))
}

// LoadSpec reads a spec file (.json, .yaml or .yml), or standard input
// when path is "-". Unknown fields are refused so that a typo does not
// silently drop a setting. Knowledge files are read relative to the spec
// (to the working directory for standard input). A spec that cannot be
// read as an onboarding is a *SpecError naming every problem with its line.
func LoadSpec(path string) (Spec, error) {
	if path == "-" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return Spec{}, fmt.Errorf("reading the onboarding spec from standard input: %w", err)
		}
		return ParseSpec("<stdin>", b, os.DirFS("."), ".")
	}
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
	return ParseSpec(name, b, fsys, path.Dir(name))
}

// ParseSpec reads a spec from b; name names it in problems, and knowledge
// files are read from dir in fsys.
func ParseSpec(name string, b []byte, fsys fs.FS, dir string) (Spec, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return Spec{}, &SpecError{Name: name, Problems: []workflows.Problem{syntaxProblem(err, b)}}
	}
	w := &specWalk{positions: map[string]workflows.Position{}}
	if len(root.Content) > 0 {
		w.walk("", root.Content[0], reflect.TypeFor[Spec]())
	} else {
		w.problem("", &root, "the spec is empty")
	}
	if len(w.problems) > 0 {
		return Spec{}, &SpecError{Name: name, Problems: w.problems}
	}
	s := Spec{name: name, positions: w.positions}
	if err := sigsyaml.UnmarshalStrict(b, &s); err != nil {
		// The walk found nothing, so this is a value the walk does not
		// know how to check (a duration that does not parse, say).
		return Spec{}, &SpecError{Name: name, Problems: []workflows.Problem{{Field: "(spec)", Message: err.Error()}}}
	}
	s.name, s.positions, s.doc = name, w.positions, b
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

// syntaxProblem places a YAML (or JSON, which is YAML) syntax error at
// its line and column: where the parser found it, or, when that is the end
// of the spec (a list, an object or a quote left open), where the
// construct it was reading starts.
func syntaxProblem(err error, b []byte) workflows.Problem {
	var le *yaml.LoadError
	if !errors.As(err, &le) {
		return workflows.Problem{Field: "(syntax)", Message: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	p := workflows.Problem{Field: "(syntax)", Message: le.Message, Position: workflows.Position{Line: le.Mark.Line, Column: le.Mark.Column}}
	atEnd := le.Mark.Index >= len(strings.TrimRight(string(b), " \t\r\n"))
	if atEnd && le.ContextMark.Line > 0 {
		p.Position = workflows.Position{Line: le.ContextMark.Line, Column: le.ContextMark.Column}
		p.Message += " before the end of the spec"
		if le.ContextMsg != "" {
			p.Message += " (" + le.ContextMsg + " that starts here)"
		}
	}
	return p
}

// specWalk checks a parsed spec against the Go types field by field, so
// that every unknown field and every value of the wrong kind is reported
// at once with its line, and records where each field is written.
type specWalk struct {
	positions map[string]workflows.Position
	problems  []workflows.Problem
}

func (w *specWalk) problem(path string, n *yaml.Node, format string, args ...any) {
	field := path
	if field == "" {
		field = "(spec)"
	}
	w.problems = append(w.problems, workflows.Problem{Field: field, Message: fmt.Sprintf(format, args...), Position: workflows.Position{Line: n.Line, Column: n.Column}})
}

var durationType = reflect.TypeFor[workflows.Duration]()

func (w *specWalk) walk(path string, n *yaml.Node, t reflect.Type) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	w.positions[path] = workflows.Position{Line: n.Line, Column: n.Column}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // null leaves the zero value
	}
	switch {
	case t == durationType:
		if n.Kind != yaml.ScalarNode {
			w.problem(path, n, "must be a duration such as \"90s\" or \"10m\"")
		}
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			w.problem(path, n, "must be an object with the fields %s", strings.Join(jsonFields(t), ", "))
			return
		}
		fields := jsonFieldTypes(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			sub := key.Value
			if path != "" {
				sub = path + "." + key.Value
			}
			ft, ok := fields[key.Value]
			if !ok {
				msg := fmt.Sprintf("unknown field %q", key.Value)
				if near := nearest(key.Value, jsonFields(t)); near != "" {
					msg += fmt.Sprintf("; did you mean %q?", near)
				}
				w.problems = append(w.problems, workflows.Problem{Field: sub, Message: msg, Position: workflows.Position{Line: key.Line, Column: key.Column}})
				continue
			}
			w.walk(sub, val, ft)
		}
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.problem(path, n, "must be a list")
			return
		}
		for i, item := range n.Content {
			w.walk(fmt.Sprintf("%s[%d]", path, i), item, t.Elem())
		}
	case t.Kind() == reflect.String:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0) {
			w.problem(path, n, "must be a string (quote it)")
		}
	case t.Kind() == reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			w.problem(path, n, "must be true or false")
		}
	case t.Kind() == reflect.Int:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			w.problem(path, n, "must be a whole number")
		}
	case t.Kind() == reflect.Pointer:
		w.walk(path, n, t.Elem())
	}
}

// jsonFieldTypes maps the JSON names of t's exported fields to their types.
func jsonFieldTypes(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func jsonFields(t reflect.Type) []string {
	var names []string
	for name := range jsonFieldTypes(t) {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// nearest suggests the field a typo meant: one at most two edits away.
func nearest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := EditDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// EditDistance is the Levenshtein distance between a and b, in bytes (the
// names it compares are ASCII): what the spec's and the CLI's "did you
// mean" suggestions measure nearness by.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Prepared is an onboarding ready to start: the workflow input and the
// texts it refers to by hash.
type Prepared struct {
	Input workflows.OnboardingInput
	Texts map[string]string // hash → text
}

// Prepare turns a spec into a workflow input: it reads knowledge files,
// keys every text by its hash, and validates the whole input. It returns
// every problem at once, each with its place in the spec when known.
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
			problems = append(problems, workflows.Problem{Field: field + ".file", Message: "cannot be read: " + readReason(k.fileErr)})
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
	for i := range problems {
		problems[i].Position = s.position(problems[i].Field)
	}
	return p, problems
}

// position finds where a field path (or, failing that, its nearest
// written parent) is in the spec.
func (s Spec) position(field string) workflows.Position {
	for f := field; f != ""; {
		if pos, ok := s.positions[f]; ok {
			return pos
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			break
		}
		f = f[:i]
	}
	return workflows.Position{}
}

func readReason(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file (paths are relative to the spec)"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	}
	return err.Error()
}
