package deploy_test

import (
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/internal/cluster"
	"github.com/siteops/siteops/worker"
)

// temporalImage is the Temporal image the deployment files run: the
// server version internal/cluster and the Makefile pin.
func temporalImage() string { return temporalImageRepo + ":" + cluster.ServerVersion }

// ingressDrain is how long the ingress's HTTP server drains on SIGTERM
// (ingress.Server.Serve).
const ingressDrain = 10 * time.Second

var temporalDir = filepath.Join("kubernetes", "temporal")

func TestKubernetesManifests(t *testing.T) {
	env := knownEnv(t)
	ns := checkKustomization(t, "kubernetes", manifests(t, "kubernetes"))
	// The files and the per-build workers rollout.sh renders from the
	// template, as they run.
	ms := kubernetesObjects(t)
	if ns != "siteops" {
		t.Errorf("siteops runs in the namespace %q; the Temporal NetworkPolicy lets siteops in", ns)
	}
	cms, secrets := configMapData(ms), secretKeys(t, ms)
	roles := rolesEnv(t)
	// A key a workload mounts as the file of a setting is that setting's
	// (TEMPORAL_INGRESS_API_KEY is the ingress's TEMPORAL_API_KEY).
	mountedAs := map[string]bool{}
	for _, m := range ms {
		if !isWorkload(m) {
			continue
		}
		for _, c := range containers(m, false) {
			for _, sm := range secretMounts(m, c) {
				for path, key := range sm.itemPath {
					if envKnown(env, path) {
						mountedAs[key] = true
					}
				}
			}
		}
	}
	checkSecrets(t, ms, func(name string) bool { return envKnown(env, name) || roles[name] || mountedAs[name] })
	kinds := map[string]int{}
	setupJobs, rolesJobs := 0, 0
	for _, m := range ms {
		kinds[m.kind()]++
		switch {
		case m.kind() == "ConfigMap":
			for k := range cms[m.name()] {
				if !envKnown(env, k) {
					t.Errorf("%s names %s, which no siteops config reads", m, k)
				}
			}
		case isWorkload(m):
			for _, c := range append(containers(m, true), containers(m, false)...) {
				if imageName(str(c["image"])) == temporalImageRepo {
					if slices.Equal(strs(list(c["command"])), []string{rolesScript}) {
						checkRolesJob(t, m, c, cms, secrets, roles)
						rolesJobs++
						continue
					}
					checkSetupJob(t, m, c, env, cms, secrets)
					setupJobs++
					continue
				}
				checkSiteopsContainer(t, m, c, env, cms, secrets)
			}
		}
	}
	for _, k := range []string{"Deployment", "Service", "PodDisruptionBudget", "ConfigMap", "Secret", "Job", "CronJob", "Namespace", "NetworkPolicy"} {
		if kinds[k] == 0 {
			t.Errorf("no %s among the manifests", k)
		}
	}
	if setupJobs != 1 {
		t.Errorf("%d jobs run %s; want one", setupJobs, setupScript)
	}
	if rolesJobs != 1 {
		t.Errorf("%d jobs run %s in the namespace siteops; want one (siteops' role)", rolesJobs, rolesScript)
	}
	for _, name := range []string{"siteops-doctor", "siteops-postgres-roles"} {
		if cj, ok := find(ms, "CronJob", name); !ok || dig(cj.doc, "spec", "suspend") != true {
			t.Errorf("no suspended CronJob %s: its Jobs are created by hand (kubectl create job --from=cronjob/%s)", name, name)
		}
	}
	checkServices(t, ms)
	checkIngressService(t, ms, env)

	// Two replicas of each (of every build's workers), with the time to
	// stop that each needs, and one budget each.
	var deployments []manifest
	if d, ok := find(ms, "Deployment", "siteops-ingress"); ok {
		deployments = append(deployments, d)
	} else {
		t.Errorf("no Deployment siteops-ingress")
	}
	for _, b := range sampleBuilds {
		if d, ok := find(ms, "Deployment", buildName(b)); ok {
			deployments = append(deployments, d)
		} else {
			t.Errorf("no Deployment %s for build %s", buildName(b), b)
		}
	}
	for _, d := range deployments {
		role := str(podLabels(d)["app.kubernetes.io/component"])
		var budgets []string
		for _, pdb := range ms {
			if pdb.kind() != "PodDisruptionBudget" {
				continue
			}
			if matches(mapOf(dig(pdb.doc, "spec", "selector", "matchLabels")), podLabels(d)) {
				budgets = append(budgets, pdb.name())
			}
		}
		if len(budgets) != 1 {
			t.Errorf("%s: its pods have the PodDisruptionBudgets %v; want one (the eviction API refuses a pod with two)", d, budgets)
		}
		if r := num(dig(d.doc, "spec", "replicas")); r != 2 {
			t.Errorf("%s has %d replicas; want 2", d, r)
		}
		grace := time.Duration(num(podSpec(d)["terminationGracePeriodSeconds"])) * time.Second
		need := worker.StopTimeout
		if role == "ingress" {
			need = ingressDrain
			for _, c := range containers(d, false) {
				need += time.Duration(num(dig(c, "lifecycle", "preStop", "sleep", "seconds"))) * time.Second
			}
		}
		if grace <= need {
			t.Errorf("%s: terminationGracePeriodSeconds is %s; the %s needs more than %s after SIGTERM", d, grace, role, need)
		}
	}

	// TEMPORAL_ADDRESS names the frontend Service of the self-hosted cluster.
	checkTemporalAddress(t, cms["siteops"]["TEMPORAL_ADDRESS"])
}

