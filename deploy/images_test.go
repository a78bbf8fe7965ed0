package deploy_test

import (
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// pinnedRef is an image pinned by an exact tag and a digest.
var pinnedRef = regexp.MustCompile(`^([a-z0-9.-]+(?::\d+)?/)?[a-z0-9._/-]+:([A-Za-z0-9._-]+)@sha256:[0-9a-f]{64}$`)

// ownImages are the images deploy/ builds; no registry holds them before
// a deployment pushes them, so their digests are set where they are pushed.
var ownImages = []string{"siteops", temporalImageRepo}

// TestToolchainPinned checks go.mod's toolchain line: the exact Go release
// the project builds with, of the language version its go line names.
func TestToolchainPinned(t *testing.T) {
	gomod := read(t, "../go.mod")
	tc := regexp.MustCompile(`(?m)^toolchain go(\d+\.\d+)\.(\d+)$`).FindStringSubmatch(gomod)
	lang := regexp.MustCompile(`(?m)^go (\d+\.\d+)(?:\.\d+)?$`).FindStringSubmatch(gomod)
	if tc == nil || lang == nil {
		t.Fatalf("go.mod has no `toolchain goX.Y.Z` line (or no go line): pin the Go release the project builds with")
	}
	if tc[1] != lang[1] {
		t.Errorf("go.mod: toolchain go%s.%s is not a release of go %s", tc[1], tc[2], lang[1])
	}
	// The go command runs the toolchain line's release, or a newer local one.
	if v := runtime.Version(); !strings.HasPrefix(v, "go"+tc[1]) {
		t.Errorf("these tests were built with %s; go.mod's toolchain is go%s.%s", v, tc[1], tc[2])
	}
	t.Logf("go.mod toolchain go%s.%s; these tests were built with %s", tc[1], tc[2], runtime.Version())
}

// TestDockerImagesPinned checks every FROM of both Dockerfiles: an exact
// tag and a digest, with a comment above it saying where the digest was
// published; the Go image is the release go.mod's toolchain line names.
func TestDockerImagesPinned(t *testing.T) {
	tc := regexp.MustCompile(`(?m)^toolchain go(\S+)$`).FindStringSubmatch(read(t, "../go.mod"))
	if tc == nil {
		t.Fatal("go.mod has no toolchain line")
	}
	golang := map[string]string{}
	for _, file := range []string{"Dockerfile", "temporal.Dockerfile"} {
		lines := strings.Split(read(t, file), "\n")
		froms := 0
		for i, line := range lines {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "FROM" {
				continue
			}
			froms++
			ref := f[1]
			if strings.HasPrefix(ref, "--") {
				t.Errorf("%s: %q: put flags after the image or not at all", file, line)
				continue
			}
			m := pinnedRef.FindStringSubmatch(ref)
			if m == nil || m[2] == "latest" {
				t.Errorf("%s: FROM %s is not pinned by an exact tag and digest (IMAGE:TAG@sha256:...)", file, ref)
				continue
			}
			if c := commentAbove(strings.Join(lines[:i+1], "\n"), line); !strings.Contains(c, "digest") {
				t.Errorf("%s: FROM %s has no comment above it saying where its digest was published", file, ref)
			}
			if imageName(ref) == "golang" {
				golang[file] = ref
				if !strings.HasPrefix(m[2], tc[1]+"-") {
					t.Errorf("%s: FROM %s; go.mod's toolchain is go%s: use golang:%s-... (and its digest)", file, ref, tc[1], tc[1])
				}
			}
		}
		if froms < 2 {
			t.Errorf("%s has %d FROM lines; want a build and a runtime stage", file, froms)
		}
	}
	if len(golang) != 2 || golang["Dockerfile"] != golang["temporal.Dockerfile"] {
		t.Errorf("the Dockerfiles build with different Go images: %v", golang)
	}
}

// TestComposeImagesPinned checks the images of compose.yaml: siteops' are
// the builds deploy/.env names; the ones it builds are built here and never
// pulled; every other is pinned by tag and digest, with a comment saying
// where the digest was published.
func TestComposeImagesPinned(t *testing.T) {
	text := read(t, "compose.yaml")
	for name, svc := range composeServices(t) {
		ref := str(svc["image"])
		switch {
		case composeImageVar[name] != "":
			// The siteops builds, named in deploy/.env (TestComposeSlots).
			if !strings.HasPrefix(ref, "${"+composeImageVar[name]+":?") || svc["build"] != nil {
				t.Errorf("compose %s: image %q (build %v); want ${%s:?...} from deploy/.env, never built here", name, ref, svc["build"], composeImageVar[name])
			}
		case svc["build"] != nil:
			if !slices.Contains(ownImages, imageName(ref)) || strings.HasSuffix(ref, ":latest") || !strings.Contains(ref, ":") {
				t.Errorf("compose %s builds %q; tag the image it builds with a name of its own, not latest", name, ref)
			}
			if str(svc["pull_policy"]) != "build" {
				t.Errorf("compose %s: pull_policy %q; want build, so that a registry's image of that name is never run instead", name, svc["pull_policy"])
			}
		case ref == "":
			t.Errorf("compose %s has no image", name)
		default:
			if m := pinnedRef.FindStringSubmatch(ref); m == nil || m[2] == "latest" {
				t.Errorf("compose %s: image %s is not pinned by an exact tag and digest", name, ref)
			}
			if c := commentAbove(text, "image: "+ref); !strings.Contains(c, "digest") {
				t.Errorf("compose %s: no comment above image %s saying where its digest was published", name, ref)
			}
		}
	}
}

// TestKubernetesImagesPinned checks the images of both kustomizations:
// every container's image is one deploy/ builds, which the kustomization
// maps to a digest (no tag), or one pinned by tag and digest; nothing is
// :latest. The digests of the images deploy/ builds are placeholders until
// a deployment pushes them (kustomize edit set image): the test says so.
func TestKubernetesImagesPinned(t *testing.T) {
	placeholders := map[string]bool{}
	for _, dir := range []string{"kubernetes", temporalDir} {
		k := kustomization(t, dir)
		mapped := map[string]map[string]any{}
		for _, img := range list(k["images"]) {
			e, _ := img.(map[string]any)
			mapped[str(e["name"])] = e
		}
		for _, m := range manifests(t, dir) {
			if !isWorkload(m) {
				continue
			}
			for _, c := range append(containers(m, true), containers(m, false)...) {
				ref := str(c["image"])
				name := imageName(ref)
				if strings.HasSuffix(ref, ":latest") {
					t.Errorf("%s: image %s", m, ref)
				}
				if !slices.Contains(ownImages, name) {
					if pinnedRef.FindStringSubmatch(ref) == nil {
						t.Errorf("%s: image %s is not pinned by an exact tag and digest", m, ref)
					}
					continue
				}
				e := mapped[name]
				digest := str(e["digest"])
				switch {
				case e == nil:
					t.Errorf("%s: image %s is not mapped to a digest in %s/kustomization.yaml (images:)", m, ref, dir)
				case e["newTag"] != nil || !strings.HasPrefix(digest, "sha256:"):
					t.Errorf("%s/kustomization.yaml maps %s to tag %v, digest %q; pin it by digest only", dir, name, e["newTag"], digest)
				case !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(digest) && !placeholders[dir+name]:
					placeholders[dir+name] = true
					t.Logf("%s/kustomization.yaml: the digest of %s is the placeholder %q until you push it (kustomize edit set image %s=REGISTRY/%s@sha256:...)", dir, name, digest, name, name)
				}
			}
		}
	}
}

// commentAbove returns the comment lines right above the first line of
// text holding s (after its indentation), joined.
func commentAbove(text, s string) string {
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if strings.TrimSpace(line) != s {
			continue
		}
		var comment []string
		for j := i - 1; j >= 0 && strings.HasPrefix(strings.TrimSpace(lines[j]), "#"); j-- {
			comment = append(comment, lines[j])
		}
		return strings.Join(comment, " ")
	}
	return ""
}

// TestNoLatest checks that no deployment file names an image :latest.
func TestNoLatest(t *testing.T) {
	files := append(deployFiles(t), "Dockerfile", "temporal.Dockerfile", filepath.Join("kubernetes", "kustomization.yaml"), filepath.Join(temporalDir, "kustomization.yaml"))
	re := regexp.MustCompile(`[a-z0-9/_.-]+:latest\b`)
	for _, f := range files {
		if m := re.FindString(read(t, f)); m != "" {
			t.Errorf("%s names %s; pin an exact version and digest", f, m)
		}
	}
}
