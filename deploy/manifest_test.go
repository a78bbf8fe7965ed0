package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// manifest is one document of a file of the Kubernetes manifests.
type manifest struct {
	file string
	doc  map[string]any
}

func (m manifest) kind() string { return str(m.doc["kind"]) }

// name is the object's name, or the prefix of its generated name.
func (m manifest) name() string {
	if n := str(dig(m.doc, "metadata", "name")); n != "" {
		return n
	}
	return str(dig(m.doc, "metadata", "generateName"))
}

func (m manifest) String() string { return fmt.Sprintf("%s: %s %s", m.file, m.kind(), m.name()) }

// manifests reads every document of every *.yaml file of dir.
func manifests(t *testing.T, dir string) []manifest {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []manifest
	for _, f := range files {
		for _, d := range docs(t, f) {
			out = append(out, manifest{file: f, doc: d})
		}
	}
	return out
}

// find returns the object of a kind with a name.
func find(ms []manifest, kind, name string) (manifest, bool) {
	for _, m := range ms {
		if m.kind() == kind && m.name() == name {
			return m, true
		}
	}
	return manifest{}, false
}

// podSpec is the pod template's spec of a Deployment or Job.
func podSpec(m manifest) map[string]any {
	s, _ := dig(m.doc, "spec", "template", "spec").(map[string]any)
	return s
}

// containers returns the containers of a pod template (init containers
// with init).
func containers(m manifest, init bool) []map[string]any {
	field := "containers"
	if init {
		field = "initContainers"
	}
	var out []map[string]any
	for _, c := range list(podSpec(m)[field]) {
		if cm, ok := c.(map[string]any); ok {
			out = append(out, cm)
		}
	}
	return out
}

// envVar is one variable of a container: a written value, or where the
// kubelet takes it from (valueFrom).
type envVar struct {
	value string
	from  map[string]any
}

// podEnv returns a container's environment as the kubelet builds it: the
// keys of the ConfigMaps it imports, then its own entries.
func podEnv(t *testing.T, m manifest, c map[string]any, configMaps map[string]map[string]string) map[string]envVar {
	t.Helper()
	out := map[string]envVar{}
	for _, ef := range list(c["envFrom"]) {
		if name := str(dig(ef, "configMapRef", "name")); name != "" {
			cm, ok := configMaps[name]
			if !ok {
				t.Errorf("%s: container %s imports the ConfigMap %s, which the manifests do not define", m, c["name"], name)
			}
			for k, v := range cm {
				out[k] = envVar{value: v}
			}
		}
		if dig(ef, "secretRef") != nil {
			t.Errorf("%s: container %s imports a whole Secret; name each variable it needs with secretKeyRef", m, c["name"])
		}
	}
	for _, e := range list(c["env"]) {
		name := str(dig(e, "name"))
		if from, ok := dig(e, "valueFrom").(map[string]any); ok {
			out[name] = envVar{from: from}
		} else {
			out[name] = envVar{value: str(dig(e, "value"))}
		}
	}
	return out
}

// values returns the written values of an environment (a variable taken
// from a Secret or the downward API counts as set, to fake).
func values(env map[string]envVar, fake string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		if v.from != nil {
			out[k] = fake
		} else {
			out[k] = v.value
		}
	}
	return out
}

// configMapData returns the data of every ConfigMap by name.
func configMapData(ms []manifest) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, m := range ms {
		if m.kind() != "ConfigMap" {
			continue
		}
		data := map[string]string{}
		for k, v := range dig(m.doc, "data").(map[string]any) {
			data[k] = fmt.Sprint(v)
		}
		out[m.name()] = data
	}
	return out
}