// checkSiteopsContainer checks a container of the siteops image: its
// subcommand exists, every variable it gets is one siteops reads, the
// sensitive ones come from Secrets, and a long-running role declares the
// port the code listens on and probes paths its server answers.
func checkSiteopsContainer(t *testing.T, m manifest, c map[string]any, env map[string]string, cms map[string]map[string]string, secrets map[string]map[string]bool) {
	t.Helper()
	if img := str(c["image"]); imageName(img) != "siteops" {
		t.Errorf("%s: image %q is not the siteops image the Dockerfile builds", m, img)
	}
	args := list(c["args"])
	if len(args) == 0 {
		t.Errorf("%s: container %v has no subcommand", m, c["name"])
		return
	}
	role := str(args[0])
	if !subcommandExists(t, role) {
		t.Errorf("%s: `siteops %s` does not exist", m, role)
	}
	vars := podEnv(t, m, c, cms)
	for name := range vars {
		if !envKnown(env, name) {
			t.Errorf("%s: %s gets %s, which no siteops config reads", m, role, name)
		}
	}
	checkEnvSources(t, m, c, vars, secrets, secretFileVars(t))
	if dig(c, "resources", "requests") == nil {
		t.Errorf("%s: %s has no resource requests", m, role)
	}
	if m.kind() != "Deployment" {
		return
	}
	ports := containerPorts(c)
	want := map[string]int{"ingress": defaultPort(t, env["SITEOPS_INGRESS_ADDR"]), "worker": defaultPort(t, env["SITEOPS_METRICS_ADDR"])}[role]
	addr := map[string]string{"ingress": "SITEOPS_INGRESS_ADDR", "worker": "SITEOPS_METRICS_ADDR"}[role]
	if v, ok := vars[addr]; ok && v.value != "" {
		want = defaultPort(t, v.value)
	}
	if !slices.Contains(mapsValues(ports), want) {
		t.Errorf("%s: %s declares ports %v; it listens on %d", m, role, ports, want)
	}
	for _, probe := range []string{"livenessProbe", "readinessProbe"} {
		path := str(dig(c, probe, "httpGet", "path"))
		if path == "" {
			t.Errorf("%s: %s has no HTTP %s", m, role, probe)
			continue
		}
		if _, ok := probePort(c[probe], ports); !ok {
			t.Errorf("%s: %s %s uses port %v, which the container does not declare", m, role, probe, dig(c, probe, "httpGet", "port"))
		}
		if !served(t, role, path) {
			t.Errorf("%s: %s %s checks %s, which the %s does not serve", m, role, probe, path, role)
		}
	}
	if role == "ingress" && str(dig(c, "readinessProbe", "httpGet", "path")) != "/readyz" {
		t.Errorf("%s: the ingress's readiness must follow the store (/readyz)", m)
	}
	if role == "ingress" {
		checkIngressPorts(t, m, c, env, vars)
	}
}

