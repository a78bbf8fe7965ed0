package deploy_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/release"
)

// The per-build workers: the template rollout.sh renders and the script.
var (
	rolloutScript  = filepath.Join("kubernetes", "rollout.sh")
	workerTemplate = filepath.Join("kubernetes", "worker-build.yaml.in")
)

// sampleImage is an image pinned by digest, as rollout.sh requires it.
const sampleImage = "siteops@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// sampleBuilds are the build ids the tests render the template for: a plain
// one, and one with every kind of character a build id may hold.
var sampleBuilds = []string{"v3.0.0", "V3.1.0_rc.1-7-gabc1234"}

// buildName is the name rollout.sh gives a build's Deployment and budget.
func buildName(build string) string {
	return "siteops-worker-" + strings.NewReplacer(".", "-", "_", "-").Replace(strings.ToLower(build))
}

// runRollout runs rollout.sh with sh (POSIX, as its #! line says) and env
// added, and returns its combined output and exit code.
func runRollout(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "sh", append([]string{rolloutScript}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// renderWorkerBuild returns the objects rollout.sh renders for a build,
// exactly as `rollout.sh deploy` applies them.
func renderWorkerBuild(t *testing.T, image, build string) []manifest {
	t.Helper()
	out, code := runRollout(t, nil, "render", image, build)
	if code != 0 {
		t.Fatalf("rollout.sh render %s %s: exit %d\n%s", image, build, code, out)
	}
	where := fmt.Sprintf("%s (rendered for %s)", workerTemplate, build)
	var ms []manifest
	for _, d := range parseDocs(t, where, out) {
		ms = append(ms, manifest{file: where, doc: d})
	}
	return ms
}

// kubernetesObjects are the objects of deploy/kubernetes as they run: the
// files kustomization.yaml applies, and the workers of the sample builds as
// rollout.sh renders them.
func kubernetesObjects(t *testing.T) []manifest {
	t.Helper()
	ms := manifests(t, "kubernetes")
	for _, b := range sampleBuilds {
		ms = append(ms, renderWorkerBuild(t, sampleImage, b)...)
	}
	return ms
}

// dnsLabel is a Kubernetes object name that every kind accepts (RFC 1123
// label); labelValue a label's value.
var (
	dnsLabel   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	labelValue = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$`)
)

// TestWorkerBuildTemplate renders the per-build template as rollout.sh does
// and checks that it makes valid objects of that build: a Deployment and a
// PodDisruptionBudget under a name a DNS label can hold, every placeholder
// replaced, the build id in the labels, the selectors and SITEOPS_BUILD_ID,
// the selector matching the pods it makes (the API server refuses a
// Deployment whose does not), and two builds' objects apart.
func TestWorkerBuildTemplate(t *testing.T) {
	tmpl := read(t, workerTemplate)
	for _, ph := range []string{"@NAME@", "@BUILD_ID@", "@IMAGE@"} {
		if !strings.Contains(tmpl, ph) {
			t.Errorf("%s has no placeholder %s", workerTemplate, ph)
		}
	}
	selectors := map[string]map[string]any{}
	for _, build := range sampleBuilds {
		ms := renderWorkerBuild(t, sampleImage, build)
		name := buildName(build)
		var kinds []string
		for _, m := range ms {
			kinds = append(kinds, m.kind())
			if m.name() != name || !dnsLabel.MatchString(m.name()) {
				t.Errorf("%s is named %q; want %q, a DNS label", m, m.name(), name)
			}
			if dig(m.doc, "metadata", "namespace") != nil {
				t.Errorf("%s names a namespace; rollout.sh applies it in NAMESPACE", m)
			}
			for k, v := range mapOf(dig(m.doc, "metadata", "labels")) {
				if !labelValue.MatchString(str(v)) {
					t.Errorf("%s: label %s=%q is not a label value", m, k, v)
				}
			}
			if got := str(dig(m.doc, "metadata", "labels", "siteops.dev/build-id")); got != build {
				t.Errorf("%s: label siteops.dev/build-id=%q; want %q", m, got, build)
			}
		}
		if !slices.Equal(kinds, []string{"Deployment", "PodDisruptionBudget"}) {
			t.Fatalf("the template renders %v for %s; want a Deployment and its PodDisruptionBudget", kinds, build)
		}
		if left := regexp.MustCompile(`@[A-Z_]+@`).FindAllString(fmt.Sprint(ms[0].doc, ms[1].doc), -1); left != nil {
			t.Errorf("placeholders left after rendering for %s: %v", build, left)
		}
		d, pdb := ms[0], ms[1]
		sel := mapOf(dig(d.doc, "spec", "selector", "matchLabels"))
		if want := map[string]any{"app.kubernetes.io/name": "siteops", "app.kubernetes.io/component": "worker", "siteops.dev/build-id": build}; !reflect.DeepEqual(sel, want) {
			t.Errorf("%s selects %v; want %v (the labels the NetworkPolicies select, and the build)", d, sel, want)
		}
		if !matches(sel, podLabels(d)) {
			t.Errorf("%s: its selector %v does not match its pods' labels %v", d, sel, podLabels(d))
		}
		if ps := mapOf(dig(pdb.doc, "spec", "selector", "matchLabels")); !reflect.DeepEqual(ps, sel) {
			t.Errorf("%s selects %v; want the pods of its build, %v", pdb, ps, sel)
		}
		if ts := mapOf(dig(list(podSpec(d)["topologySpreadConstraints"])[0], "labelSelector", "matchLabels")); !reflect.DeepEqual(ts, sel) {
			t.Errorf("%s spreads the pods of %v; want those of its build, %v", d, ts, sel)
		}
		cs := containers(d, false)
		if len(cs) != 1 {
			t.Fatalf("%s has %d containers; want the worker", d, len(cs))
		}
		if img := str(cs[0]["image"]); img != sampleImage {
			t.Errorf("%s runs %q; want the image deployed, %s", d, img, sampleImage)
		}
		if got := podEnv(t, d, cs[0], configMapData(manifests(t, "kubernetes")))["SITEOPS_BUILD_ID"].value; got != build {
			t.Errorf("%s: SITEOPS_BUILD_ID=%q; want %q, the version its workers poll as", d, got, build)
		}
		for other, osel := range selectors {
			if matches(osel, podLabels(d)) || matches(sel, map[string]any{"siteops.dev/build-id": other}) {
				t.Errorf("the objects of builds %s and %s select each other's pods", other, build)
			}
		}
		selectors[build] = sel
	}

	// kustomize reads the rendered objects (kubectl's, when it is here).
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		siteopstest.Missing(t, siteopstest.RequireKubectl, "kubectl is not installed: the rendered objects were not read by kustomize (the checks above passed)")
	}
	dir := t.TempDir()
	out, code := runRollout(t, nil, "render", sampleImage, sampleBuilds[1])
	if code != 0 {
		t.Fatalf("rollout.sh render: exit %d\n%s", code, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "build.yaml"), []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("resources: [build.yaml]\nnamespace: siteops\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput(); err != nil {
		t.Errorf("kubectl kustomize of the rendered objects: %v\n%s", err, b)
	}

	// The jsonpath with which rollout.sh reads what a Deployment runs, on
	// the rendered one (kubectl label --local reads a file, no cluster).
	jp := regexp.MustCompile(`-o '(jsonpath=[^']*)'`).FindStringSubmatch(read(t, rolloutScript))
	if jp == nil {
		t.Fatalf("rollout.sh reads no -o 'jsonpath=...'")
	}
	cmd := exec.Command(kubectl, "label", "--local", "-f", filepath.Join(dir, "build.yaml"), "x=y", "-o", jp[1])
	cmd.Env = append(os.Environ(), "KUBECONFIG="+os.DevNull)
	got, err := cmd.CombinedOutput()
	if want := sampleBuilds[1] + " " + sampleImage; err != nil || !strings.HasPrefix(string(got), want) {
		t.Errorf("kubectl -o %s on the rendered Deployment: %q (%v); want %q first", jp[1], got, err, want)
	}
}

