package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/siteops/siteops/config"
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

// podTemplate is the pod template of a Deployment, a Job or a CronJob (its
// Job's).
func podTemplate(m manifest) map[string]any {
	path := []string{"spec", "template"}
	if m.kind() == "CronJob" {
		path = []string{"spec", "jobTemplate", "spec", "template"}
	}
	t, _ := dig(m.doc, path...).(map[string]any)
	return t
}

// podSpec is the pod template's spec of a Deployment, Job or CronJob.
func podSpec(m manifest) map[string]any {
	s, _ := dig(podTemplate(m), "spec").(map[string]any)
	return s
}

// podLabels are the labels of the pods a Deployment, Job or CronJob makes.
func podLabels(m manifest) map[string]any {
	l, _ := dig(podTemplate(m), "metadata", "labels").(map[string]any)
	return l
}

// isWorkload reports whether m makes pods.
func isWorkload(m manifest) bool {
	return slices.Contains([]string{"Deployment", "Job", "CronJob"}, m.kind())
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

// checkEnvSources checks that a container receives its secrets as files,
// never in its environment: no variable is taken from a Secret (secretKeyRef)
// or set to a sensitive value; every NAME_FILE of a secret names a file of
// a Secret volume the container mounts read-only, whose key the example
// Secrets show; those volumes hold only the keys the container reads, are
// not readable by others (mode 0440 at most, the pod's fsGroup owning
// them), and name Secrets the examples show. files lists the variables
// read as NAME_FILE.
func checkEnvSources(t *testing.T, m manifest, c map[string]any, env map[string]envVar, secrets map[string]map[string]bool, files map[string]bool) {
	t.Helper()
	mounts := secretMounts(m, c)
	used := map[string]bool{} // volume/key read through a _FILE variable
	for name, v := range env {
		if ref := dig(v.from, "secretKeyRef"); ref != nil {
			t.Errorf("%s: container %s takes %s from a Secret into its environment; mount the Secret and set %s%s", m, c["name"], name, name, config.FileSuffix)
		}
		if sensitive[name] && v.from == nil {
			t.Errorf("%s: container %s sets %s as a value; mount it from a Secret and set %s%s", m, c["name"], name, name, config.FileSuffix)
		}
		base, isFile := strings.CutSuffix(name, config.FileSuffix)
		if !isFile || !files[base] {
			continue
		}
		vol, key, ok := mounts.file(v.value)
		switch {
		case !ok:
			t.Errorf("%s: container %s reads %s from %s, which is no file of a Secret volume it mounts", m, c["name"], base, v.value)
		case !secrets[vol.secret][key]:
			t.Errorf("%s: container %s reads %s from key %s of the Secret %s, which the example Secrets do not show (as a key, not only in a comment)", m, c["name"], base, key, vol.secret)
		default:
			used[vol.name+"/"+key] = true
		}
	}
	for _, vol := range mounts {
		if secrets[vol.secret] == nil {
			t.Errorf("%s: volume %s mounts the Secret %s, which the example Secrets do not show", m, vol.name, vol.secret)
		}
		if !vol.readOnly {
			t.Errorf("%s: container %s mounts the Secret volume %s writable; mount it readOnly", m, c["name"], vol.name)
		}
		if vol.mode&0o007 != 0 || vol.mode&0o222 != 0 {
			t.Errorf("%s: volume %s has defaultMode %#o; give it 0440 (owner and the pod's group read, no one else)", m, vol.name, vol.mode)
		}
		if dig(podSpec(m), "securityContext", "fsGroup") == nil {
			t.Errorf("%s: mounts Secret files of mode %#o but sets no fsGroup, so its user cannot read them", m, vol.mode)
		}
		if vol.items == nil {
			continue // a whole Secret of files (certificates) read by path, not by _FILE
		}
		for _, key := range vol.items {
			if !used[vol.name+"/"+key] {
				t.Errorf("%s: volume %s holds key %s of the Secret %s, which container %s reads through no _FILE variable; mount only the keys a process reads", m, vol.name, key, vol.secret, c["name"])
			}
		}
	}
}

// secretMount is a Secret volume as a container mounts it.
type secretMount struct {
	name, secret, path string
	readOnly           bool
	mode               int      // defaultMode (0644 when unset, as Kubernetes has it)
	items              []string // the keys it holds, nil for all of them
	itemPath           map[string]string
}

type secretMountList []secretMount

// secretMounts returns the Secret volumes container c of m mounts.
func secretMounts(m manifest, c map[string]any) secretMountList {
	vols := map[string]map[string]any{}
	for _, v := range list(podSpec(m)["volumes"]) {
		if sec, ok := dig(v, "secret").(map[string]any); ok {
			vols[str(dig(v, "name"))] = sec
		}
	}
	var out secretMountList
	for _, vm := range list(c["volumeMounts"]) {
		sec, ok := vols[str(dig(vm, "name"))]
		if !ok {
			continue
		}
		mode := 0o644
		if dig(sec, "defaultMode") != nil {
			mode = num(dig(sec, "defaultMode"))
		}
		ro, _ := dig(vm, "readOnly").(bool)
		sm := secretMount{name: str(dig(vm, "name")), secret: str(sec["secretName"]), path: str(dig(vm, "mountPath")), readOnly: ro, mode: mode}
		if items := list(sec["items"]); items != nil {
			sm.items, sm.itemPath = []string{}, map[string]string{}
			for _, it := range items {
				sm.items = append(sm.items, str(dig(it, "key")))
				sm.itemPath[str(dig(it, "path"))] = str(dig(it, "key"))
			}
		}
		out = append(out, sm)
	}
	return out
}

// file returns the volume and Secret key of the file at path, and false
// when path is in none of the mounts.
func (l secretMountList) file(path string) (secretMount, string, bool) {
	for _, sm := range l {
		rel, ok := strings.CutPrefix(path, sm.path+"/")
		if !ok || rel == "" || strings.Contains(rel, "/") {
			continue
		}
		if sm.itemPath == nil {
			return sm, rel, true
		}
		if key, ok := sm.itemPath[rel]; ok {
			return sm, key, true
		}
	}
	return secretMount{}, "", false
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
// lists exists, and it lists every other file except the examples (which
// hold placeholders an apply must never write); it returns the namespace it
// applies to.
func checkKustomization(t *testing.T, dir string, ms []manifest) string {
	t.Helper()
	d := kustomization(t, dir)
	var listed []string
	for _, r := range list(d["resources"]) {
		listed = append(listed, str(r))
		if _, err := os.Stat(filepath.Join(dir, str(r))); err != nil {
			t.Errorf("%s/kustomization.yaml lists %s: %v", dir, r, err)
		}
	}
	files := map[string]bool{}
	for _, m := range ms {
		files[filepath.Base(m.file)] = true
	}
	for f := range files {
		example := strings.HasSuffix(f, ".example.yaml")
		switch {
		case f == "kustomization.yaml":
		case example && slices.Contains(listed, f):
			t.Errorf("%s/kustomization.yaml applies %s, whose placeholders would overwrite real Secrets", dir, f)
		case !example && !slices.Contains(listed, f):
			t.Errorf("%s/kustomization.yaml does not list %s", dir, f)
		}
	}
	ns := str(d["namespace"])
	if ns == "" {
		t.Errorf("%s/kustomization.yaml names no namespace", dir)
	}
	if n, ok := find(ms, "Namespace", ns); !ok || !slices.Contains(listed, filepath.Base(n.file)) {
		t.Errorf("%s/kustomization.yaml does not create its namespace %s", dir, ns)
	}
	return ns
}

// kustomization reads dir/kustomization.yaml.
func kustomization(t *testing.T, dir string) map[string]any {
	t.Helper()
	d := docs(t, filepath.Join(dir, "kustomization.yaml"))
	if len(d) != 1 || d[0]["kind"] != "Kustomization" {
		t.Fatalf("%s/kustomization.yaml is not one Kustomization", dir)
	}
	return d[0]
}