// checkIngressPorts checks the ingress's two ports and its memory: the
// probes go to the admin address (where /readyz is served), which listens
// on the pod's interfaces (the kubelet is not in the pod) and is declared;
// /readyz and /metrics are not served on the webhook port; GOMEMLIMIT is
// set below the container's memory limit.
func checkIngressPorts(t *testing.T, m manifest, c map[string]any, env map[string]string, vars map[string]envVar) {
	t.Helper()
	adminAddr := env["SITEOPS_INGRESS_ADMIN_ADDR"]
	if v, ok := vars["SITEOPS_INGRESS_ADMIN_ADDR"]; ok {
		adminAddr = v.value
	}
	host, _, err := net.SplitHostPort(adminAddr)
	if err != nil || adminAddr == "" {
		t.Errorf("%s: SITEOPS_INGRESS_ADMIN_ADDR=%q is not an address", m, adminAddr)
		return
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		t.Errorf("%s: SITEOPS_INGRESS_ADMIN_ADDR=%q listens on loopback only; the kubelet's probes cannot reach it", m, adminAddr)
	}
	ports := containerPorts(c)
	admin := defaultPort(t, adminAddr)
	if !slices.Contains(mapsValues(ports), admin) {
		t.Errorf("%s: the ingress declares ports %v, not its admin port %d", m, ports, admin)
	}
	for _, probe := range []string{"livenessProbe", "readinessProbe"} {
		if p, _ := probePort(c[probe], ports); p != admin {
			t.Errorf("%s: the ingress's %s checks port %d; the probes go to the admin port %d", m, probe, p, admin)
		}
	}
	for _, path := range []string{"/readyz", "/metrics"} {
		if served(t, "ingress-webhooks", path) {
			t.Errorf("the ingress serves %s on its webhook port; only the admin address may", path)
		}
	}
	limit := str(dig(c, "resources", "limits", "memory"))
	goLimit := vars["GOMEMLIMIT"].value
	if limit == "" || goLimit == "" {
		t.Errorf("%s: the ingress needs a memory limit (%q) and GOMEMLIMIT below it (%q)", m, limit, goLimit)
	} else if lb, gb := memBytes(t, limit), memBytes(t, goLimit); gb >= lb || gb < lb/2 {
		t.Errorf("%s: GOMEMLIMIT=%s is not between half of and below the container's limit %s", m, goLimit, limit)
	}
}

// checkIngressService checks that the ingress's Service exposes only the
// webhook port: the admin port (/metrics, /readyz) stays inside the
// cluster's pod network.
func checkIngressService(t *testing.T, ms []manifest, env map[string]string) {
	t.Helper()
	svc, ok := find(ms, "Service", "siteops-ingress")
	d, ok2 := find(ms, "Deployment", "siteops-ingress")
	if !ok || !ok2 {
		t.Errorf("no Service and Deployment siteops-ingress")
		return
	}
	cs := containers(d, false)
	if len(cs) == 0 {
		return
	}
	ports := containerPorts(cs[0])
	webhook := defaultPort(t, env["SITEOPS_INGRESS_ADDR"])
	for _, p := range list(dig(svc.doc, "spec", "ports")) {
		n, _ := probePort(map[string]any{"tcpSocket": map[string]any{"port": dig(p, "targetPort")}}, ports)
		if n != webhook {
			t.Errorf("%s exposes port %d of the ingress; only the webhook port %d may be exposed", svc, n, webhook)
		}
	}
}

// memBytes reads a quantity such as 256Mi (Kubernetes) or 200MiB (Go).
func memBytes(t *testing.T, q string) int64 {
	t.Helper()
	q = strings.TrimSuffix(q, "B")
	mult := int64(1)
	for suffix, m := range map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30} {
		if rest, ok := strings.CutSuffix(q, suffix); ok {
			q, mult = rest, m
		}
	}
	n, err := strconv.ParseInt(q, 10, 64)
	if err != nil {
		t.Fatalf("memory quantity %q: %v", q, err)
	}
	return n * mult
}