// TestKustomizationAppliesNoWorkers checks that kustomization.yaml applies
// no worker Deployment of its own (a rolling update of one would replace
// the only workers of the runs the old build pinned) and no budget that
// selects the workers (a pod with two budgets cannot be evicted), and says
// how the first build is deployed.
func TestKustomizationAppliesNoWorkers(t *testing.T) {
	for _, m := range manifests(t, "kubernetes") {
		labels := podLabels(m)
		if m.kind() == "PodDisruptionBudget" {
			labels = mapOf(dig(m.doc, "spec", "selector", "matchLabels"))
		}
		if str(labels["app.kubernetes.io/component"]) == "worker" {
			t.Errorf("%s: the kustomization applies worker pods or their budget; each build's come from %s (rollout.sh deploy)", m, workerTemplate)
		}
	}
	if k := read(t, filepath.Join("kubernetes", "kustomization.yaml")); !strings.Contains(k, "rollout.sh deploy ") {
		t.Errorf("kubernetes/kustomization.yaml does not say how the first build is deployed (rollout.sh deploy IMAGE BUILD_ID)")
	}
}

// kubectlStub stands in for kubectl: it records every call, one line of
// arguments, in $STUB/calls (what apply reads in $STUB/applied) and answers
// what rollout.sh asks from files of $STUB: deployments (the names `get -l`
// lists), runs-NAME (a Deployment's "BUILD_ID IMAGE"), exit-exec-SUB (the
// exit codes of `siteops release SUB`, one a line, the last one kept) and
// exit-rollout-NAME (of `rollout status`).
const kubectlStub = `#!/bin/sh
printf '%s\n' "$*" >>"$STUB/calls"
if [ "$1" = -n ]; then shift 2; fi
key=
case $1 in
apply) cat >>"$STUB/applied"; exit 0 ;;
get)
	if [ "$3" = -l ]; then cat "$STUB/deployments" 2>/dev/null; exit 0; fi
	cat "$STUB/runs-$3" 2>/dev/null
	exit 0
	;;
exec) key=exec-$8 ;;
rollout) key=rollout-${3#deployment/} ;;
esac
f=$STUB/exit-$key
code=0
if [ -n "$key" ] && [ -f "$f" ]; then
	code=$(head -n 1 "$f")
	if [ "$(wc -l <"$f")" -gt 1 ]; then tail -n +2 "$f" >"$f.next" && mv "$f.next" "$f"; fi
fi
echo "kubectl $*: exit $code"
exit "$code"
`

