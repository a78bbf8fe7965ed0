package starter

import (
	"errors"
	"testing"
	"testing/fstest"

	"github.com/siteops/siteops/workflows"
)

// TestSpecSyntaxErrorsHaveLineAndColumn checks that a spec that is not
// YAML (or not JSON) is reported at the line and column of the mistake.
func TestSpecSyntaxErrorsHaveLineAndColumn(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		line, col  int
		message    string
	}{
		{"a list left open", "site:\n  title: [unclosed\n", 2, 10, "did not find expected ',' or ']' before the end of the spec"},
		{"a key out of line", "site:\n  title: x\n slug: y\n", 3, 2, "did not find expected key"},
		{"a tab for indentation", "site:\n\ttitle: x\n", 2, 1, "found character that cannot start any token"},
		{"a quote left open", "site:\n  title: 'x\n", 2, 10, "found unexpected end of stream before the end of the spec"},
		{"JSON without a colon", `{"site": {"title" "x"}}`, 1, 19, "did not find expected ',' or '}'"},
		{"JSON with a bracket for a brace", "{\n  \"faqs\": [1, 2}\n}\n", 2, 16, "did not find expected ',' or ']'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSpec("s.yaml", []byte(tc.spec), fstest.MapFS{}, ".")
			var se *SpecError
			if !errors.As(err, &se) || len(se.Problems) != 1 {
				t.Fatalf("ParseSpec = %v, want one problem", err)
			}
			p := se.Problems[0]
			if p.Line != tc.line || p.Column != tc.col || p.Field != "(syntax)" {
				t.Errorf("problem at %d:%d (%s), want %d:%d (syntax): %s", p.Line, p.Column, p.Field, tc.line, tc.col, p.Message)
			}
			if len(p.Message) < len(tc.message) || p.Message[:len(tc.message)] != tc.message {
				t.Errorf("message = %q, want it to start with %q", p.Message, tc.message)
			}
		})
	}
}

// TestSpecProblemsAreAllPlaced checks that every field problem of a spec
// that parses is reported at once, each at its own line and column.
func TestSpecProblemsAreAllPlaced(t *testing.T) {
	spec := "site:\n  title: X\n  titel: typo\nagent:\n  embed_enabled: maybe\nfaqs: none\n"
	_, err := ParseSpec("s.yaml", []byte(spec), fstest.MapFS{}, ".")
	var se *SpecError
	if !errors.As(err, &se) {
		t.Fatalf("ParseSpec = %v, want a *SpecError", err)
	}
	want := map[string]workflows.Position{
		"site.titel":          {Line: 3, Column: 3},
		"agent.embed_enabled": {Line: 5, Column: 18},
		"faqs":                {Line: 6, Column: 7},
	}
	got := map[string]workflows.Position{}
	for _, p := range se.Problems {
		got[p.Field] = p.Position
	}
	for field, pos := range want {
		if got[field] != pos {
			t.Errorf("%s at %+v, want %+v (all: %v)", field, got[field], pos, se.Problems)
		}
	}
}
