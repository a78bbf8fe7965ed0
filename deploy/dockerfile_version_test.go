package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/siteops/siteops/release"
)

// instructions returns a Dockerfile's instructions, continuation lines
// joined and comments left out.
func instructions(text string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if cur.Len() == 0 && (strings.HasPrefix(strings.TrimSpace(line), "#") || strings.TrimSpace(line) == "") {
			continue
		}
		if rest, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(rest)
			continue
		}
		cur.WriteString(line)
		out = append(out, strings.TrimSpace(cur.String()))
		cur.Reset()
	}
	return out
}

// TestDockerfileVersion checks deploy/Dockerfile's VERSION, the image's
// build id: a required build argument (no default) whose check fails the
// build, naming --build-arg VERSION=..., when it is missing or names no
// build, before the sources are even copied; linked in with -ldflags as
// the Makefile's build target links it (built here with those flags, the
// binary reports it as its build id); and SITEOPS_BUILD_ID set from it.
func TestDockerfileVersion(t *testing.T) {
	ins := instructions(read(t, "Dockerfile"))
	idx := func(pred func(string) bool) int { return slices.IndexFunc(ins, pred) }
	for _, in := range ins {
		if strings.HasPrefix(in, "ARG VERSION") && in != "ARG VERSION" {
			t.Errorf("the Dockerfile has %q; VERSION must have no default (a shared default is what made builds look alike)", in)
		}
	}
	if !slices.Contains(ins, "ENV SITEOPS_BUILD_ID=${VERSION}") {
		t.Errorf("the Dockerfile does not set ENV SITEOPS_BUILD_ID=${VERSION}")
	}
	check := idx(func(s string) bool {
		return strings.HasPrefix(s, "RUN ") && strings.Contains(s, "--build-arg VERSION=")
	})
	build := idx(func(s string) bool { return strings.HasPrefix(s, "RUN ") && strings.Contains(s, "go build") })
	sources := idx(func(s string) bool { return s == "COPY . ." })
	if check < 0 || build < 0 || sources < 0 {
		t.Fatalf("the Dockerfile has no RUN that checks VERSION (naming --build-arg VERSION=), no go build or no COPY . .")
	}
	if check > sources || check > build {
		t.Errorf("the Dockerfile checks VERSION after it copies the sources or builds; check first, so that a missing VERSION fails at once")
	}

	// The check, as the build stage's shell runs it (an ARG is a variable
	// of RUN's environment, unset when not given).
	script := strings.TrimPrefix(ins[check], "RUN ")
	for _, tc := range []struct {
		version string
		set     bool
		ok      bool
	}{
		{"", false, false}, {"", true, false}, {"dev", true, false}, {"DEV", true, false}, {"latest", true, false},
		{"unknown", true, false}, {"none", true, false}, {"devel", true, false}, {"(devel)", true, false},
		{"v3 0", true, false}, {"-v3", true, false}, {"v3/0", true, false}, {"31c4c4a-dirty", true, false},
		{strings.Repeat("a", 64), true, false},
		{"v3.0.0", true, true}, {"31c4c4a", true, true}, {"v3.0.0-2-g1234abc", true, true}, {strings.Repeat("a", 63), true, true},
	} {
		cmd := exec.CommandContext(t.Context(), "sh", "-c", script)
		cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "VERSION=") })
		if tc.set {
			cmd.Env = append(cmd.Env, "VERSION="+tc.version)
		}
		out, err := cmd.CombinedOutput()
		if tc.ok && err != nil {
			t.Errorf("the Dockerfile's VERSION check refuses %q: %v\n%s", tc.version, err, out)
		}
		if !tc.ok && (err == nil || !strings.Contains(string(out), "--build-arg VERSION=")) {
			t.Errorf("the Dockerfile's VERSION check with VERSION %q (set: %t): %v; want a failure naming --build-arg VERSION=...\n%s", tc.version, tc.set, err, out)
		}
		// What it accepts, a worker accepts too.
		if _, _, err := release.BuildID(tc.version); tc.ok && err != nil {
			t.Errorf("the Dockerfile accepts VERSION %q, which a worker refuses: %v", tc.version, err)
		}
	}

	// -ldflags: the same -X variables as the Makefile's build target, and
	// they take: a binary built so reports VERSION as its linked-in build id.
	flags := regexp.MustCompile(`-ldflags "([^"]*)"`).FindStringSubmatch(ins[build])
	if flags == nil {
		t.Fatalf("the Dockerfile's go build has no -ldflags \"...\": %s", ins[build])
	}
	xs := func(s string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`-X ([^=\s]+)=`).FindAllStringSubmatch(s, -1) {
			out = append(out, m[1])
		}
		slices.Sort(out)
		return out
	}
	makeBuild := regexp.MustCompile(`(?m)^build:\n\t.*-ldflags "([^"]*)"`).FindStringSubmatch(read(t, "../Makefile"))
	if makeBuild == nil {
		t.Fatalf("the Makefile's build target passes no -ldflags \"...\"")
	}
	if got, want := xs(flags[1]), xs(makeBuild[1]); !slices.Equal(got, want) || !slices.Contains(got, "github.com/siteops/siteops/release.stamp") {
		t.Errorf("the Dockerfile links in %v; the Makefile's build target %v (release's stamp among them)", got, want)
	}
	const version = "v9.9.9-deploy-test"
	bin := filepath.Join(t.TempDir(), "siteops")
	ldflags := strings.ReplaceAll(flags[1], "${VERSION}", version)
	if out, err := exec.Command("go", "build", "-ldflags", ldflags, "-o", bin, "../cmd/siteops").CombinedOutput(); err != nil {
		t.Fatalf("go build -ldflags %q: %v\n%s", ldflags, err, out)
	}
	cmd := exec.Command(bin, "version")
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "SITEOPS_BUILD_ID=") }), "SITEOPS_BUILD_ID=")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), version+" (from "+release.FromStamp+")") {
		t.Errorf("siteops built with the Dockerfile's -ldflags says (%v)\n%s\nwant build id %s from %q", err, out, version, release.FromStamp)
	}
}