// sleepStub records the script's waits instead of waiting.
const sleepStub = `#!/bin/sh
printf 'sleep %s\n' "$*" >>"$STUB/calls"
`

type stub struct{ dir, bin string }

func newStub(t *testing.T) *stub {
	t.Helper()
	s := &stub{dir: t.TempDir()}
	s.bin = filepath.Join(s.dir, "bin")
	if err := os.Mkdir(s.bin, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"kubectl": kubectlStub, "sleep": sleepStub} {
		if err := os.WriteFile(filepath.Join(s.bin, name), []byte(text), 0o700); err != nil { //nolint:gosec // a test's own stub, executable
			t.Fatal(err)
		}
	}
	return s
}

// set writes one of the stub's answers.
func (s *stub) set(t *testing.T, file, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, file), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// run runs rollout.sh with the stubs first on PATH.
func (s *stub) run(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	return runRollout(t, append([]string{"PATH=" + s.bin + string(os.PathListSeparator) + os.Getenv("PATH"), "STUB=" + s.dir}, env...), args...)
}

// calls returns the stubs' calls, in order.
func (s *stub) calls(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, "calls"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// indexOf is the index of the first call holding part (-1 when none does).
func indexOf(calls []string, part string) int {
	return slices.IndexFunc(calls, func(c string) bool { return strings.Contains(c, part) })
}

// count is how many calls hold part.
func count(calls []string, part string) int {
	n := 0
	for _, c := range calls {
		if strings.Contains(c, part) {
			n++
		}
	}
	return n
}

// inOrder checks that a call holding each part was made, each after the
// one before.
func inOrder(t *testing.T, calls []string, parts ...string) {
	t.Helper()
	last := -1
	for _, p := range parts {
		i := slices.IndexFunc(calls[last+1:], func(c string) bool { return strings.Contains(c, p) })
		if i < 0 {
			t.Errorf("no call holding %q after call %d; calls:\n%s", p, last, strings.Join(calls, "\n"))
			return
		}
		last += 1 + i
	}
}

// TestRolloutDeploy runs `rollout.sh deploy` against the kubectl stub: the
// build's objects are applied as rendered, promote runs only once its pods
// are ready and in one of them, and the ingress rolls only after promote;
// a step that fails stops everything after it.
func TestRolloutDeploy(t *testing.T) {
	const build = "v3.0.0"
	name := buildName(build)
	promote := "exec deployment/" + name + " -c worker -- /siteops release promote --build-id " + build + " "
	t.Run("in order", func(t *testing.T) {
		s := newStub(t)
		out, code := s.run(t, nil, "deploy", sampleImage, build)
		if code != 0 {
			t.Fatalf("rollout.sh deploy: exit %d\n%s", code, out)
		}
		calls := s.calls(t)
		inOrder(t, calls,
			"-n siteops delete poddisruptionbudget siteops-worker --ignore-not-found",
			"-n siteops apply -f -",
			"-n siteops rollout status deployment/"+name+" ",
			"-n siteops "+promote,
			"-n siteops set image deployment/siteops-ingress ingress="+sampleImage,
			"-n siteops rollout status deployment/siteops-ingress ")
		if n := count(calls, "release promote"); n != 1 {
			t.Errorf("promote ran %d times; want once", n)
		}
		applied := parseDocs(t, "what the stub's apply read", read(t, filepath.Join(s.dir, "applied")))
		var want []map[string]any
		for _, m := range renderWorkerBuild(t, sampleImage, build) {
			want = append(want, m.doc)
		}
		if !reflect.DeepEqual(applied, want) {
			t.Errorf("deploy applied\n%v\nwant what render prints\n%v", applied, want)
		}
	})
	t.Run("pods not ready", func(t *testing.T) {
		s := newStub(t)
		s.set(t, "exit-rollout-"+name, "1\n")
		if _, code := s.run(t, nil, "deploy", sampleImage, build); code == 0 {
			t.Errorf("rollout.sh deploy exited 0 though the build's pods never got ready")
		}
		if calls := s.calls(t); indexOf(calls, "release promote") >= 0 || indexOf(calls, "set image") >= 0 {
			t.Errorf("promote or the ingress ran before the build's pods were ready:\n%s", strings.Join(calls, "\n"))
		}
	})
	t.Run("promote fails", func(t *testing.T) {
		s := newStub(t)
		s.set(t, "exit-exec-promote", "5\n")
		out, code := s.run(t, nil, "deploy", sampleImage, build)
		if code != 5 || !strings.Contains(out, "exited 5") {
			t.Errorf("rollout.sh deploy: exit %d; want promote's 5, saying so\n%s", code, out)
		}
		if calls := s.calls(t); indexOf(calls, "set image") >= 0 {
			t.Errorf("the ingress rolled though promote failed:\n%s", strings.Join(calls, "\n"))
		}
	})
	t.Run("again", func(t *testing.T) {
		s := newStub(t)
		s.set(t, "runs-"+name, build+" "+sampleImage)
		if out, code := s.run(t, nil, "deploy", sampleImage, build); code != 0 {
			t.Errorf("rollout.sh deploy of a build that runs that image already: exit %d; want 0 (nothing changes)\n%s", code, out)
		}
	})
	for _, tc := range []struct{ name, build, runs string }{
		{"a build id of the same name", "V3.0.0", "v3.0.0 " + sampleImage},
		{"another image under the same build id", build, build + " siteops@sha256:" + strings.Repeat("f", 64)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStub(t)
			s.set(t, "runs-"+name, tc.runs)
			out, code := s.run(t, nil, "deploy", sampleImage, tc.build)
			if code != 2 {
				t.Errorf("rollout.sh deploy %s beside %q: exit %d; want 2\n%s", tc.build, tc.runs, code, out)
			}
			if calls := s.calls(t); indexOf(calls, "apply") >= 0 {
				t.Errorf("it applied anyway:\n%s", strings.Join(calls, "\n"))
			}
		})
	}
}

