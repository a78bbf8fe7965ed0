package schemas

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Problem is one way a document breaks its schema, and where it is written.
type Problem struct {
	// Field is the JSON path of the value, e.g. site.title or
	// knowledge[2].name; empty for the whole document.
	Field   string
	Message string
	Line    int
	Column  int
}

func (p Problem) String() string {
	if p.Field == "" {
		return p.Message
	}
	return p.Field + ": " + p.Message
}

// Schema is the part of JSON Schema that package generate writes.
type Schema struct {
	Type                 types              `json:"type"`
	Properties           map[string]*Schema `json:"properties"`
	Required             []string           `json:"required"`
	AdditionalProperties *additional        `json:"additionalProperties"`
	Items                *Schema            `json:"items"`
	Pattern              string             `json:"pattern"`
	Minimum              *float64           `json:"minimum"`
	Maximum              *float64           `json:"maximum"`
	// MinLength and MaxLength count code points, as JSON Schema does.
	MinLength *int     `json:"minLength"`
	MaxLength *int     `json:"maxLength"`
	MinItems  *int     `json:"minItems"`
	MaxItems  *int     `json:"maxItems"`
	Enum      []string `json:"enum"`

	pattern *regexp.Regexp
}

// types is a schema's type: one name, or a list of them.
type types []string

// UnmarshalJSON implements json.Unmarshaler.
func (t *types) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*t = types{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("type must be a name or a list of names: %w", err)
	}
	*t = many
	return nil
}

// additional is additionalProperties: false (closed), true, or a schema
// for every other property.
type additional struct {
	closed bool
	schema *Schema
}

// UnmarshalJSON implements json.Unmarshaler.
func (a *additional) UnmarshalJSON(b []byte) error {
	var allowed bool
	if json.Unmarshal(b, &allowed) == nil {
		a.closed = !allowed
		return nil
	}
	a.schema = &Schema{}
	return json.Unmarshal(b, a.schema)
}

// Load reads the schema file name.
func Load(name string) (*Schema, error) {
	b, err := File(name)
	if err != nil {
		return nil, err
	}
	var s Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	if err := s.compile(); err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	return &s, nil
}

func (s *Schema) compile() error {
	if s.Pattern != "" {
		re, err := regexp.Compile(s.Pattern)
		if err != nil {
			return err
		}
		s.pattern = re
	}
	for _, p := range s.Properties {
		if err := p.compile(); err != nil {
			return err
		}
	}
	if s.Items != nil {
		if err := s.Items.compile(); err != nil {
			return err
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.schema != nil {
		return s.AdditionalProperties.schema.compile()
	}
	return nil
}

// Validate checks doc, JSON or YAML, against the schema file name and
// returns every problem, each where it is written. An error means the
// document or the schema could not be read at all.
func Validate(name string, doc []byte) ([]Problem, error) {
	s, err := Load(name)
	if err != nil {
		return nil, err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, err
	}
	if len(root.Content) == 0 {
		return []Problem{{Message: "the document is empty"}}, nil
	}
	var v validation
	v.walk("", root.Content[0], s)
	return v.problems, nil
}

type validation struct{ problems []Problem }

func (v *validation) add(path string, n *yaml.Node, format string, args ...any) {
	v.problems = append(v.problems, Problem{Field: path, Message: fmt.Sprintf(format, args...), Line: n.Line, Column: n.Column})
}

func (v *validation) walk(path string, n *yaml.Node, s *Schema) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	kind := kindOf(n)
	if len(s.Type) > 0 && !s.Type.allow(kind, n) {
		v.add(path, n, "must be %s", s.Type)
		return
	}
	switch kind {
	case "object":
		v.object(path, n, s)
	case "array":
		switch items := len(n.Content); {
		case s.MinItems != nil && items < *s.MinItems:
			v.add(path, n, "has %d entries; at least %d", items, *s.MinItems)
		case s.MaxItems != nil && items > *s.MaxItems:
			v.add(path, n, "has %d entries; at most %d", items, *s.MaxItems)
		}
		if s.Items != nil {
			for i, item := range n.Content {
				v.walk(fmt.Sprintf("%s[%d]", path, i), item, s.Items)
			}
		}
	case "string":
		v.str(path, n, s)
	case "integer", "number":
		f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
		switch {
		case err != nil:
		case s.Minimum != nil && f < *s.Minimum:
			v.add(path, n, "must be at least %v", *s.Minimum)
		case s.Maximum != nil && f > *s.Maximum:
			v.add(path, n, "must be at most %v", *s.Maximum)
		}
	}
}

// str checks a string's enum, length (in code points) and pattern.
func (v *validation) str(path string, n *yaml.Node, s *Schema) {
	if len(s.Enum) > 0 && !slices.Contains(s.Enum, n.Value) {
		quoted := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			quoted[i] = strconv.Quote(e)
		}
		v.add(path, n, "%q is not one of %s", n.Value, strings.Join(quoted, ", "))
		return
	}
	chars := utf8.RuneCountInString(n.Value)
	switch {
	case s.MinLength != nil && chars < *s.MinLength:
		v.add(path, n, "is %d characters; at least %d", chars, *s.MinLength)
	case s.MaxLength != nil && chars > *s.MaxLength:
		v.add(path, n, "is %d characters; at most %d", chars, *s.MaxLength)
	case s.pattern != nil && !s.pattern.MatchString(n.Value):
		v.add(path, n, "%q does not match %s", short(n.Value), s.Pattern)
	}
}

// short keeps a long value from filling a problem's message.
func short(s string) string {
	if utf8.RuneCountInString(s) <= 80 {
		return s
	}
	return string([]rune(s)[:77]) + "..."
}

func (v *validation) object(path string, n *yaml.Node, s *Schema) {
	present := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		present[key.Value] = true
		sub := join(path, key.Value)
		if p, ok := s.Properties[key.Value]; ok {
			v.walk(sub, val, p)
			continue
		}
		switch a := s.AdditionalProperties; {
		case a != nil && a.closed:
			v.add(sub, key, "unknown field %q", key.Value)
		case a != nil && a.schema != nil:
			v.walk(sub, val, a.schema)
		}
	}
	for _, r := range s.Required {
		if !present[r] {
			v.add(join(path, r), n, "is required")
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// kindOf names the JSON type of a YAML node.
func kindOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "object"
	case yaml.SequenceNode:
		return "array"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return "string"
		case "!!int":
			return "integer"
		case "!!float":
			return "number"
		case "!!bool":
			return "boolean"
		case "!!null":
			return "null"
		}
	}
	return "unknown"
}

// allow reports whether a value of kind is one of t: an integer is a
// number, and a number with no fraction an integer.
func (t types) allow(kind string, n *yaml.Node) bool {
	for _, want := range t {
		switch {
		case want == kind, want == "number" && kind == "integer":
			return true
		case want == "integer" && kind == "number":
			if f, err := strconv.ParseFloat(n.Value, 64); err == nil && f == math.Trunc(f) {
				return true
			}
		}
	}
	return false
}

// String names the types for a message: "a string", "a list", ...
func (t types) String() string {
	names := map[string]string{
		"string": "a string", "integer": "a whole number", "number": "a number", "boolean": "true or false",
		"object": "an object", "array": "a list", "null": "null",
	}
	var out []string
	for _, k := range t {
		if k == "null" && len(t) > 1 {
			continue // allowed, but not what anyone means to write
		}
		out = append(out, names[k])
	}
	return strings.Join(out, " or ")
}