// secretKeys returns the keys of every (example) Secret by name. Keys a
// comment of the Secret's file shows (optional ones, left out of the
// example so that copying it changes nothing) map to false.
func secretKeys(t *testing.T, ms []manifest) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	for _, m := range ms {
		if m.kind() != "Secret" {
			continue
		}
		keys := map[string]bool{}
		for _, line := range regexp.MustCompile(`(?m)^\s*#.*$`).FindAllString(read(t, m.file), -1) {
			for _, k := range regexp.MustCompile(`\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b`).FindAllString(line, -1) {
				keys[k] = false
			}
		}
		for _, field := range []string{"data", "stringData"} {
			d, _ := m.doc[field].(map[string]any)
			for k := range d {
				keys[k] = true
			}
		}
		out[m.name()] = keys
	}
	return out
}

// checkSecrets checks that every Secret is an example with placeholders
// only, in a file kustomization.yaml leaves out, and that its variables
// are ones a process reads (known); keys with a dot are mounted files.
func checkSecrets(t *testing.T, ms []manifest, known func(string) bool) {
	t.Helper()
	for _, m := range ms {
		if m.kind() != "Secret" {
			continue
		}
		if !strings.HasSuffix(m.file, ".example.yaml") {
			t.Errorf("%s: a Secret outside a *.example.yaml file; real secrets never live in the repository", m)
		}
		if m.doc["data"] != nil {
			t.Errorf("%s: example Secrets use stringData with placeholders, not data", m)
		}
		for k, v := range dig(m.doc, "stringData").(map[string]any) {
			if !strings.Contains(fmt.Sprint(v), "replace-me") {
				t.Errorf("%s: %s is %q, not a placeholder (replace-me)", m, k, v)
			}
			if !strings.Contains(k, ".") && !known(k) {
				t.Errorf("%s: %s is read by no process", m, k)
			}
		}
	}
}

// checkEnvSources checks a container's environment: a sensitive variable is
// taken from a Secret, never written (in the manifest or a ConfigMap), and
// every Secret key it names is one the example Secrets show.
func checkEnvSources(t *testing.T, m manifest, c map[string]any, env map[string]envVar, secrets map[string]map[string]bool) {
	t.Helper()
	for name, v := range env {
		ref, _ := dig(v.from, "secretKeyRef").(map[string]any)
		if sensitive[name] && ref == nil {
			t.Errorf("%s: container %s sets %s as a value; take it from a Secret (secretKeyRef)", m, c["name"], name)
		}
		if ref != nil {
			sec, key := str(ref["name"]), str(ref["key"])
			shown, commented := secrets[sec][key]
			optional, _ := ref["optional"].(bool)
			switch {
			case !commented:
				t.Errorf("%s: container %s reads %s from key %s of the Secret %s, which the example Secrets do not show", m, c["name"], name, key, sec)
			case !shown && !optional:
				t.Errorf("%s: container %s needs key %s of the Secret %s, which its example shows only in a comment; make it optional or show it", m, c["name"], key, sec)
			}
		}
	}
	for _, v := range list(podSpec(m)["volumes"]) {
		if sec := str(dig(v, "secret", "secretName")); sec != "" && secrets[sec] == nil {
			t.Errorf("%s: volume %s mounts the Secret %s, which the example Secrets do not show", m, dig(v, "name"), sec)
		}
	}
}

// containerPorts returns a container's declared ports by name.
func containerPorts(c map[string]any) map[string]int {
	out := map[string]int{}
	for _, p := range list(c["ports"]) {
		out[str(dig(p, "name"))] = num(dig(p, "containerPort"))
	}
	return out
}

// probePort returns the port a probe checks, resolved against the
// container's declared ports, and false when it names none of them.
func probePort(probe any, ports map[string]int) (int, bool) {
	for _, kind := range []string{"httpGet", "tcpSocket", "grpc"} {
		p := dig(probe, kind, "port")
		if p == nil {
			continue
		}
		if name, ok := p.(string); ok {
			n, ok := ports[name]
			return n, ok
		}
		n := num(p)
		return n, slices.Contains(mapsValues(ports), n)
	}
	return 0, false
}