// TestRolloutRetire runs `rollout.sh retire` against the kubectl stub: it
// asks `siteops release drained` from another build's worker until it
// exits 0, and deletes the build's Deployment only then; it never deletes
// when drained keeps saying no, fails otherwise, or the Deployment is not
// that build's.
func TestRolloutRetire(t *testing.T) {
	const old, current = "v2.9.0", "v3.0.0"
	oldName, curName := buildName(old), buildName(current)
	drained := "exec deployment.apps/" + curName + " -c worker -- /siteops release drained --build-id " + old
	setup := func(t *testing.T, answers string) *stub {
		s := newStub(t)
		s.set(t, "runs-"+oldName, old+" "+sampleImage)
		s.set(t, "deployments", "deployment.apps/"+curName+"\n")
		s.set(t, "exit-exec-drained", answers)
		return s
	}
	t.Run("after drained exits 0", func(t *testing.T) {
		s := setup(t, "1\n5\n1\n0\n")
		out, code := s.run(t, nil, "retire", old)
		if code != 0 {
			t.Fatalf("rollout.sh retire: exit %d\n%s", code, out)
		}
		calls := s.calls(t)
		if i := indexOf(calls, "get deployment -l"); i < 0 || !strings.Contains(calls[i], "siteops.dev/build-id!="+old) {
			t.Errorf("retire did not ask for the worker Deployments of the other builds:\n%s", strings.Join(calls, "\n"))
		}
		inOrder(t, calls, drained, "sleep 30", drained, "sleep 30", drained, "sleep 30", drained,
			"-n siteops delete deployment "+oldName, "-n siteops delete poddisruptionbudget "+oldName+" --ignore-not-found")
		if n := count(calls, "release drained"); n != 4 {
			t.Errorf("drained was asked %d times; want 4 (until its 0)", n)
		}
		lastDrained := -1
		for i, c := range calls {
			if strings.Contains(c, "release drained") {
				lastDrained = i
			}
		}
		if i := indexOf(calls, "delete deployment"); i < lastDrained {
			t.Errorf("the Deployment was deleted before drained exited 0:\n%s", strings.Join(calls, "\n"))
		}
	})
	t.Run("never drains", func(t *testing.T) {
		s := setup(t, "1\n")
		out, code := s.run(t, []string{"RETIRE_TIMEOUT=90"}, "retire", old)
		if code != 1 || !strings.Contains(out, "has not drained after 90s") {
			t.Errorf("rollout.sh retire with RETIRE_TIMEOUT=90: exit %d; want 1, saying it did not drain\n%s", code, out)
		}
		calls := s.calls(t)
		if n := count(calls, "release drained"); n != 4 {
			t.Errorf("drained was asked %d times in 90 s every 30 s; want 4", n)
		}
		if indexOf(calls, "delete deployment") >= 0 {
			t.Errorf("the Deployment was deleted though drained never exited 0:\n%s", strings.Join(calls, "\n"))
		}
	})
	t.Run("drained fails", func(t *testing.T) {
		s := setup(t, "4\n")
		if _, code := s.run(t, nil, "retire", old); code != 4 {
			t.Errorf("rollout.sh retire when drained exits 4 (credentials): exit %d; want 4", code)
		}
		if calls := s.calls(t); indexOf(calls, "delete deployment") >= 0 || count(calls, "release drained") != 1 {
			t.Errorf("after drained's exit 4 retire went on:\n%s", strings.Join(calls, "\n"))
		}
	})
	t.Run("another build's Deployment", func(t *testing.T) {
		s := setup(t, "0\n")
		s.set(t, "runs-"+curName, current+" "+sampleImage)
		out, code := s.run(t, nil, "retire", old, curName)
		if code != 2 {
			t.Errorf("rollout.sh retire %s %s (build %s's Deployment): exit %d; want 2\n%s", old, curName, current, code, out)
		}
		if calls := s.calls(t); indexOf(calls, "delete") >= 0 || indexOf(calls, "release drained") >= 0 {
			t.Errorf("it went on:\n%s", strings.Join(calls, "\n"))
		}
	})
	t.Run("no other build", func(t *testing.T) {
		s := setup(t, "0\n")
		s.set(t, "deployments", "")
		if _, code := s.run(t, nil, "retire", old); code != 2 {
			t.Errorf("rollout.sh retire with no other build running: exit %d; want 2", code)
		}
		if calls := s.calls(t); indexOf(calls, "delete") >= 0 {
			t.Errorf("it deleted the only build:\n%s", strings.Join(calls, "\n"))
		}
	})
	t.Run("the Deployment of release 2", func(t *testing.T) {
		s := setup(t, "1\n0\n")
		s.set(t, "runs-siteops-worker", " siteops-old@sha256:"+strings.Repeat("e", 64))
		out, code := s.run(t, nil, "retire", "dev", "siteops-worker")
		if code != 0 {
			t.Fatalf("rollout.sh retire dev siteops-worker: exit %d\n%s", code, out)
		}
		inOrder(t, s.calls(t), "release drained --build-id dev", "release drained --build-id dev", "-n siteops delete deployment siteops-worker")
	})
}

