package main

import (
	"errors"
	"os"
	"os/exec"
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