// checkSetupJob checks the Job that registers the namespace and the search
// attributes: it runs temporal-setup.sh from the Temporal image with the
// connection settings siteops itself uses.
func checkSetupJob(t *testing.T, m manifest, c map[string]any, env map[string]string, cms map[string]map[string]string, secrets map[string]map[string]bool) {
	t.Helper()
	if m.kind() != "Job" {
		t.Errorf("%s runs the Temporal image; only the setup Job does here", m)
	}
	if img := str(c["image"]); img != temporalImage() {
		t.Errorf("%s: image %q; want %s", m, img, temporalImage())
	}
	if cmd := list(c["command"]); len(cmd) != 1 || str(cmd[0]) != setupScript {
		t.Errorf("%s: command %v; the namespace setup is %s and nothing else", m, cmd, setupScript)
	}
	knobs := setupKnobs(t)
	vars := podEnv(t, m, c, cms)
	for name := range vars {
		if _, knob := knobs[name]; !knob && !envKnown(env, name) {
			t.Errorf("%s: sets %s, which neither the temporal CLI nor %s reads", m, name, setupScript)
		}
	}
	for _, name := range []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE"} {
		if _, ok := vars[name]; !ok {
			t.Errorf("%s: no %s", m, name)
		}
	}
	checkEnvSources(t, m, c, vars, secrets, secretFileVars(t))
}

// checkRolesJob checks a Job (template) that runs postgres-roles.sh: from
// the Temporal image, with the administrator's password and the role's
// password (or siteops' URL) as files, and nothing the script does not read.
func checkRolesJob(t *testing.T, m manifest, c map[string]any, cms map[string]map[string]string, secrets map[string]map[string]bool, roles map[string]bool) {
	t.Helper()
	if m.kind() != "CronJob" || dig(m.doc, "spec", "suspend") != true {
		t.Errorf("%s runs %s; make it a suspended CronJob, run by hand once", m, rolesScript)
	}
	if img := str(c["image"]); img != temporalImage() {
		t.Errorf("%s: image %q; want %s", m, img, temporalImage())
	}
	vars := podEnv(t, m, c, cms)
	for _, e := range list(c["env"]) { // its own settings; a ConfigMap it imports has more
		if name := str(dig(e, "name")); !roles[name] {
			t.Errorf("%s: sets %s, which %s does not read", m, name, rolesScript)
		}
	}
	for _, name := range []string{"PGHOST", "PGUSER", "PGPASSWORD_FILE"} {
		if _, ok := vars[name]; !ok {
			t.Errorf("%s: no %s for the administrator's connection", m, name)
		}
	}
	_, temporal := vars["TEMPORAL_SERVER_DB_PASSWORD_FILE"]
	_, siteops := vars["SITEOPS_DATABASE_URL_FILE"]
	if !temporal && !siteops {
		t.Errorf("%s: gives %s neither TEMPORAL_SERVER_DB_PASSWORD_FILE nor SITEOPS_DATABASE_URL_FILE: it would do nothing", m, rolesScript)
	}
	if v := vars["PGUSER"].value; v == cms["temporal-server"]["TEMPORAL_SERVER_DB_USER"] {
		t.Errorf("%s: the administrator is %s, Temporal's own role", m, v)
	}
	checkEnvSources(t, m, c, vars, secrets, secretFileVars(t))
}

// checkTemporalAddress checks that addr names the frontend Service of
// kubernetes/temporal, in its namespace, on a port it serves.
func checkTemporalAddress(t *testing.T, addr string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Errorf("TEMPORAL_ADDRESS=%q: %v", addr, err)
		return
	}
	tms := manifests(t, temporalDir)
	labels := strings.Split(host, ".")
	if len(labels) < 2 {
		t.Errorf("TEMPORAL_ADDRESS=%q does not name a Service in another namespace", addr)
		return
	}
	if ns := checkKustomization(t, temporalDir, tms); labels[1] != ns {
		t.Errorf("TEMPORAL_ADDRESS=%q names the namespace %s; the Temporal cluster runs in %s", addr, labels[1], ns)
	}
	svc, ok := find(tms, "Service", labels[0])
	if !ok {
		t.Errorf("TEMPORAL_ADDRESS=%q names the Service %s, which %s does not define", addr, labels[0], temporalDir)
		return
	}
	p, _ := strconv.Atoi(port)
	for _, sp := range list(dig(svc.doc, "spec", "ports")) {
		if num(dig(sp, "port")) == p {
			return
		}
	}
	t.Errorf("TEMPORAL_ADDRESS=%q: %s has no port %d", addr, svc, p)
}

