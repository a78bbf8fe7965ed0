package starter

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/siteops/siteops/workflows"
)

// TestCheckSpecAppliesTheSchema checks that CheckSpec finds, beside the
// contract's problems that Prepare names, what only the published schema
// finds in the document, with its line; that it names a field once; and
// that a spec Prepare takes and the schema takes has no problem.
func TestCheckSpecAppliesTheSchema(t *testing.T) {
	const lean = "site:\n  title: Acme\n  slug: acme\n  type: business\n  template: minimal\n" +
		"agent:\n  display_name: Ava\nfaqs:\n  - question: Do you ship?\n    answer: Worldwide.\n"
	for _, tc := range []struct {
		name, doc string
		// only are the problems CheckSpec finds and Prepare does not.
		only []string
	}{
		{"a valid spec", lean, nil},
		{"no site at all", "agent:\n  display_name: Ava\n", []string{"1:1: site: is required (schemas/onboarding-spec.schema.json)"}},
		{"a null where a value belongs", lean + "wait_for_knowledge: null\n", []string{"11:21: wait_for_knowledge: must be true or false (schemas/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := ParseSpec("s.yaml", []byte(tc.doc), fstest.MapFS{}, ".")
			if err != nil {
				t.Fatal(err)
			}
			_, contract := Prepare(spec)
			_, all := CheckSpec(spec)
			if len(all) != len(contract)+len(tc.only) || !slices.Equal(all[:len(contract)], contract) {
				t.Fatalf("CheckSpec = %v; want Prepare's %v and %d more", all, contract, len(tc.only))
			}
			for i, want := range tc.only {
				p := all[len(contract)+i]
				if got := placed(p); !strings.HasPrefix(got, want) {
					t.Errorf("problem %d = %q, want %q", i, got, want)
				}
			}
		})
	}

	// A spec made in Go, not read from a document, has no document to
	// check: CheckSpec is Prepare.
	if _, problems := CheckSpec(Spec{}); len(problems) == 0 || strings.Contains(placed(problems[len(problems)-1]), "schemas/") {
		t.Errorf("CheckSpec of an empty Spec = %v, want the contract's problems alone", problems)
	}
}

func placed(p workflows.Problem) string {
	return strings.TrimPrefix(p.In(""), ":")
}

// TestReadSpec reads and checks a spec file: a valid one is prepared, one
// that breaks rules or cannot be read as an onboarding gives its problems,
// and one that cannot be read at all is the error.
func TestReadSpec(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	valid := write("valid.yaml", "site:\n  title: Acme\n  slug: acme\n  type: business\n  template: minimal\nagent:\n  display_name: Ava\n")
	if p, problems, err := ReadSpec(valid); err != nil || len(problems) > 0 || p.Input.Site.Slug != "acme" {
		t.Errorf("ReadSpec(valid) = %+v, %v, %v; want acme prepared", p.Input.Site, problems, err)
	}
	for name, doc := range map[string]string{"rules.yaml": "site: {slug: x}\n", "typo.yaml": "site: {title: X}\nagnet: {}\n"} {
		if _, problems, err := ReadSpec(write(name, doc)); err != nil || len(problems) == 0 {
			t.Errorf("ReadSpec(%s) = %v, %v; want its problems", name, problems, err)
		}
	}
	if _, problems, err := ReadSpec(filepath.Join(dir, "missing.yaml")); err == nil || problems != nil {
		t.Errorf("ReadSpec(missing) = %v, %v; want the error", problems, err)
	}
}
