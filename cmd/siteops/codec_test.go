package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCodecToken(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("token", "  codec-token-from-a-file-0123\n")
	empty := file("empty", "\n")
	tests := []struct {
		name, env, file string
		envSet          bool
		want, wantErr   string
	}{
		{name: "neither: no token"},
		{name: "the variable", env: " codec-token-from-env-0123 ", envSet: true, want: "codec-token-from-env-0123"},
		{name: "the file", file: good, want: "codec-token-from-a-file-0123"},
		{name: "both", env: "codec-token-from-env-0123", envSet: true, file: good, wantErr: "use one"},
		{name: "the variable set but empty", env: " ", envSet: true, wantErr: "set but empty"},
		{name: "an empty file", file: empty, wantErr: "is empty"},
		{name: "a missing file", file: filepath.Join(dir, "missing"), wantErr: "--token-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.envSet {
				t.Setenv(codecTokenEnv, tt.env)
			} else {
				t.Setenv(codecTokenEnv, "") // restored after the test
				_ = os.Unsetenv(codecTokenEnv)
			}
			got, err := codecToken(tt.file)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("codecToken = %q, %v; want an error saying %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("codecToken = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestCodecServerRefusesBadSettings checks that codec-server stops before
// listening when its settings cannot make a safe server.
func TestCodecServerRefusesBadSettings(t *testing.T) {
	t.Setenv("SITEOPS_PAYLOAD_KEY", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	t.Setenv(codecTokenEnv, "short")
	if _, err := runCLI(t, "", "codec-server", "--addr", "127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Errorf("a short token: %v, want a refusal naming the minimum length", err)
	}
	t.Setenv(codecTokenEnv, "codec-token-from-env-0123")
	if _, err := runCLI(t, "", "codec-server", "--addr", "127.0.0.1:0", "--token-file", filepath.Join(t.TempDir(), "t")); err == nil || !strings.Contains(err.Error(), "use one") {
		t.Errorf("a token in both places: %v", err)
	}
	if _, err := runCLI(t, "", "codec-server", "--addr", "127.0.0.1:0", "--require-encrypted", "--allow-plaintext"); err == nil || !strings.Contains(err.Error(), "contradict") {
		t.Errorf("--require-encrypted with --allow-plaintext: %v, want a refusal", err)
	}
}
