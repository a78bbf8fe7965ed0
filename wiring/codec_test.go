package wiring

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCodecToken checks where the codec server's token comes from:
// SITEOPS_CODEC_TOKEN or --token-file, trimmed, and neither both nor one
// that is set but empty.
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
			var env *string
			if tt.envSet {
				env = &tt.env
			}
			got, err := codecToken(env, tt.file)
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