// TestRolloutRollbackAndStatus runs `rollout.sh rollback` and `status`
// against the kubectl stub: the older build's workers are ready before the
// newer build's worker runs `siteops release rollback`, and the ingress
// rolls back only after it; release 2's own Deployment is used as it is,
// and its ingress not rolled back.
func TestRolloutRollbackAndStatus(t *testing.T) {
	const old, newer = "v3.0.0", "v3.1.0"
	oldName, newName := buildName(old), buildName(newer)
	rollback := "exec deployment.apps/" + newName + " -c worker -- /siteops release rollback --to-build-id "
	t.Run("per-build", func(t *testing.T) {
		s := newStub(t)
		s.set(t, "deployments", "deployment.apps/"+newName+"\n")
		out, code := s.run(t, nil, "rollback", sampleImage, old)
		if code != 0 {
			t.Fatalf("rollout.sh rollback: exit %d\n%s", code, out)
		}
		inOrder(t, s.calls(t), "apply -f -", "rollout status deployment/"+oldName+" ", rollback+old+" ",
			"set image deployment/siteops-ingress ingress="+sampleImage, "rollout status deployment/siteops-ingress")
	})
	t.Run("release 2", func(t *testing.T) {
		s := newStub(t)
		image := "siteops-old@sha256:" + strings.Repeat("e", 64)
		s.set(t, "deployments", "deployment.apps/"+newName+"\n")
		s.set(t, "runs-siteops-worker", " "+image)
		out, code := s.run(t, nil, "rollback", image, "dev", "siteops-worker")
		if code != 0 {
			t.Fatalf("rollout.sh rollback to release 2's Deployment: exit %d\n%s", code, out)
		}
		calls := s.calls(t)
		inOrder(t, calls, "rollout status deployment/siteops-worker ", rollback+"dev ")
		if indexOf(calls, "apply") >= 0 || indexOf(calls, "set image") >= 0 {
			t.Errorf("it applied the template or rolled the ingress back to release 2:\n%s", strings.Join(calls, "\n"))
		}
		if !strings.Contains(out, "The ingress stays") {
			t.Errorf("it does not say that the ingress stays:\n%s", out)
		}
	})
	t.Run("status", func(t *testing.T) {
		s := newStub(t)
		s.set(t, "deployments", "deployment.apps/"+oldName+"\ndeployment.apps/"+newName+"\n")
		if out, code := s.run(t, nil, "status"); code != 0 {
			t.Fatalf("rollout.sh status: exit %d\n%s", code, out)
		}
		inOrder(t, s.calls(t), "exec deployment.apps/"+newName+" -c worker -- /siteops release status")
	})
}