func TestKubernetesTemporal(t *testing.T) {
	server := serverEnv(t)
	ms := manifests(t, temporalDir)
	checkKustomization(t, temporalDir, ms)
	cms, secrets := configMapData(ms), secretKeys(t, ms)
	files := secretFileVars(t)
	readByServer := func(name string) bool {
		_, ok := server[name]
		base, isFile := strings.CutSuffix(name, config.FileSuffix)
		_, serverReads := server[base]
		return ok || (isFile && files[base] && serverReads)
	}
	roles := rolesEnv(t)
	checkSecrets(t, ms, func(name string) bool { return readByServer(name) || roles[name] })
	for name, data := range cms {
		for k := range data {
			if !readByServer(k) {
				t.Errorf("ConfigMap %s names %s, which deploy/temporal/config/cluster.yaml does not read", name, k)
			}
		}
	}
	checkServices(t, ms)

	ports := map[string]map[string]int{}
	for _, s := range temporalServices {
		d, ok := find(ms, "Deployment", "temporal-"+s)
		if !ok {
			t.Errorf("no Deployment temporal-%s: every service runs on its own", s)
			continue
		}
		cs := containers(d, false)
		if len(cs) != 1 {
			t.Errorf("%s has %d containers; want 1", d, len(cs))
			continue
		}
		c := cs[0]
		if img := str(c["image"]); img != temporalImage() {
			t.Errorf("%s: image %q; want %s", d, img, temporalImage())
		}
		if cmd := list(c["command"]); len(cmd) != 2 || str(cmd[0]) != serviceScript || str(cmd[1]) != s {
			t.Errorf("%s: command %v; want [%s %s]", d, cmd, serviceScript, s)
		}
		vars := podEnv(t, d, c, cms)
		for name := range vars {
			if !readByServer(name) {
				t.Errorf("%s: sets %s, which deploy/temporal/config/cluster.yaml does not read", d, name)
			}
		}
		checkEnvSources(t, d, c, vars, secrets, files)
		if f := str(dig(vars["TEMPORAL_SERVER_BROADCAST_ADDRESS"].from, "fieldRef", "fieldPath")); f != "status.podIP" {
			t.Errorf("%s: TEMPORAL_SERVER_BROADCAST_ADDRESS must be the pod's IP (fieldRef status.podIP), not %q", d, f)
		}
		ports[s] = temporalPorts(t, server, values(vars, ""))[s]
		declared := containerPorts(c)
		for name, want := range ports[s] {
			if declared[name] != want {
				t.Errorf("%s: declares port %s as %d; the server listens on %d", d, name, declared[name], want)
			}
		}
		for name := range declared {
			if _, ok := ports[s][name]; !ok {
				t.Errorf("%s: declares port %s, on which the %s service does not listen", d, name, s)
			}
		}
		for _, probe := range []string{"startupProbe", "livenessProbe", "readinessProbe"} {
			if c[probe] == nil {
				t.Errorf("%s has no %s", d, probe)
				continue
			}
			if dig(c, probe, "exec") != nil {
				checkHealthCommand(t, d, probe, strs(list(dig(c, probe, "exec", "command"))), cms["temporal-server"], ports[s]["grpc"])
				continue
			}
			if _, ok := probePort(c[probe], declared); !ok {
				t.Errorf("%s: its %s checks a port the container does not declare", d, probe)
			}
			if g := dig(c, probe, "grpc"); g != nil && str(dig(g, "service")) != healthServices[s] {
				t.Errorf("%s: its %s asks for the health of %q; the %s service reports %q", d, probe, dig(g, "service"), s, healthServices[s])
			}
		}
		if dig(c, "resources", "requests") == nil {
			t.Errorf("%s has no resource requests", d)
		}
	}

	// Frontend, matching and worker wait for a ready history pod.
	h, _ := find(ms, "Service", "temporal-history")
	if !slices.ContainsFunc(list(dig(h.doc, "spec", "ports")), func(p any) bool { return num(dig(p, "port")) == ports["history"]["grpc"] }) {
		t.Errorf("no Service temporal-history on the history's gRPC port %d", ports["history"]["grpc"])
	}
	wait := "temporal-history/" + strconv.Itoa(ports["history"]["grpc"])
	for _, s := range temporalServices {
		d, ok := find(ms, "Deployment", "temporal-"+s)
		if !ok || s == "history" {
			continue
		}
		found := false
		for _, c := range containers(d, true) {
			found = found || strings.Contains(strings.Join(strs(list(c["command"])), " "), wait)
		}
		if !found {
			t.Errorf("%s does not wait for %s before it starts", d, wait)
		}
	}

	// The schema job sets up both schemas with the server's own settings.
	j, _ := find(ms, "Job", "temporal-schema")
	cs := containers(j, false)
	if len(cs) != 1 {
		t.Fatalf("want a Job temporal-schema with one container; found %d containers", len(cs))
	}
	c := cs[0]
	if cmd := list(c["command"]); len(cmd) != 1 || str(cmd[0]) != schemaScript {
		t.Errorf("%s: command %v; want [%s]", j, cmd, schemaScript)
	}
	if img := str(c["image"]); img != temporalImage() {
		t.Errorf("%s: image %q; want %s", j, img, temporalImage())
	}
	vars := podEnv(t, j, c, cms)
	checkEnvSources(t, j, c, vars, secrets, files)
	set := values(vars, "set")
	for name := range scriptVars(t, schemaScript, "TEMPORAL_SERVER_") {
		if !setsOrFile(t, set, name, schemaScript) && name != "TEMPORAL_SERVER_DB_PLUGIN" {
			t.Errorf("%s: %s reads %s, which the job does not set", j, schemaScript, name)
		}
	}

	// Temporal's database role, made on demand by the one roles script.
	rj, ok := find(ms, "CronJob", "temporal-postgres-roles")
	if !ok {
		t.Fatalf("no CronJob temporal-postgres-roles in %s: Temporal's own database role is made there", temporalDir)
	}
	for _, c := range containers(rj, false) {
		checkRolesJob(t, rj, c, cms, secrets, roles)
		if _, ok := podEnv(t, rj, c, cms)["TEMPORAL_SERVER_DB_PASSWORD_FILE"]; !ok {
			t.Errorf("%s does not give %s Temporal's password", rj, rolesScript)
		}
	}
}

