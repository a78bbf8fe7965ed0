package starter

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReceiverFromURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://hooks.example.com/webhooks":            "",
		"https://hooks.example.com/webhooks/":           "",
		"https://hooks.example.com/webhooks/v2":         "v2",
		"https://hooks.example.com/siteops/webhooks/v3": "v3",
		"http://127.0.0.1:8088/webhooks/rot-1":          "rot-1",
	} {
		got, err := ReceiverFromURL(raw)
		if err != nil || got != want {
			t.Errorf("ReceiverFromURL(%s) = %q, %v; want %q", raw, got, err, want)
		}
	}
	for _, raw := range []string{"https://hooks.example.com/", "https://hooks.example.com/in", "https://hooks.example.com/webhooks/v2/extra"} {
		if _, err := ReceiverFromURL(raw); err == nil {
			t.Errorf("ReceiverFromURL(%s) succeeded", raw)
		}
	}
}

func TestDryRunReportsEveryProblemIncludingFiles(t *testing.T) {
	dir := t.TempDir()
	spec := "site: {title: X, slug: x}\nagent: {embed_enabled: true, allowed_origins: [\"https://x.example/\"]}\nknowledge: [{name: a, file: missing.md}, {name: b, text: abc}]\nfaqs: [{question: q}]\n"
	if err := os.WriteFile(filepath.Join(dir, "site.yaml"), []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := LoadSpec(filepath.Join(dir, "site.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, problems := Prepare(s)
	fields := map[string]bool{}
	for _, p := range problems {
		fields[p.Field] = true
	}
	for _, want := range []string{"knowledge[0].file", "knowledge[1].text", "site.type", "site.template", "agent.allowed_origins[0]", "faqs[0].answer"} {
		if !fields[want] {
			t.Errorf("problems %v do not name %s", problems, want)
		}
	}
	if _, err := LoadSpec(filepath.Join(dir, "nope.yaml")); err == nil {
		t.Error("a missing spec loaded")
	}
	if err := os.WriteFile(filepath.Join(dir, "typo.yaml"), []byte("site: {title: X}\nagnet: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSpec(filepath.Join(dir, "typo.yaml")); err == nil {
		t.Error("an unknown field was accepted")
	}
}
