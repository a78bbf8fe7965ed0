package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// cleanSecretEnv unsets every secret variable and its _FILE twin for the
// test, restoring them afterwards, so that the test sees only what it sets.
func cleanSecretEnv(t *testing.T) {
	t.Helper()
	for _, name := range SecretVariables {
		for _, v := range []string{name, name + FileSuffix} {
			t.Setenv(v, "")
			unset(t, v)
		}
	}
}

// writeSecret writes content to a new file of the test and returns its path.
func writeSecret(t *testing.T, name, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadSecretFilesReadsEveryVariable(t *testing.T) {
	cleanSecretEnv(t)
	want := map[string]string{}
	for i, name := range SecretVariables {
		value := "value-of-" + strings.ToLower(name)
		// The usual shapes of a secret file: `openssl rand ... > file`
		// (one newline), an editor's CRLF, none (kubectl --from-literal).
		content := value + []string{"\n", "\r\n", "", "\n\n"}[i%4]
		t.Setenv(name+FileSuffix, writeSecret(t, name, content, 0o600))
		want[name] = value
	}
	if err := LoadSecretFiles(); err != nil {
		t.Fatalf("LoadSecretFiles: %v", err)
	}
	for name, w := range want {
		if got := os.Getenv(name); got != w {
			t.Errorf("%s = %q, want %q", name, got, w)
		}
		if v, ok := os.LookupEnv(name + FileSuffix); ok {
			t.Errorf("%s%s is still set (%q); a child process would see both", name, FileSuffix, v)
		}
	}
}

func TestLoadSecretFilesKeepsWhatIsNotAFile(t *testing.T) {
	cleanSecretEnv(t)
	t.Setenv("SITEOPS_SECRET_KEY", "direct")
	t.Setenv("AGENTSITE_API_KEY_FILE", "") // empty counts as unset
	t.Setenv("TEMPORAL_API_KEY", "")
	t.Setenv("TEMPORAL_API_KEY_FILE", writeSecret(t, "key", "from-file\n", 0o600))
	t.Setenv("SITEOPS_PAYLOAD_KEY_FILE", writeSecret(t, "empty", "", 0o600))
	if err := LoadSecretFiles(); err != nil {
		t.Fatalf("LoadSecretFiles: %v", err)
	}
	for name, want := range map[string]string{
		"SITEOPS_SECRET_KEY":  "direct",
		"AGENTSITE_API_KEY":   "",
		"TEMPORAL_API_KEY":    "from-file", // an empty variable does not conflict with its file
		"SITEOPS_PAYLOAD_KEY": "",          // an empty file is an unset setting
	} {
		if got := os.Getenv(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if _, ok := os.LookupEnv("AGENTSITE_API_KEY_FILE"); ok {
		t.Errorf("the empty AGENTSITE_API_KEY_FILE is still set")
	}
}

func TestLoadSecretFilesErrors(t *testing.T) {
	const secret = "svc_live_do-not-print-me"
	dir := t.TempDir()
	unreadable := writeSecret(t, "unreadable", secret, 0o000)
	big := writeSecret(t, "big", strings.Repeat("x", maxSecretFile+1), 0o600)
	nul := writeSecret(t, "nul", "a\x00b", 0o600)
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string // in the message
		skip func() bool
	}{
		{
			name: "both set",
			env:  map[string]string{"AGENTSITE_API_KEY": secret, "AGENTSITE_API_KEY_FILE": writeSecret(t, "k", secret, 0o600)},
			want: []string{"AGENTSITE_API_KEY and AGENTSITE_API_KEY_FILE are both set"},
		},
		{
			name: "missing file",
			env:  map[string]string{"SITEOPS_SECRET_KEY_FILE": filepath.Join(dir, "absent")},
			want: []string{"SITEOPS_SECRET_KEY_FILE=" + filepath.Join(dir, "absent"), "no such file"},
		},
		{
			name: "unreadable file",
			env:  map[string]string{"SITEOPS_DATABASE_URL_FILE": unreadable},
			want: []string{"SITEOPS_DATABASE_URL_FILE=" + unreadable, "permission denied"},
			// root reads a file of mode 000.
			skip: func() bool { _, err := os.ReadFile(unreadable); return err == nil },
		},
		{
			name: "directory",
			env:  map[string]string{"SITEOPS_CODEC_TOKEN_FILE": dir},
			want: []string{"SITEOPS_CODEC_TOKEN_FILE=" + dir, "is a directory"},
		},
		{
			name: "too large",
			env:  map[string]string{"SITEOPS_WEBHOOK_SECRETS_FILE": big},
			want: []string{"SITEOPS_WEBHOOK_SECRETS_FILE=" + big, "more than 64 KiB"},
		},
		{
			name: "NUL byte",
			env:  map[string]string{"SITEOPS_OLD_SECRET_KEY_FILE": nul},
			want: []string{"SITEOPS_OLD_SECRET_KEY_FILE=" + nul, "cannot be the value of SITEOPS_OLD_SECRET_KEY"},
		},
		{
			name: "every problem at once",
			env: map[string]string{
				"TEMPORAL_API_KEY": secret, "TEMPORAL_API_KEY_FILE": writeSecret(t, "t", secret, 0o600),
				"SITEOPS_PAYLOAD_KEY_FILE": filepath.Join(dir, "absent"),
			},
			want: []string{"TEMPORAL_API_KEY and TEMPORAL_API_KEY_FILE", "SITEOPS_PAYLOAD_KEY_FILE="},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip != nil && tc.skip() {
				t.Skip("SKIP: this process reads files of mode 000 (root)")
			}
			cleanSecretEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			err := LoadSecretFiles()
			if err == nil {
				t.Fatalf("LoadSecretFiles = nil; want an error with %q", tc.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not match ErrInvalid (exit 2)", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q; want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q holds the secret", err)
			}
		})
	}
}

// TestSecretVariablesAreSettings checks that every variable accepted as a
// file is one a siteops config reads or the Temporal SDK's loader reads, so
// that no _FILE name is accepted for a setting that does not exist.
func TestSecretVariablesAreSettings(t *testing.T) {
	var read []string
	for _, spec := range []any{Temporal{}, AgentSite{}, Database{}, Ingress{}} {
		read = append(read, envNames(spec)...)
	}
	// Read outside the structs above: by the commands that need them
	// (secret rekey, codec-server) and by the Temporal SDK's loader.
	read = append(read, "SITEOPS_OLD_SECRET_KEY", "SITEOPS_CODEC_TOKEN", "TEMPORAL_API_KEY")
	for _, name := range SecretVariables {
		found := false
		for _, r := range read {
			found = found || r == name
		}
		if !found {
			t.Errorf("%s accepts %s%s but no setting of that name exists", name, name, FileSuffix)
		}
	}
}

// envNames returns the envconfig names of the fields of spec.
func envNames(spec any) []string {
	var out []string
	rt := reflect.TypeOf(spec)
	for i := range rt.NumField() {
		if name := rt.Field(i).Tag.Get("envconfig"); name != "" {
			out = append(out, name)
		}
	}
	return out
}
