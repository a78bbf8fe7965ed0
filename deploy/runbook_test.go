package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// runbook is the Kubernetes runbook a platform engineer follows.
const runbook = "../docs/kubernetes.md"

// runbookCommands returns the commands of the runbook's sh blocks, each
// with its continuation lines joined and its shell loop over a list
// (for s in A B; do ... $s ...; done) unrolled.
func runbookCommands(t *testing.T) []string {
	t.Helper()
	var out []string
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(read(t, runbook), -1)
	if len(blocks) < 8 {
		t.Fatalf("%s has %d sh blocks; want one per step at least", runbook, len(blocks))
	}
	loop := regexp.MustCompile(`^for (\w+) in ([^;]+); do (.*); done$`)
	for _, b := range blocks {
		text := strings.ReplaceAll(b[1], "\\\n", " ")
		for _, line := range strings.Split(text, "\n") {
			line = strings.TrimSpace(line)
			if i := strings.Index(line, "  #"); i >= 0 {
				line = strings.TrimSpace(line[:i])
			}
			if line == "" {
				continue
			}
			if m := loop.FindStringSubmatch(line); m != nil {
				for _, v := range strings.Fields(m[2]) {
					out = append(out, strings.ReplaceAll(m[3], "$"+m[1], v))
				}
				continue
			}
			out = append(out, line)
		}
	}
	return out
}

// TestRunbookNamesWhatExists holds the runbook's commands to what the
// repository ships, so that each step that cannot run here (no
// Kubernetes) still names the manifests the tests check: every path under
// deploy/ exists, every object a kubectl command waits for, reads or
// creates a job from is in the manifests of its namespace, every Secret it
// creates is one the manifests mount with the keys they read, every
// rollout.sh and siteops release subcommand exists, and every
// cert-manager Certificate it waits for is in the example.
func TestRunbookNamesWhatExists(t *testing.T) {
	byNamespace := map[string][]manifest{"siteops": kubernetesObjects(t), "temporal": manifests(t, temporalDir)}
	kinds := map[string]string{"job": "Job", "deploy": "Deployment", "cronjob": "CronJob", "certificate": "Certificate"}
	// The release commands and the flags they share (confirm.go: --dry-run, --yes).
	release := read(t, "../cmd/siteops/release.go") + read(t, "../cmd/siteops/confirm.go")
	rollout := read(t, filepath.Join("kubernetes", "rollout.sh"))
	// Jobs the runbook makes itself (kubectl create job NAME), whose logs
	// it then reads.
	made := map[string]bool{}
	checked := 0
	for _, cmd := range runbookCommands(t) {
		f := strings.Fields(cmd)
		for i, w := range f {
			// A file or directory of deploy/ (deploy/NAME alone, in a
			// kubectl command, is a Deployment unless -k or -f takes it).
			p, ok := strings.CutPrefix(w, "deploy/")
			path := ok && !strings.ContainsAny(p, "$<…") && (strings.ContainsAny(p, "./") || (i > 0 && (f[i-1] == "-k" || f[i-1] == "-f")))
			if path {
				if _, err := os.Stat(p); err != nil {
					t.Errorf("%q names %s: %v", cmd, w, err)
				}
				checked++
			}
		}
		ns := ""
		if i := slices.Index(f, "-n"); i >= 0 && i+1 < len(f) {
			ns = f[i+1]
		}
		switch {
		case len(f) > 0 && f[0] == "kubectl" && slices.Contains(f, "secret") && slices.Contains(f, "generic"):
			name := f[slices.Index(f, "generic")+1]
			m, ok := find(byNamespace[ns], "Secret", name)
			if !ok {
				t.Errorf("%q creates the Secret %s, which no manifest of namespace %s shows", cmd, name, ns)
				continue
			}
			want := map[string]bool{}
			for k, shown := range secretKeys(t, []manifest{m})[name] {
				if shown {
					want[k] = true
				}
			}
			got := map[string]bool{}
			for _, w := range f {
				if kv, ok := strings.CutPrefix(w, "--from-file="); ok {
					got[strings.SplitN(kv, "=", 2)[0]] = true
				}
			}
			for k := range want {
				if !got[k] {
					t.Errorf("%q leaves out the key %s of the Secret %s", cmd, k, name)
				}
			}
			for k := range got {
				if !want[k] {
					t.Errorf("%q adds the key %s, which the Secret %s's example does not show", cmd, k, name)
				}
			}
			checked++
		case len(f) > 2 && f[0] == "kubectl":
			if slices.Contains(f, "create") && slices.Contains(f, "job") {
				for _, w := range f {
					if base, _, ok := strings.Cut(w, "$("); ok {
						made[base] = true
					}
				}
			}
			for i, w := range f {
				w = strings.TrimPrefix(w, "--from=")
				kind, name, ok := strings.Cut(w, "/")
				if !ok || kinds[kind] == "" || strings.ContainsAny(name, "./$") || f[i-1] == "-k" || f[i-1] == "-f" {
					continue
				}
				if kind == "certificate" {
					if !slices.ContainsFunc(docs(t, filepath.Join("kubernetes", "cert-manager.example.yaml")), func(o map[string]any) bool {
						return str(o["kind"]) == "Certificate" && str(dig(o, "metadata", "name")) == name && str(dig(o, "metadata", "namespace")) == ns
					}) {
						t.Errorf("%q waits for the Certificate %s/%s, which cert-manager.example.yaml does not make", cmd, ns, name)
					}
					checked++
					continue
				}
				if base, isMade := strings.CutSuffix(name, "…"); isMade {
					if !made[base] {
						t.Errorf("%q reads %s, which no command before it creates", cmd, w)
					}
					continue
				}
				if _, ok := find(byNamespace[ns], kinds[kind], name); !ok {
					t.Errorf("%q names %s %s, which no manifest of namespace %s has", cmd, kinds[kind], name, ns)
				}
				checked++
			}
		case len(f) > 1 && f[0] == "deploy/kubernetes/rollout.sh":
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(f[1]) + `\)`).MatchString(rollout) {
				t.Errorf("%q: rollout.sh has no subcommand %s", cmd, f[1])
			}
			checked++
		case len(f) > 2 && f[0] == "siteops" && f[1] == "release":
			if !strings.Contains(release, `Use:   "`+f[2]) {
				t.Errorf("%q: siteops release has no subcommand %s", cmd, f[2])
			}
			for _, w := range f[3:] {
				if flag, ok := strings.CutPrefix(w, "--"); ok && !strings.Contains(release, `"`+strings.SplitN(flag, "=", 2)[0]+`"`) {
					t.Errorf("%q: siteops release %s has no flag %s", cmd, f[2], w)
				}
			}
			checked++
		}
	}
	if checked < 25 {
		t.Errorf("checked only %d names in the runbook's commands; the parsing missed its blocks", checked)
	}
}