func strs(l []any) []string {
	out := make([]string, 0, len(l))
	for _, v := range l {
		out = append(out, str(v))
	}
	return out
}

// TestWebhooksCanBeRegistered checks that the manifests give the worker
// and the CLI's pods SITEOPS_PUBLIC_URL, without which no webhook endpoint
// can be registered or rotated (the runbook's last step): set in the
// ConfigMap every siteops workload reads, an absolute URL the receiver
// policy accepts, under the ingress's receivers' path.
func TestWebhooksCanBeRegistered(t *testing.T) {
	ms := kubernetesObjects(t)
	cm := configMapData(ms)["siteops"]
	public := cm["SITEOPS_PUBLIC_URL"]
	if public == "" {
		t.Fatal("the ConfigMap siteops does not set SITEOPS_PUBLIC_URL: no webhook endpoint could be registered or rotated")
	}
	if _, err := activities.ParseReceiverPolicy(public, false); err != nil {
		t.Errorf("SITEOPS_PUBLIC_URL=%q: %v", public, err)
	}
	for _, raw := range strings.Split(public, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || u.Scheme != "https" || !strings.HasSuffix(u.Path, "/webhooks") {
			t.Errorf("SITEOPS_PUBLIC_URL holds %q; want an https URL ending in the ingress's receivers' path /webhooks (%v)", raw, err)
		}
	}
	readers := 0
	for _, m := range ms {
		if !isWorkload(m) {
			continue
		}
		component := str(podLabels(m)["app.kubernetes.io/component"])
		if component != "worker" && component != "doctor" {
			continue
		}
		for _, c := range containers(m, false) {
			readsIt := false
			for _, from := range list(c["envFrom"]) {
				if str(dig(from, "configMapRef", "name")) == "siteops" {
					readsIt = true
				}
			}
			if !readsIt {
				t.Errorf("%s: container %s does not read the ConfigMap siteops, and so not SITEOPS_PUBLIC_URL", m, c["name"])
			}
			readers++
		}
	}
	if readers < 2 {
		t.Errorf("found %d worker and doctor containers, want the worker's and the doctor's at least", readers)
	}
}
