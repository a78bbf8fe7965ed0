package starter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/workflows"
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

// TestStoredSecret checks what a repeated registration reports of the
// secret its earlier run stored: still stored, retiring at a set time,
// retired (by the reconciliation after the endpoint was deleted, or by
// hand), or not in the store.
func TestStoredSecret(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Second)
	secret := func(endpointID, s string) string {
		t.Helper()
		sec := agentsite.NewSigningSecret(s)
		if err := st.PutSecret(ctx, endpointID, "v1", sec); err != nil {
			t.Fatal(err)
		}
		return sec.Fingerprint()
	}
	stored, retiring, retired := secret("we_1", "whsec_one"), secret("we_2", "whsec_two"), secret("we_3", "whsec_three")
	later := now.Add(time.Hour)
	if err := st.RetireSecret(ctx, "we_2", later); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Retire(ctx, "we_3", now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, endpoint, fingerprint string
		want                        SecretState
		wantAt                      *time.Time
	}{
		{"stored", "we_1", stored, SecretStored, nil},
		{"retiring", "we_2", retiring, SecretRetiring, &later},
		{"retired", "we_3", retired, SecretRetired, nil},
		{"another endpoint's fingerprint", "we_9", stored, SecretNotStored, nil},
		{"no such fingerprint", "we_1", "000000000000", SecretNotStored, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, at, err := StoredSecret(ctx, st, tt.endpoint, tt.fingerprint, now)
			if err != nil || got != tt.want {
				t.Fatalf("StoredSecret = %q, %v; want %q", got, err, tt.want)
			}
			if tt.wantAt != nil && (at == nil || !at.Equal(*tt.wantAt)) {
				t.Errorf("retires at %v, want %v", at, tt.wantAt)
			}
			if got == SecretRetired && (at == nil || at.After(now)) {
				t.Errorf("retired at %v, want a time before %v", at, now)
			}
		})
	}
}

// TestRotationNeedsDecisionSaysWhatToRun names the rotation, the new
// endpoint, the deadline and both commands on-call may run.
func TestRotationNeedsDecisionSaysWhatToRun(t *testing.T) {
	deadline := time.Date(2026, 11, 26, 9, 30, 0, 0, time.UTC)
	err := &RotationNeedsDecisionError{WorkflowID: "secret-rotation/we_1", Status: workflows.SecretRotationStatus{
		Step: workflows.RotationDeciding, OldEndpointID: "we_1", NewEndpointID: "we_2", DecisionDeadline: deadline,
	}}
	for _, want := range []string{"secret-rotation/we_1 waits for your decision", "new endpoint we_2", "by 2026-11-26T09:30:00Z",
		"'siteops secret proceed --endpoint we_1'", "'siteops secret abort --endpoint we_1'", "'siteops status secret-rotation/we_1'"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got %q\nwant it to contain %q", err.Error(), want)
		}
	}
}
