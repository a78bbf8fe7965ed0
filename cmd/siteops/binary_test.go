package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/siteops/siteops/internal/siteopstest"
)

var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// siteopsBinary builds the siteops binary once for the tests that run it
// as a person would, and returns its path.
func siteopsBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "siteops-cli-test-"); built.err != nil {
			return
		}
		built.path, built.err = siteopstest.Build(built.dir)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// runBinary runs the built binary in dir with only env (and PATH) as its
// environment.
func runBinary(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), siteopsBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running siteops %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// TestBadFlagBeforeOutputJSON checks that a flag pflag cannot parse is
// still answered as the one JSON error -o json asks for when -o json comes
// after it (parsing stops at the bad flag, before it sets -o).
func TestBadFlagBeforeOutputJSON(t *testing.T) {
	for _, args := range [][]string{
		{"onboard", "--dryrun", "-o", "json"},
		{"onboard", "--dryrun", "--output=json"},
		{"embed", "off", "--sit", "site_1", "-ojson"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			got := usageErrorJSON(t, nil, args...)
			if !strings.Contains(got.Error, "unknown flag") || !strings.Contains(got.Error, "did you mean") {
				t.Errorf("the error %q does not name the flag and what was meant", got.Error)
			}
		})
	}
}

func TestOutputAsked(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"onboard", "--bad", "-o", "json"}, "json"},
		{[]string{"-ojson"}, "json"},
		{[]string{"-o=json"}, "json"},
		{[]string{"--output", "json", "-o", "text"}, "text"},
		{[]string{"--output=json"}, "json"},
		{[]string{"embed", "off", "--reason", "x"}, ""},
		{[]string{"sim", "--", "-o", "json"}, ""},
	} {
		if got := outputAsked(tc.args); got != tc.want {
			t.Errorf("outputAsked(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestSecretFileErrorAsJSON checks that a NAME_FILE that cannot be read,
// which stops siteops before any command runs, is still answered as the
// one JSON error -o json asks for, naming the variable and the path.
func TestSecretFileErrorAsJSON(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "api-key")
	got := usageErrorJSON(t, []string{"AGENTSITE_API_KEY_FILE=" + missing}, "status", "onboarding/x", "-o", "json")
	if !strings.Contains(got.Error, "AGENTSITE_API_KEY_FILE") || !strings.Contains(got.Error, missing) {
		t.Errorf("the error %q does not name the variable and its path", got.Error)
	}
}

// usageErrorJSON runs the binary with env and args and returns the one
// JSON error it wrote to standard error, having written nothing else and
// exited with the usage code.
func usageErrorJSON(t *testing.T, env []string, args ...string) errorJSON {
	t.Helper()
	stdout, stderr, code := runBinary(t, t.TempDir(), env, args...)
	var got errorJSON
	if err := json.Unmarshal([]byte(stderr), &got); err != nil || code != exitUsage || got.ExitCode != exitUsage || stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q (%v); want exit %d and one JSON error", code, stdout, stderr, err, exitUsage)
	}
	return got
}
