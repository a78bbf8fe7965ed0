// Package siteopstest holds what the tests of several packages share: one
// way to wait for a condition (Eventually, EventuallyNil), one way to
// build the siteops binary that the end-to-end tests, the production-shape
// tests and the benchmarks run as processes (Build), and one way to show
// the end of a server's log (Tail). The world those tests run in —
// simulator, store, Temporal client, the worker as the binary runs it — is
// package testenv beneath it.
package siteopstest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Poll is how often Eventually and EventuallyNil look again.
const Poll = 20 * time.Millisecond

// Eventually polls cond until it holds and fails t, naming what it waited
// for, when within passes first.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	EventuallyNil(t, within, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// errNotYet is a condition that does not hold yet.
var errNotYet = fmt.Errorf("not yet")

// EventuallyNil polls f until it returns nil and fails t when within
// passes first, with what it waited for and f's last error: what it got
// instead.
func EventuallyNil(t testing.TB, within time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			if err == errNotYet { //nolint:errorlint // the sentinel itself, never wrapped
				t.Fatalf("timed out after %s waiting for %s", within, what)
			}
			t.Fatalf("timed out after %s waiting for %s; last: %v", within, what, err)
		}
		time.Sleep(Poll)
	}
}

// Build builds cmd/siteops of this module into dir and returns the
// binary's path. Its output (a compile error) goes to the error.
func Build(dir string) (string, error) {
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module's directory (go list -m): %w", err)
	}
	bin := filepath.Join(dir, "siteops")
	build := exec.Command("go", "build", "-o", bin, "./cmd/siteops") //nolint:gosec // this module's own command, into a directory the test made
	build.Dir = strings.TrimSpace(string(root))
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building siteops: %w\n%s", err, out)
	}
	if _, err := os.Stat(bin); err != nil {
		return "", err
	}
	return bin, nil
}

// Log is the output of a process or a command that it writes while a test
// reads it: a strings.Builder safe for both at once.
type Log struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is what was written so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Tail returns the last n lines of the file at path, each cut to width
// bytes, for a test to print what a server it ran said last; it reads at
// most the last 256 KiB. A file it cannot read is said as such.
func Tail(path string, n, width int) string {
	f, err := os.Open(path) //nolint:gosec // a log file the test made
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)\n", err)
	}
	defer func() { _ = f.Close() }()
	const most = 256 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > most {
		_, _ = f.Seek(-most, io.SeekEnd)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)\n", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return "(empty)\n"
	}
	lines = lines[max(0, len(lines)-n):]
	var out strings.Builder
	for _, l := range lines {
		if len(l) > width {
			l = l[:width] + "…"
		}
		out.WriteString(l + "\n")
	}
	return out.String()
}

// The variables that make a missing dependency fail the tests that need it
// instead of skipping them: CI sets each for what its machine has or
// installs (.ci/run), so that a run without a part cannot pass.
const (
	RequirePostgres   = "SITEOPS_REQUIRE_POSTGRES" // store/storetest.RequirePostgres too
	RequireTemporal   = "SITEOPS_REQUIRE_TEMPORAL"
	RequireShellcheck = "SITEOPS_REQUIRE_SHELLCHECK"
	RequireKubectl    = "SITEOPS_REQUIRE_KUBECTL"
)

// Missing ends t for a dependency that is not there: it fails t, naming
// require as what made it a failure, when that variable is set, and skips
// t with one line saying what is missing otherwise. Never a silent pass.
func Missing(t testing.TB, require, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(require) != "" {
		t.Fatalf("%s is set, and %s", require, msg)
		return
	}
	t.Skipf("SKIP: %s (set %s=1 to make this a failure)", msg, require)
}