// TestRolloutRefuses checks what rollout.sh refuses before it calls kubectl
// at all (exit 2): a build id that is no label value, names no build, is a
// -dirty one or too long for its Deployment's name; an image not pinned by
// digest; a wrong use.
func TestRolloutRefuses(t *testing.T) {
	long := "v" + strings.Repeat("1", 48)
	for _, args := range [][]string{
		{}, {"promote"}, {"deploy", sampleImage}, {"status", "extra"},
		{"deploy", sampleImage, "dev"}, {"deploy", sampleImage, "Latest"}, {"deploy", sampleImage, "none"},
		{"deploy", sampleImage, "v3/0"}, {"deploy", sampleImage, "-v3"}, {"deploy", sampleImage, "v3."},
		{"deploy", sampleImage, "v3 0"}, {"deploy", sampleImage, "v3.0.0-dirty"}, {"deploy", sampleImage, long},
		{"deploy", "siteops:v3.0.0", "v3.0.0"}, {"deploy", "siteops@sha256:0123", "v3.0.0"},
		{"deploy", "siteops|x@sha256:" + strings.Repeat("a", 64), "v3.0.0"},
		{"render", sampleImage, "(devel)"}, {"rollback", sampleImage, "unknown"},
		{"retire", "v3/0"}, {"retire", "-x"},
	} {
		s := newStub(t)
		out, code := s.run(t, nil, args...)
		if code != 2 {
			t.Errorf("rollout.sh %q: exit %d; want 2\n%s", args, code, out)
		}
		if calls := s.calls(t); len(calls) > 0 {
			t.Errorf("rollout.sh %q called %v before refusing", args, calls)
		}
	}
}

