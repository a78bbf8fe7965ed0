package siteopstest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/siteops/siteops/internal/siteopstest"
)

// recordingTB records what Missing asked of its test instead of ending it.
type recordingTB struct {
	testing.TB
	fatal, skip string
}

func (r *recordingTB) Helper()                        {}
func (r *recordingTB) Fatalf(format string, a ...any) { r.fatal = sprintf(format, a...) }
func (r *recordingTB) Skipf(format string, a ...any)  { r.skip = sprintf(format, a...) }

// TestMissingSkipsOrFailsByItsVariable checks that a missing dependency
// skips a test, saying what is missing and which variable makes it a
// failure, and fails it when that variable is set: never a silent pass.
func TestMissingSkipsOrFailsByItsVariable(t *testing.T) {
	const env = "SITEOPS_REQUIRE_TESTTOOL"
	t.Setenv(env, "")
	var r recordingTB
	siteopstest.Missing(&r, env, "testtool is not installed (%s)", "Debian: testtool")
	if r.fatal != "" || !strings.Contains(r.skip, "SKIP: testtool is not installed (Debian: testtool)") || !strings.Contains(r.skip, env+"=1") {
		t.Errorf("unset: skip %q, fatal %q; want a skip naming the tool and %s", r.skip, r.fatal, env)
	}
	t.Setenv(env, "1")
	r = recordingTB{}
	siteopstest.Missing(&r, env, "testtool is not installed")
	if r.skip != "" || !strings.Contains(r.fatal, env+" is set, and testtool is not installed") {
		t.Errorf("set: fatal %q, skip %q; want a failure naming %s", r.fatal, r.skip, env)
	}
}

func sprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }
