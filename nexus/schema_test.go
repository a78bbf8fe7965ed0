package nexus

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/schemas"
)

// TestOnboardSchemaRequiresWhatTheServiceRequires drops each field of a
// complete, valid onboard input in turn and checks that the published
// schema (schemas/nexus-onboard-input.schema.json) says "is required"
// exactly when the operation refuses the input without it, so that the
// schema never refuses what the service accepts, nor the other way round.
func TestOnboardSchemaRequiresWhatTheServiceRequires(t *testing.T) {
	st := texts{}
	hash, _ := st.PutKnowledgeText(t.Context(), "The guide to our anvils.")
	s, err := New(Options{Texts: st})
	if err != nil {
		t.Fatal(err)
	}
	doc := `{"site": {"title": "Acme", "slug": "acme", "type": "business", "template": "minimal",
		"content": {"headline": "Anvils", "subheadline": "Since 1949", "about": "A forge."},
		"persona_mode": "assistant", "languages": ["en"]},
	"agent": {"display_name": "Ava", "persona_mode": "assistant", "instructions": "Be brief.", "languages": ["en"],
		"embed_enabled": false, "allowed_origins": ["https://acme.example"]},
	"knowledge": [{"name": "Hours", "text": "Open 9 to 5.", "chars": 12}, {"name": "Guide", "text_hash": "` + hash + `"}],
	"faqs": [{"id": "faq_1", "question": "Do you ship?", "answer": "Worldwide.", "approved": true}],
	"wait_for_knowledge": true, "knowledge_timeout": "10m", "on_knowledge_timeout": "fail", "skip_publish": true}`
	// A knowledge source needs its text inline or by hash; the schema
	// cannot say "one of", and leaves it to the service.
	oneOf := []string{"knowledge[0].text", "knowledge[1].text_hash"}
	refused := func(b []byte) error {
		var in api.OnboardInput
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return err
		}
		_, err := s.prepare(t.Context(), in)
		return err
	}
	var full map[string]any
	if err := json.Unmarshal([]byte(doc), &full); err != nil {
		t.Fatal(err)
	}
	if err := refused([]byte(doc)); err != nil {
		t.Fatalf("the complete input is refused: %v", err)
	}
	if problems, err := schemas.Validate(schemas.NexusOnboardInput, []byte(doc)); err != nil || len(problems) > 0 {
		t.Fatalf("the complete input breaks the schema: %v %v", problems, err)
	}
	var paths []string
	var walk func(v any, prefix string)
	walk = func(v any, prefix string) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				p := strings.TrimPrefix(prefix+"."+k, ".")
				paths = append(paths, p)
				walk(v[k], p)
			}
		case []any:
			for i, item := range v {
				walk(item, prefix+"["+strconv.Itoa(i)+"]")
			}
		}
	}
	walk(full, "")
	if len(paths) < 30 {
		t.Fatalf("only %d fields in the complete input", len(paths))
	}
	for _, path := range paths {
		b := dropField(t, doc, path)
		err := refused(b)
		problems, verr := schemas.Validate(schemas.NexusOnboardInput, b)
		if verr != nil {
			t.Fatal(verr)
		}
		required := slices.ContainsFunc(problems, func(p schemas.Problem) bool { return p.Field == path && p.Message == "is required" })
		switch {
		case slices.Contains(oneOf, path):
			if err == nil {
				t.Errorf("without %s: the service takes the input; drop it from oneOf", path)
			}
		case required && err == nil:
			t.Errorf("without %s: the schema says it is required, but the service takes the input", path)
		case !required && err != nil:
			t.Errorf("without %s: the service refuses the input (%v), but the schema does not require it; add it to required in schemagen", path, err)
		}
	}
}

// dropField returns the JSON doc without the field at path (site.title,
// knowledge[1].name).
func dropField(t *testing.T, doc, path string) []byte {
	t.Helper()
	var root any
	if err := json.Unmarshal([]byte(doc), &root); err != nil {
		t.Fatal(err)
	}
	cur := root
	parts := strings.Split(path, ".")
	for i, part := range parts {
		name, rest, _ := strings.Cut(part, "[")
		m := cur.(map[string]any)
		if i == len(parts)-1 {
			delete(m, name)
			break
		}
		cur = m[name]
		if rest != "" {
			n, _ := strconv.Atoi(strings.TrimSuffix(rest, "]"))
			cur = cur.([]any)[n]
		}
	}
	b, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
