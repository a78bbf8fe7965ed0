package schemas_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/schemagen"
	"github.com/siteops/siteops/schemas"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

// TestSchemasMatchTheTypes regenerates every schema in memory and compares
// it with the published file.
func TestSchemasMatchTheTypes(t *testing.T) {
	root, err := schemagen.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	want, err := schemagen.All(root)
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
	for _, name := range []string{schemas.OnboardingSpec,
		schemas.OnboardingInput, schemas.OnboardingResult, schemas.OnboardingStatus,
		schemas.LeadSyncInput, schemas.LeadSyncProgress, schemas.LeadSyncSyncSignal,
		schemas.EmbedIncidentInput, schemas.EmbedIncidentStatus, schemas.EmbedIncidentAwaitOff, schemas.EmbedIncidentAwaitOffDone, schemas.EmbedIncidentDecide,
		schemas.SecretRotationInput, schemas.SecretRotationStatus, schemas.SecretRotationDecide,
		schemas.EndpointRegistration, schemas.EndpointRegistrationState, schemas.SecretReconcileInput, schemas.SecretReconcileStatus,
		schemas.NexusStoreKnowledgeInput, schemas.NexusStoreKnowledgeOutput, schemas.NexusOnboardInput, schemas.NexusOnboardOutput,
		schemas.NexusOnboardingStatusInput, schemas.NexusOnboardingStatus, schemas.NexusLeadSyncStatusInput, schemas.NexusLeadSyncStatus} {
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
	known := []string{"type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
		"enum", "pattern", "minLength", "maxLength", "minimum", "maximum", "$schema", "title", "description", "format"}
	for _, f := range schemagen.Files {
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
// document the types write. An output's empty value validates too: the
// fields it requires are those Go always writes.
func TestWhatGoWritesValidates(t *testing.T) {
	for _, f := range schemagen.Files {
		for what, v := range map[string]reflect.Value{"zero": reflect.New(f.Type).Elem(), "filled": filled(f.Type)} {
			b, err := json.Marshal(v.Interface())
			if err != nil {
				t.Fatal(err)
			}
			problems, err := schemas.Validate(f.Name, b)
			if err != nil || ((what == "filled" || f.Output) && len(problems) > 0) {
				t.Errorf("%s, %s value %s: %v %v", f.Name, what, b, problems, err)
			}
		}
	}
}

// TestOriginPatternIsValidateOrigin checks the pattern of allowed origins
// against the check that reads them: the pattern takes every origin
// agentsite.ValidateOrigin takes, and refuses an origin with a path, a
// query, a fragment, credentials, a wildcard or another scheme.
func TestOriginPatternIsValidateOrigin(t *testing.T) {
	re := regexp.MustCompile(schemagen.OriginPattern)
	takes := []string{"https://acme.example", "http://localhost:3000", "HTTPS://Shop.Example:443", "https://a-b.c-d.example",
		"http://192.0.2.1:8080", "https://[2001:db8::1]", "https://[::ffff:c000:201]:8443", "https://xn--bcher-kva.example"}
	refuses := []string{"https://acme.example/", "https://acme.example/shop", "https://acme.example?x=1", "https://acme.example#top",
		"https://user@acme.example", "https://*.acme.example", "https://acme.example:*", "ftp://acme.example", "acme.example",
		"https://acme.example.", "https://-acme.example", "https://acme_shop.example", "https://acme.example:0", "https://acme.example:",
		"https://acme.example:08080", "https://bücher.example", "https://acme.example ", "", "https://"}
	for _, o := range takes {
		if err := agentsite.ValidateOrigin("o", o); err != nil {
			t.Fatalf("%q: agentsite refuses it (%v); take it out of the accepted ones", o, err)
		}
		if !re.MatchString(o) {
			t.Errorf("%q: agentsite takes it, the pattern refuses it", o)
		}
	}
	for _, o := range refuses {
		if err := agentsite.ValidateOrigin("o", o); err == nil {
			t.Fatalf("%q: agentsite takes it; take it out of the refused ones", o)
		}
		if re.MatchString(o) {
			t.Errorf("%q: agentsite refuses it, and so should the pattern", o)
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

// fills are the values of the fields whose rules "x" breaks, by type and
// Go field name; a list field gets one entry of it.
var fills = map[string]string{
	"workflows.AgentSpec.AllowedOrigins":           "https://acme.example",
	"api.Agent.AllowedOrigins":                     "https://acme.example",
	"workflows.EmbedDecision.AllowedOrigins":       "https://acme.example",
	"workflows.EmbedDecision.Action":               workflows.DecisionRestore,
	"workflows.RotationDecision.Action":            workflows.RotationProceed,
	"workflows.EndpointRegistrationInput.Events":   "lead.created",
	"starter.Spec.OnKnowledgeTimeout":              workflows.TimeoutProceed,
	"workflows.OnboardingInput.OnKnowledgeTimeout": workflows.TimeoutProceed,
	"api.OnboardInput.OnKnowledgeTimeout":          workflows.TimeoutProceed,
	"starter.SpecKnowledge.Text":                   "Open 9 to 5.",
	"workflows.KnowledgeSpec.Text":                 "Open 9 to 5.",
	"api.Knowledge.Text":                           "Open 9 to 5.",
	"api.StoreKnowledgeInput.Text":                 "Open 9 to 5.",
}

// filled returns a value of t with every field set, as a caller who uses
// every option would write it.
func filled(t reflect.Type) reflect.Value {
	return filledAs(t, "")
}

// filledAs is filled, with fill for every string in the value when it is
// not empty.
func filledAs(t reflect.Type, fill string) reflect.Value {
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
		v.SetString(cmp.Or(fill, "x"))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Slice:
		v.Set(reflect.Append(reflect.MakeSlice(t, 0, 1), filledAs(t.Elem(), fill)))
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		p.Elem().Set(filledAs(t.Elem(), fill))
		v.Set(p)
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() {
				v.Field(i).Set(filledAs(f.Type, fills[t.String()+"."+f.Name]))
			}
		}
	}
	return v
}

// TestRequiredIsWhatTheCodeRequires drops each field of a complete, valid
// document in turn and checks that the schema says "is required" exactly
// when the code that reads the document refuses it without that field:
// the spec through starter.ParseSpec and Prepare (what `siteops onboard`
// runs), the Onboarding input through workflows.Validate (what the
// workflow runs). Every field the schema describes is in the document, so
// a field added to the types is checked too.
func TestRequiredIsWhatTheCodeRequires(t *testing.T) {
	const site = `"site": {"title": "Acme", "slug": "acme", "type": "business", "template": "minimal",
		"content": {"headline": "Anvils", "subheadline": "Since 1949", "about": "A forge."},
		"persona_mode": "assistant", "languages": ["en"]},
	"agent": {"display_name": "Ava", "persona_mode": "assistant", "instructions": "Be brief.", "languages": ["en"],
		"embed_enabled": false, "allowed_origins": ["https://acme.example"]},
	"faqs": [{"id": "faq_1", "question": "Do you ship?", "answer": "Worldwide.", "approved": true}],
	"wait_for_knowledge": true, "knowledge_timeout": "10m", "on_knowledge_timeout": "fail", "skip_publish": true`
	hash := strings.Repeat("ab", 32)
	for _, c := range []struct {
		schema string
		doc    string
		// refused returns what the code says of doc: nil when it takes it.
		refused func(doc []byte) []string
		// oneOf are fields the code needs one of; the schema cannot say
		// so, and leaves them to the code.
		oneOf []string
	}{
		{
			schema: schemas.OnboardingSpec,
			doc:    `{` + site + `, "knowledge": [{"name": "Hours", "text": "Open 9 to 5."}, {"name": "Guide", "file": "guide.md"}]}`,
			refused: func(doc []byte) []string {
				spec, err := starter.ParseSpec("spec.json", doc, fstest.MapFS{"guide.md": {Data: []byte("The guide to our anvils.")}}, ".")
				if err != nil {
					return []string{err.Error()}
				}
				_, problems := starter.Prepare(spec)
				return problemStrings(problems)
			},
			oneOf: []string{"knowledge[0].text", "knowledge[1].file"},
		},
		{
			schema: schemas.OnboardingInput,
			doc:    `{` + site + `, "knowledge": [{"name": "Hours", "text": "Open 9 to 5.", "chars": 12}, {"name": "Guide", "text_hash": "` + hash + `", "chars": 24}]}`,
			refused: func(doc []byte) []string {
				var in workflows.OnboardingInput
				dec := json.NewDecoder(bytes.NewReader(doc))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&in); err != nil {
					return []string{err.Error()}
				}
				return problemStrings(workflows.Validate(in))
			},
			oneOf: []string{"knowledge[0].text", "knowledge[1].text_hash"},
		},
	} {
		t.Run(c.schema, func(t *testing.T) {
			var full map[string]any
			if err := json.Unmarshal([]byte(c.doc), &full); err != nil {
				t.Fatal(err)
			}
			if got := c.refused([]byte(c.doc)); got != nil {
				t.Fatalf("the complete document is refused: %v", got)
			}
			if problems, err := schemas.Validate(c.schema, []byte(c.doc)); err != nil || len(problems) > 0 {
				t.Fatalf("the complete document breaks the schema: %v %v", problems, err)
			}
			s, err := schemas.Load(c.schema)
			if err != nil {
				t.Fatal(err)
			}
			covered := map[string]bool{}
			for _, path := range fieldPaths(full, "") {
				covered[anyIndex.ReplaceAllString(path, "[]")] = true
				b, err := json.Marshal(without(full, path))
				if err != nil {
					t.Fatal(err)
				}
				refused := c.refused(b)
				problems, err := schemas.Validate(c.schema, b)
				if err != nil {
					t.Fatal(err)
				}
				required := slices.ContainsFunc(problems, func(p schemas.Problem) bool { return p.Field == path && p.Message == "is required" })
				switch {
				case slices.Contains(c.oneOf, path):
					if refused == nil {
						t.Errorf("without %s: the code takes the document; drop it from oneOf", path)
					}
				case required && refused == nil:
					t.Errorf("without %s: the schema says it is required, but the code takes the document (siteops would refuse what it accepts)", path)
				case !required && refused != nil:
					t.Errorf("without %s: the code refuses the document (%v), but the schema does not require it; add it to required in schemagen", path, refused)
				}
			}
			for _, p := range schemaPaths(s, "") {
				if !covered[p] {
					t.Errorf("the document lacks %s, which the schema describes; add it so that its rule is checked", p)
				}
			}
		})
	}
}

var anyIndex = regexp.MustCompile(`\[[0-9]+\]`)

func problemStrings(ps []workflows.Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

// fieldPaths lists the path of every object field in v, as Validate names
// them: site.title, knowledge[1].name.
func fieldPaths(v any, prefix string) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out = append(out, p)
			out = append(out, fieldPaths(v[k], p)...)
		}
	case []any:
		for i, item := range v {
			out = append(out, fieldPaths(item, prefix+"["+strconv.Itoa(i)+"]")...)
		}
	}
	return out
}

// schemaPaths lists the path of every property a schema describes, with
// [] for any element of a list.
func schemaPaths(s *schemas.Schema, prefix string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		out = append(out, p)
		out = append(out, schemaPaths(s.Properties[k], p)...)
	}
	if s.Items != nil {
		out = append(out, schemaPaths(s.Items, prefix+"[]")...)
	}
	return out
}

