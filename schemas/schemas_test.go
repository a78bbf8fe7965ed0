package schemas_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/schemas"
	"github.com/siteops/siteops/schemas/internal/generate"
	"github.com/siteops/siteops/workflows"
)

// TestSchemasMatchTheTypes regenerates every schema in memory and compares
// it with the published file.
func TestSchemasMatchTheTypes(t *testing.T) {
	root, err := generate.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate.All(root)
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := filepath.Glob("*.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range onDisk {
		if _, ok := want[path]; !ok {
			t.Errorf("schemas/%s is generated from no type; run `go generate ./schemas`, which removes it", path)
		}
	}
	for name, b := range want {
		got, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("schemas/%s is missing; run `go generate ./schemas` and commit the result", name)
			continue
		}
		if !bytes.Equal(got, b) {
			t.Errorf("schemas/%s does not match the Go types (%s); run `go generate ./schemas` and commit the result", name, firstDifference(got, b))
		}
		if embedded, err := schemas.File(name); err != nil || !bytes.Equal(embedded, got) {
			t.Errorf("the embedded schemas/%s differs from the file (%v)", name, err)
		}
	}
	for _, name := range []string{schemas.OnboardingSpec, schemas.OnboardingInput, schemas.LeadSyncInput, schemas.EmbedIncidentInput,
		schemas.SecretRotationInput, schemas.EndpointRegistration, schemas.NexusOnboardInput} {
		if _, ok := want[name]; !ok {
			t.Errorf("schemas.%s names no generated file", name)
		}
	}
}

func firstDifference(a, b []byte) string {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return "line " + strconv.Itoa(i+1) + ": " + strings.TrimSpace(la[i]) + " → " + strings.TrimSpace(lb[i])
		}
	}
	return "length"
}

// TestValidatorKnowsEveryKeyword keeps the validator and the generator in
// step: a keyword the generator starts to write must be taught to
// Validate (or listed as an annotation).
func TestValidatorKnowsEveryKeyword(t *testing.T) {
	known := []string{"type", "properties", "required", "additionalProperties", "items", "pattern", "minimum",
		"$schema", "title", "description", "format"}
	for _, f := range generate.Files {
		b, err := schemas.File(f.Name)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		var visit func(path string, s map[string]any)
		visit = func(path string, s map[string]any) {
			for k, v := range s {
				if !slices.Contains(known, k) {
					t.Errorf("%s %s: Validate does not know the keyword %q", f.Name, path, k)
				}
				switch k {
				case "properties":
					for name, p := range v.(map[string]any) {
						visit(path+"."+name, p.(map[string]any))
					}
				case "items":
					visit(path+"[]", v.(map[string]any))
				case "additionalProperties":
					if m, ok := v.(map[string]any); ok {
						visit(path+".*", m)
					}
				}
			}
		}
		visit("", doc)
	}
}

// TestWhatGoWritesValidates marshals every schema's type, empty and with
// every field set, and validates the JSON: the schema accepts every
// document the types write.
func TestWhatGoWritesValidates(t *testing.T) {
	for _, f := range generate.Files {
		for what, v := range map[string]reflect.Value{"zero": reflect.New(f.Type).Elem(), "filled": filled(f.Type)} {
			b, err := json.Marshal(v.Interface())
			if err != nil {
				t.Fatal(err)
			}
			problems, err := schemas.Validate(f.Name, b)
			if err != nil || (what == "filled" && len(problems) > 0) {
				t.Errorf("%s, %s value %s: %v %v", f.Name, what, b, problems, err)
			}
		}
	}
}

// TestTheExamplesValidate checks the sample specs against the spec schema.
func TestTheExamplesValidate(t *testing.T) {
	paths, _ := filepath.Glob("../examples/*.yaml")
	more, _ := filepath.Glob("../examples/*.json")
	paths = append(paths, more...)
	if len(paths) == 0 {
		t.Fatal("no examples")
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if problems, err := schemas.Validate(schemas.OnboardingSpec, b); err != nil || len(problems) > 0 {
			t.Errorf("%s: %v %v", p, problems, err)
		}
	}
}

func TestValidateReportsEveryProblemWhereItIs(t *testing.T) {
	doc := `site:
  title: Acme
  slug: acme
  type: business
  template: 7
  content: {headline: h, subheadline: s, about: a}
  persona_mode: assistant
  languages: en
agent:
  embed_enabled: "yes"
  colour: red
knowledge:
  - text: no name
faqs:
  - {question: q, answer: a, approved: true}
knowledge_timeout: ten minutes
`
	problems, err := schemas.Validate(schemas.OnboardingSpec, []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"site.template:5:13":        "must be a string",
		"site.languages:8:14":       "must be a list",
		"agent.embed_enabled:10:18": "must be true or false",
		"agent.colour:11:3":         `unknown field "colour"`,
		"knowledge[0].name:13:5":    "is required",
		"knowledge_timeout:16:20":   `"ten minutes" does not match`,
	}
	got := map[string]string{}
	for _, p := range problems {
		got[p.Field+":"+strconv.Itoa(p.Line)+":"+strconv.Itoa(p.Column)] = p.Message
	}
	for k, msg := range want {
		if !strings.Contains(got[k], msg) {
			t.Errorf("%s: got %q, want %q (all: %v)", k, got[k], msg, problems)
		}
	}
	if len(problems) != len(want) {
		t.Errorf("%d problems, want %d: %v", len(problems), len(want), problems)
	}
	// JSON is YAML: the same checks, with JSON's lines.
	problems, err = schemas.Validate(schemas.EmbedIncidentInput, []byte("{\n  \"site_id\": \"site_1\",\n  \"operator\": 3\n}"))
	if err != nil || len(problems) != 2 || problems[0].Field != "operator" || problems[0].Line != 3 || problems[1].Field != "reason" {
		t.Errorf("JSON problems = %v, %v", problems, err)
	}
}

// TestDurationPatternIsParseDuration checks the pattern of durations
// against the parser that reads them.
func TestDurationPatternIsParseDuration(t *testing.T) {
	s, err := schemas.Load(schemas.OnboardingInput)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(s.Properties["knowledge_timeout"].Pattern)
	for _, d := range []string{"0", "90s", "10m", "1h30m", "1.5h", ".5s", "300ms", "2us", "2µs", "1h2m3s4ms", "", "10", "1d", "-5m", "+5m", "m", "1.h", "5 m", "ten minutes"} {
		_, err := time.ParseDuration(d)
		parses := err == nil && !strings.HasPrefix(d, "-") && !strings.HasPrefix(d, "+")
		if re.MatchString(d) != parses {
			t.Errorf("%q: pattern %v, time.ParseDuration %v", d, re.MatchString(d), err)
		}
	}
}

// filled returns a value of t with every field set, as a caller who uses
// every option would write it.
func filled(t reflect.Type) reflect.Value {
	v := reflect.New(t).Elem()
	switch t {
	case reflect.TypeFor[workflows.Duration]():
		v.Set(reflect.ValueOf(workflows.Duration(90 * time.Second)))
		return v
	case reflect.TypeFor[api.Duration]():
		v.Set(reflect.ValueOf(api.Duration(90 * time.Second)))
		return v
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
		return v
	}
	switch t.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Slice:
		v.Set(reflect.Append(reflect.MakeSlice(t, 0, 1), filled(t.Elem())))
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		p.Elem().Set(filled(t.Elem()))
		v.Set(p)
	case reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				v.Field(i).Set(filled(t.Field(i).Type))
			}
		}
	}
	return v
}
