package release

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// stamp is the build id linked in at build time: the Makefile's build
// target sets it to `git describe --always --dirty`
// (-ldflags "-X github.com/siteops/siteops/release.stamp=...").
var stamp string

// Sources of a build id, as BuildID reports them.
const (
	FromEnv        = "SITEOPS_BUILD_ID"
	FromStamp      = "the id linked in at build time"
	FromVCS        = "the VCS revision the go command recorded"
	FromExecutable = "the executable's SHA-256"
)

// MaxBuildIDLength keeps a build id usable as a Kubernetes label value,
// which deploy/kubernetes/rollout.sh makes of it.
const MaxBuildIDLength = 63

// ErrBuildID matches errors.Is for a build id that names no build.
var ErrBuildID = errors.New("release: no usable build id")

// placeholders are ids that name no build: builds made without a stamp
// used to share them, so two releases looked like one version and the
// second took over the first one's pinned workflows.
var placeholders = map[string]bool{"dev": true, "devel": true, "(devel)": true, "latest": true, "unknown": true, "none": true}

// BuildID returns the build id of this binary and where it came from:
// configured (SITEOPS_BUILD_ID) when set; else the id linked in at build
// time (with "-sha-" and 12 hex digits of the executable's SHA-256 after a
// "-dirty" one); else the VCS revision the go command recorded (its first 12 hex
// digits, and for a modified tree "-dirty-sha-" and 12 hex digits of the
// executable's SHA-256, since two modified trees of one commit differ);
// else "sha-" and 12 hex digits of the executable's SHA-256. A configured
// or linked-in id that names no build (dev, latest, unknown, (devel)), or
// that a Kubernetes label cannot hold, is refused rather than replaced:
// someone chose it.
func BuildID(configured string) (id, source string, err error) {
	if configured = strings.TrimSpace(configured); configured != "" {
		return checked(configured, FromEnv)
	}
	if stamp != "" {
		id, source, err := checked(stamp, FromStamp)
		if err != nil || !strings.HasSuffix(id, "-dirty") {
			return id, source, err
		}
		// `git describe --dirty` names every modified tree of a commit
		// alike; the executable tells them apart.
		sum, err := executableSum()
		if err != nil {
			return "", "", fmt.Errorf("%w: the binary was built from a modified tree (%s) and its executable cannot be read to tell it apart (%w); set SITEOPS_BUILD_ID to the version it is", ErrBuildID, id, err)
		}
		return checked(id+"-sha-"+sum, FromStamp)
	}
	if rev, dirty := vcsRevision(); rev != "" {
		if !dirty {
			return rev, FromVCS, nil
		}
		sum, err := executableSum()
		if err != nil {
			return "", "", fmt.Errorf("%w: the binary was built from a modified tree of %s and its executable cannot be read to tell it apart (%w); set SITEOPS_BUILD_ID to the version it is", ErrBuildID, rev, err)
		}
		return rev + "-dirty-sha-" + sum, FromVCS, nil
	}
	sum, err := executableSum()
	if err != nil {
		return "", "", fmt.Errorf("%w: the binary records no VCS revision and its executable cannot be read (%w); set SITEOPS_BUILD_ID to the version it is, or build with `make build`", ErrBuildID, err)
	}
	return "sha-" + sum, FromExecutable, nil
}

// checked refuses an id that names no build or that a label cannot hold.
func checked(id, source string) (string, string, error) {
	name := "SITEOPS_BUILD_ID"
	if source == FromStamp {
		name = "the build id linked in at build time"
	}
	if placeholders[strings.ToLower(id)] {
		return "", "", fmt.Errorf("%w: %s is %q, which names no build: every build made that way would be the same Worker Deployment Version, and a new release would take over the pinned workflows of the old one; set it to the version the build is (e.g. `git describe --always --dirty`, as `make build` and deploy/Dockerfile's VERSION do) or unset it to derive one from the binary", ErrBuildID, name, id)
	}
	if len(id) > MaxBuildIDLength || strings.HasPrefix(id, "__") || strings.IndexFunc(id, notLabelChar) >= 0 || !isAlnum(id[0]) || !isAlnum(id[len(id)-1]) {
		return "", "", fmt.Errorf("%w: %s is %q; use at most %d letters, digits, '.', '-' and '_', starting and ending with a letter or digit (it becomes a Kubernetes label)", ErrBuildID, name, id, MaxBuildIDLength)
	}
	return id, source, nil
}

func notLabelChar(r rune) bool {
	if r >= 128 {
		return true
	}
	b := byte(r) //nolint:gosec // r < 128: the byte is the rune
	return !isAlnum(b) && b != '.' && b != '-' && b != '_'
}

func isAlnum(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// executableSum is the first 12 hex digits of the running executable's
// SHA-256.
func executableSum() (string, error) {
	path, err := os.Executable()
	if err != nil {
		return "", err
	}
	f, err := os.Open(path) //nolint:gosec // the running executable itself
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}