// without returns a deep copy of doc with the field at path removed.
func without(doc map[string]any, path string) map[string]any {
	b, _ := json.Marshal(doc)
	var cp map[string]any
	_ = json.Unmarshal(b, &cp)
	parts := strings.Split(path, ".")
	var cur any = cp
	for i, part := range parts {
		name, index, hasIndex := strings.Cut(part, "[")
		m := cur.(map[string]any)
		if i == len(parts)-1 && !hasIndex {
			delete(m, name)
			return cp
		}
		cur = m[name]
		for hasIndex {
			var n string
			n, index, _ = strings.Cut(index, "]")
			k, _ := strconv.Atoi(n)
			cur = cur.([]any)[k]
			_, index, hasIndex = strings.Cut(index, "[")
		}
	}
	return cp
}

// TestTheREADMEInputsValidate checks the JSON the README (and, for the
// curl commands, docs/nexus-and-http.md) shows against
// their schemas: the Onboarding input, the lead sync and embed incident
// inputs, the bodies of the curl commands that onboard and read an
// onboarding's status over HTTP, and the status it answers. (The tables of
// examples, messages and ID policies are checked in readme_test.go.)
func TestTheREADMEInputsValidate(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	curl, err := os.ReadFile("../docs/nexus-and-http.md") // the curl commands
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b) + "\n" + string(curl)
	// after returns the text that follows the first line starting with
	// intro, up to end (exclusive), from the first from on.
	after := func(intro, from, end string) string {
		t.Helper()
		i := strings.Index(readme, "\n"+intro)
		if i < 0 {
			t.Fatalf("the docs have no line starting with %q", intro)
		}
		rest := readme[i+1:]
		j := strings.Index(rest, from)
		if j < 0 {
			t.Fatalf("the docs have no %q after %q", from, intro)
		}
		rest = rest[j+len(from):]
		k := strings.Index(rest, end)
		if k < 0 {
			t.Fatalf("the docs have no %q after %q", end, intro)
		}
		return rest[:k]
	}
	for _, c := range []struct{ what, schema, doc string }{
		{"Onboarding input", schemas.OnboardingInput, after("Onboarding input", "```json\n", "```")},
		{"Lead sync input", schemas.LeadSyncInput, after("Lead sync input:", "`", "`")},
		{"Embed incident input", schemas.EmbedIncidentInput, after("Embed incident input:", "`", "`")},
		{"the curl command's onboard body", schemas.NexusOnboardInput, after("<!-- e2e: curl-start -->", "-d '", "'")},
		{"the curl command's onboarding-status body", schemas.NexusOnboardingStatusInput, after("<!-- e2e: curl-status -->", "-d '", "'")},
		{"onboarding-status answer", schemas.NexusOnboardingStatus, after("<!-- e2e: curl-status -->", "```json\n", "```")},
	} {
		problems, err := schemas.Validate(c.schema, []byte(c.doc))
		if err != nil || len(problems) > 0 {
			t.Errorf("the docs' %s breaks %s: %v %v\n%s", c.what, c.schema, problems, err, c.doc)
		}
	}
}
