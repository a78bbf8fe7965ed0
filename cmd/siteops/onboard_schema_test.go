package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOnboardDryRunAppliesTheSchema builds the binary and runs `onboard
// --dry-run` as a person would: a spec that breaks the published schema is
// reported naming the schema file, with its line, and exits 2; specs the
// earlier releases took (without agent.embed_enabled, faqs[].approved or
// the site's content) and the examples pass. A dry run needs neither
// Temporal nor the database.
func TestOnboardDryRunAppliesTheSchema(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		return runBinary(t, dir, os.Environ(), args...)
	}
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// No site at all: the contract's rules name its fields, the schema
	// the object itself.
	write("nosite.yaml", "agent:\n  display_name: Ava\nfaqs:\n  - question: Do you ship?\n    answer: Worldwide.\n")
	const schemaProblem = "nosite.yaml:1:1: site: is required (schemas/onboarding-spec.schema.json)"
	_, stderr, code := run("onboard", "-f", "nosite.yaml", "--dry-run")
	if code != 2 || !strings.Contains(stderr, schemaProblem) || !strings.Contains(stderr, "site.title: is required") || !strings.Contains(stderr, "nothing was started") {
		t.Errorf("a spec without a site: exit %d, want 2 naming %q\n%s", code, schemaProblem, stderr)
	}
	stdout, _, code := run("onboard", "-f", "nosite.yaml", "--dry-run", "-o", "json")
	var res struct {
		Valid    bool `json:"valid"`
		Problems []struct {
			Field   string `json:"field"`
			Message string `json:"message"`
			Line    int    `json:"line"`
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 2 || res.Valid {
		t.Fatalf("-o json: exit %d, %v\n%s", code, err, stdout)
	}
	found := false
	for _, p := range res.Problems {
		found = found || (p.Field == "site" && p.Line == 1 && strings.Contains(p.Message, "schemas/onboarding-spec.schema.json"))
	}
	if !found {
		t.Errorf("-o json does not name the schema's problem with its line: %+v", res.Problems)
	}

	// What the schema does not require, the dry run does not either.
	write("lean.yaml", "site:\n  title: Acme\n  slug: acme\n  type: business\n  template: minimal\n"+
		"agent:\n  display_name: Ava\nfaqs:\n  - question: Do you ship?\n    answer: Worldwide.\n")
	if stdout, stderr, code := run("onboard", "-f", "lean.yaml", "--dry-run"); code != 0 || !strings.Contains(stdout, "lean.yaml is valid") {
		t.Errorf("a spec without embed_enabled, approved or content: exit %d, want 0\n%s%s", code, stdout, stderr)
	}
	for _, example := range []string{"acme-anvils.yaml", "bayside-dental.json"} {
		path, err := filepath.Abs(filepath.Join("..", "..", "examples", example))
		if err != nil {
			t.Fatal(err)
		}
		if stdout, stderr, code := run("onboard", "-f", path, "--dry-run"); code != 0 || !strings.Contains(stdout, "is valid") {
			t.Errorf("examples/%s: exit %d, want 0\n%s%s", example, code, stdout, stderr)
		}
	}
}