func mapsValues(m map[string]int) []int {
	var out []int
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// checkServices checks that every Service selects a Deployment's pods and
// routes to ports their containers declare.
func checkServices(t *testing.T, ms []manifest) {
	t.Helper()
	for _, svc := range ms {
		if svc.kind() != "Service" {
			continue
		}
		sel, _ := dig(svc.doc, "spec", "selector").(map[string]any)
		var target *manifest
		for i, d := range ms {
			labels, _ := dig(d.doc, "spec", "template", "metadata", "labels").(map[string]any)
			if d.kind() == "Deployment" && len(sel) > 0 && matches(sel, labels) {
				target = &ms[i]
			}
		}
		if target == nil {
			t.Errorf("%s selects no Deployment's pods", svc)
			continue
		}
		declared := map[string]int{}
		for _, c := range containers(*target, false) {
			for k, v := range containerPorts(c) {
				declared[k] = v
			}
		}
		for _, p := range list(dig(svc.doc, "spec", "ports")) {
			if _, ok := probePort(map[string]any{"tcpSocket": map[string]any{"port": dig(p, "targetPort")}}, declared); !ok {
				t.Errorf("%s: port %v targets %v, which %s does not declare", svc, dig(p, "name"), dig(p, "targetPort"), *target)
			}
		}
	}
	for _, pdb := range ms {
		if pdb.kind() != "PodDisruptionBudget" {
			continue
		}
		sel, _ := dig(pdb.doc, "spec", "selector", "matchLabels").(map[string]any)
		found := false
		for _, d := range ms {
			labels, _ := dig(d.doc, "spec", "template", "metadata", "labels").(map[string]any)
			found = found || (d.kind() == "Deployment" && len(sel) > 0 && matches(sel, labels))
		}
		if !found {
			t.Errorf("%s selects no Deployment's pods", pdb)
		}
	}
}

// matches reports whether labels carry every key and value of sel.
func matches(sel, labels map[string]any) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkKustomization checks dir's kustomization.yaml: every resource it
// lists exists, it lists every other file except the examples (which hold
// placeholders an apply must never write) and on-demand objects with a
// generated name; it returns the namespace it applies to.
func checkKustomization(t *testing.T, dir string, ms []manifest) string {
	t.Helper()
	d := docs(t, filepath.Join(dir, "kustomization.yaml"))
	if len(d) != 1 || d[0]["kind"] != "Kustomization" {
		t.Fatalf("%s/kustomization.yaml is not one Kustomization", dir)
	}
	var listed []string
	for _, r := range list(d[0]["resources"]) {
		listed = append(listed, str(r))
		if _, err := os.Stat(filepath.Join(dir, str(r))); err != nil {
			t.Errorf("%s/kustomization.yaml lists %s: %v", dir, r, err)
		}
	}
	files := map[string][]manifest{}
	for _, m := range ms {
		files[filepath.Base(m.file)] = append(files[filepath.Base(m.file)], m)
	}
	for f, objs := range files {
		example := strings.HasSuffix(f, ".example.yaml")
		onDemand := true
		for _, m := range objs {
			onDemand = onDemand && str(dig(m.doc, "metadata", "name")) == "" && m.kind() != "Kustomization"
		}
		switch {
		case f == "kustomization.yaml":
		case example && slices.Contains(listed, f):
			t.Errorf("%s/kustomization.yaml applies %s, whose placeholders would overwrite real Secrets", dir, f)
		case !example && !onDemand && !slices.Contains(listed, f):
			t.Errorf("%s/kustomization.yaml does not list %s", dir, f)
		}
	}
	ns := str(d[0]["namespace"])
	if ns == "" {
		t.Errorf("%s/kustomization.yaml names no namespace", dir)
	}
	if n, ok := find(ms, "Namespace", ns); !ok || !slices.Contains(listed, filepath.Base(n.file)) {
		t.Errorf("%s/kustomization.yaml does not create its namespace %s", dir, ns)
	}
	return ns
}