// TestRolloutBuildIDsAgreeWithTheWorker checks that rollout.sh deploys
// exactly the build ids a worker accepts (release.BuildID), less
// those its Deployment's name cannot hold and -dirty ones.
func TestRolloutBuildIDsAgreeWithTheWorker(t *testing.T) {
	for _, id := range []string{
		"v3.0.0", "31c4c4a", "V3.1.0_rc.1-7-gabc1234", "a", "sha-0123456789ab",
		"dev", "DEV", "devel", "(devel)", "latest", "unknown", "none", "__x", "_x", "x_", ".x", "x.",
		"v3/0", "v3 0", "v3:0", "é", "v3.0.0-dirty", strings.Repeat("a", 48), strings.Repeat("a", 49), strings.Repeat("a", 64),
	} {
		_, _, err := release.BuildID(id)
		want := err == nil && len(id) <= 48 && !strings.HasSuffix(id, "-dirty")
		_, code := runRollout(t, nil, "render", sampleImage, id)
		if (code == 0) != want {
			t.Errorf("rollout.sh render %q: exit %d; the worker says %v (and 48 characters at most, not -dirty): want success %t", id, code, err, want)
		}
	}
}

// TestRolloutScriptLint checks rollout.sh as POSIX sh: sh -n, and
// shellcheck when it is installed.
func TestRolloutScriptLint(t *testing.T) {
	if out, err := exec.Command("sh", "-n", rolloutScript).CombinedOutput(); err != nil {
		t.Errorf("sh -n %s: %v\n%s", rolloutScript, err, out)
	}
	if first, _, _ := strings.Cut(read(t, rolloutScript), "\n"); first != "#!/bin/sh" {
		t.Errorf("%s starts with %q; want #!/bin/sh", rolloutScript, first)
	}
	if fi, err := os.Stat(rolloutScript); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("%s is not executable (%v)", rolloutScript, err)
	}
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		siteopstest.Missing(t, siteopstest.RequireShellcheck, "shellcheck is not installed (Debian: shellcheck): only sh -n checked")
	}
	if out, err := exec.Command(sc, "-s", "sh", rolloutScript).CombinedOutput(); err != nil {
		t.Errorf("shellcheck -s sh %s: %v\n%s", rolloutScript, err, out)
	}
}

// checkReleaseFlags checks that `siteops release SUB` exists and has each
// flag.
func checkReleaseFlags(t *testing.T, sub string, flags ...string) {
	t.Helper()
	help, err := exec.Command(binary, "release", sub, "--help").CombinedOutput()
	if err != nil {
		t.Errorf("siteops release %s --help: %v\n%s", sub, err, help)
		return
	}
	for _, f := range flags {
		if !strings.Contains(string(help), f+" ") {
			t.Errorf("siteops release %s has no flag %s", sub, f)
		}
	}
}

// TestRolloutCommandsExist checks every `siteops release` command
// rollout.sh runs, with its flags, against the binary.
func TestRolloutCommandsExist(t *testing.T) {
	var code strings.Builder // the script without its comments
	for _, line := range strings.Split(read(t, rolloutScript), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			code.WriteString(line + "\n")
		}
	}
	runs := regexp.MustCompile(`\brelease (promote|drained|rollback|status)((?: --[a-z-]+(?: "[^"]*")?)*)`).FindAllStringSubmatch(code.String(), -1)
	seen := map[string]bool{}
	for _, m := range runs {
		seen[m[1]] = true
		checkReleaseFlags(t, m[1], regexp.MustCompile(`--[a-z-]+`).FindAllString(m[2], -1)...)
	}
	for _, sub := range []string{"promote", "drained", "rollback", "status"} {
		if !seen[sub] {
			t.Errorf("rollout.sh never runs siteops release %s", sub)
		}
	}
}
