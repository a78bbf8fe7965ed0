package release

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestBuildIDRefusesPlaceholders(t *testing.T) {
	for _, id := range []string{"dev", "DEV", "latest", "unknown", "(devel)", " dev ", "none"} {
		_, _, err := BuildID(id)
		if !errors.Is(err, ErrBuildID) || !strings.Contains(err.Error(), "names no build") || !strings.Contains(err.Error(), "SITEOPS_BUILD_ID") {
			t.Errorf("BuildID(%q) = %v, want ErrBuildID naming SITEOPS_BUILD_ID and why", id, err)
		}
	}
}

func TestBuildIDRefusesWhatALabelCannotHold(t *testing.T) {
	for _, id := range []string{"a b", "build/1", "-lead", "trail-", "__internal", "x:y", strings.Repeat("a", 64), "é"} {
		if _, _, err := BuildID(id); !errors.Is(err, ErrBuildID) {
			t.Errorf("BuildID(%q) = %v, want ErrBuildID", id, err)
		}
	}
}

func TestBuildIDTakesTheConfiguredOne(t *testing.T) {
	for _, id := range []string{"build-a", "v1.2.3-4-gabcdef0-dirty", "0123456789ab", strings.Repeat("a", 63)} {
		got, src, err := BuildID(id)
		if err != nil || got != id || src != FromEnv {
			t.Errorf("BuildID(%q) = %q, %q, %v; want it as is from %s", id, got, src, err, FromEnv)
		}
	}
}

func TestBuildIDFromTheStamp(t *testing.T) {
	defer func(old string) { stamp = old }(stamp)
	stamp = "v3.0.0-1-g1234567"
	if got, src, err := BuildID(""); err != nil || got != stamp || src != FromStamp {
		t.Errorf("BuildID(\"\") = %q, %q, %v; want the stamp %q", got, src, err, stamp)
	}
	if got, _, err := BuildID("build-b"); err != nil || got != "build-b" {
		t.Errorf("SITEOPS_BUILD_ID does not win over the stamp: %q, %v", got, err)
	}
	stamp = "v3.0.0-dirty"
	if got, _, err := BuildID(""); err != nil || !strings.HasPrefix(got, "v3.0.0-dirty-sha-") || len(got) != len("v3.0.0-dirty-sha-")+12 {
		t.Errorf("a -dirty stamp: %q, %v; want it followed by -sha- and the executable's digest", got, err)
	}
	stamp = "dev"
	if _, _, err := BuildID(""); !errors.Is(err, ErrBuildID) || !strings.Contains(err.Error(), "linked in") {
		t.Errorf("a placeholder stamp: %v, want ErrBuildID naming the stamp", err)
	}
}

// A test binary records no VCS revision, like a build from a tarball:
// the id is the executable's digest.
func TestBuildIDFromTheExecutable(t *testing.T) {
	if rev, _ := vcsRevision(); rev != "" {
		t.Skip("this test binary records a VCS revision")
	}
	path, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path) //nolint:gosec // the test binary itself
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	want := "sha-" + hex.EncodeToString(sum[:])[:12]
	got, src, err := BuildID("")
	if err != nil || got != want || src != FromExecutable {
		t.Errorf("BuildID(\"\") = %q, %q, %v; want %q from %s", got, src, err, want, FromExecutable)
	}
}
