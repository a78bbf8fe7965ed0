package deploy_test

import (
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/wiring"
)

// The Temporal image and its scripts, as the compose file and the manifests
// run them.
const (
	temporalImageRepo = "siteops-temporal"
	serviceScript     = "temporal-service.sh"
	schemaScript      = "temporal-schema.sh"
	setupScript       = "temporal-setup.sh"
	rolesScript       = "postgres-roles.sh"
	secretsLib        = "secret-files.sh"
	composeSecrets    = "compose-secrets.sh"
	// temporalRoot is where the image keeps deploy/temporal (config/ and
	// dynamicconfig/); temporal-service.sh passes it as --root.
	temporalRoot = "/etc/temporal"
)

// temporalUIEnv are the variables of the temporalio/ui image that
// compose.yaml sets, as its configuration template reads them
// (temporalio/ui server/config/docker.yaml: temporalGrpcAddress from
// TEMPORAL_ADDRESS, disableWriteActions from TEMPORAL_DISABLE_WRITE_ACTIONS).
var temporalUIEnv = []string{"TEMPORAL_ADDRESS", "TEMPORAL_DISABLE_WRITE_ACTIONS"}

// temporalServices are the four services of the cluster.
var temporalServices = []string{"frontend", "history", "matching", "worker"}

// healthServices are the gRPC health services the Temporal services report
// SERVING on once they serve (go.temporal.io/server service/*/handler.go);
// the worker service serves no gRPC API.
var healthServices = map[string]string{
	"frontend": "temporal.api.workflowservice.v1.WorkflowService",
	"history":  "temporal.api.workflowservice.v1.HistoryService",
	"matching": "temporal.api.workflowservice.v1.MatchingService",
}

// sensitive lists the variables whose values are secrets (or, for
// SITEOPS_DATABASE_URL, hold one): the deployment files never set them,
// neither as written values nor from a Secret into the environment; they
// give NAME_FILE, the path of a mounted secret, instead (config.LoadSecretFiles,
// secret-files.sh, the postgres image's own POSTGRES_PASSWORD_FILE).
var sensitive = func() map[string]bool {
	m := map[string]bool{
		"TEMPORAL_TLS_CLIENT_KEY_DATA": true,
		"TEMPORAL_SERVER_DB_PASSWORD":  true,
		"POSTGRES_PASSWORD":            true,
		"PGPASSWORD":                   true,
	}
	for _, name := range config.SecretVariables {
		m[name] = true
	}
	return m
}()

// secretFileVars returns the variables some process of the deployment
// reads as NAME_FILE: siteops' (config.SecretVariables) and those the
// scripts load with secret-files.sh.
func secretFileVars(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, name := range config.SecretVariables {
		out[name] = true
	}
	for name := range scriptSecretFiles(t) {
		out[name] = true
	}
	return out
}

// scriptSecretFiles returns, for every variable a script of deploy/ reads
// as NAME_FILE (load_secret_files NAME...), the scripts that do.
func scriptSecretFiles(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, script := range []string{serviceScript, schemaScript, setupScript, rolesScript} {
		for _, m := range regexp.MustCompile(`(?m)^\s*load_secret_files ((?:[A-Z][A-Z0-9_]* ?)+)$`).FindAllStringSubmatch(read(t, script), -1) {
			for _, name := range strings.Fields(m[1]) {
				out[name] = append(out[name], script)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no script of deploy/ calls load_secret_files")
	}
	return out
}

// rolesEnv returns the variables postgres-roles.sh reads: its own, psql's
// connection variables, and NAME_FILE for each it loads from a file.
func rolesEnv(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{"PGHOST": true, "PGPORT": true, "PGUSER": true, "PGDATABASE": true, "PGSSLMODE": true, "PGPASSWORD": true}
	for name := range scriptVars(t, rolesScript, "") {
		out[name] = true
	}
	for name, scripts := range scriptSecretFiles(t) {
		if slices.Contains(scripts, rolesScript) {
			out[name] = true
			out[name+config.FileSuffix] = true
		}
	}
	return out
}

// imageName is an image reference without its tag and digest:
// registry.example.com:5000/siteops:1.2@sha256:... is registry.example.com:5000/siteops.
func imageName(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}

// serverEnv returns the TEMPORAL_SERVER_* variables the kept server
// configuration (temporal/config/cluster.yaml, a template the server
// renders) reads, each with its default there ("" when it has none).
func serverEnv(t *testing.T) map[string]string {
	t.Helper()
	s := read(t, filepath.Join("temporal", "config", "cluster.yaml"))
	out := map[string]string{}
	re := regexp.MustCompile(`env "(TEMPORAL_SERVER_[A-Z0-9_]+)"(?:\s*\|\s*default\s+"([^"]*)")?`)
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		if _, seen := out[m[1]]; !seen || out[m[1]] == "" {
			out[m[1]] = m[2]
		}
	}
	if len(out) < 20 {
		t.Fatalf("found only %d TEMPORAL_SERVER_* variables in cluster.yaml: %v", len(out), out)
	}
	// siteops' server build reads its role policy itself.
	policy := regexp.MustCompile(`(?m)^\s*\w+Env\s*=\s*"(SITEOPS_TEMPORAL_[A-Z0-9_]+)"`).FindAllStringSubmatch(read(t, filepath.Join("temporal-server", "policy.go")), -1)
	if len(policy) != 5 {
		t.Fatalf("found %d SITEOPS_TEMPORAL_* settings in temporal-server/policy.go, want the role policy's 5", len(policy))
	}
	for _, m := range policy {
		out[m[1]] = ""
	}
	return out
}

// scriptVars returns the variables a script reads as ${NAME:-default} or
// ${NAME}, whose names start with prefix, with their defaults.
func scriptVars(t *testing.T, path, prefix string) map[string]string {
	t.Helper()
	out := map[string]string{}
	re := regexp.MustCompile(`\$\{(` + prefix + `[A-Z0-9_]*)(?::-([^}]*))?\}`)
	for _, m := range re.FindAllStringSubmatch(read(t, path), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// setupKnobs are the SITEOPS_* variables temporal-setup.sh reads besides
// the temporal CLI's own.
func setupKnobs(t *testing.T) map[string]string {
	t.Helper()
	k := scriptVars(t, setupScript, "SITEOPS_")
	if len(k) == 0 {
		t.Fatal("temporal-setup.sh reads no SITEOPS_* knob")
	}
	return k
}

// temporalClientEnv is the set of variables the Temporal SDK's loader and
// the temporal CLI read for a connection.
func temporalClientEnv() map[string]bool {
	out := map[string]bool{}
	for _, name := range wiring.TemporalEnvironment {
		out[name] = true
	}
	return out
}

// setting is a variable's value under env, else the config's default.
func setting(server, env map[string]string, name string) string {
	if v, ok := env[name]; ok && v != "" {
		return v
	}
	return server[name]
}

// temporalPorts returns the ports each Temporal service listens on under
// env (the config's defaults where env leaves them), by port name: grpc
// (not for the worker service, which serves no gRPC API), membership, http
// (frontend) and metrics (when TEMPORAL_SERVER_METRICS_ADDRESS is set).
func temporalPorts(t *testing.T, server, env map[string]string) map[string]map[string]int {
	t.Helper()
	atoi := func(name string) int {
		v := setting(server, env, name)
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("%s=%q is not a port", name, v)
		}
		return n
	}
	out := map[string]map[string]int{}
	for _, s := range temporalServices {
		up := "TEMPORAL_SERVER_" + strings.ToUpper(s)
		out[s] = map[string]int{"membership": atoi(up + "_MEMBERSHIP_PORT")}
		if s != "worker" {
			out[s]["grpc"] = atoi(up + "_GRPC_PORT")
		}
		if addr := setting(server, env, "TEMPORAL_SERVER_METRICS_ADDRESS"); addr != "" {
			_, p, err := net.SplitHostPort(addr)
			if err != nil {
				t.Fatalf("TEMPORAL_SERVER_METRICS_ADDRESS=%q: %v", addr, err)
			}
			out[s]["metrics"], _ = strconv.Atoi(p)
		}
	}
	out["frontend"]["http"] = atoi("TEMPORAL_SERVER_FRONTEND_HTTP_PORT")
	return out
}

// deployFiles are every file of the deploy directory that names variables
// for a process to read.
func deployFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"compose.yaml", "compose.env.example", "compose.temporal-tls.yaml", "Dockerfile", "temporal.Dockerfile", workerTemplate, rolloutScript}
	for _, dir := range []string{"kubernetes", filepath.Join("kubernetes", "temporal")} {
		more, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, more...)
	}
	return files
}

// TestEveryNameExists reads every deployment file, comments included, for
// names of siteops, Agent-Site and Temporal variables, and checks that the
// code, the server configuration or a script reads each: a misspelt name in
// a manifest or in the instructions of a comment is silently ignored by the
// process it was meant for.
func TestEveryNameExists(t *testing.T) {
	known := map[string]bool{}
	for name := range knownEnv(t) {
		known[name] = true
	}
	for name := range serverEnv(t) {
		known[name] = true
	}
	for name := range setupKnobs(t) {
		known[name] = true
	}
	// The temporal image's build arguments, which the Makefile pins.
	for _, m := range regexp.MustCompile(`(?m)^ARG (\w+)`).FindAllStringSubmatch(read(t, "temporal.Dockerfile"), -1) {
		known[m[1]] = true
	}
	// What the scripts read: their secrets as files, the roles script's settings.
	for name := range scriptSecretFiles(t) {
		known[name+config.FileSuffix] = true
	}
	for name := range rolesEnv(t) {
		known[name] = true
	}
	// Secret keys a workload mounts as the file of a known setting (the
	// ingress's TEMPORAL_INGRESS_API_KEY is its TEMPORAL_API_KEY).
	for _, m := range kubernetesObjects(t) {
		if !isWorkload(m) {
			continue
		}
		for _, c := range containers(m, false) {
			for _, sm := range secretMounts(m, c) {
				for path, key := range sm.itemPath {
					if known[path] {
						known[key] = true
					}
				}
			}
		}
	}
	// The Temporal Web UI's settings that compose.yaml gives it (its
	// server/config/docker.yaml reads them).
	for _, name := range temporalUIEnv {
		known[name] = true
	}
	re := regexp.MustCompile(`\b(?:SITEOPS|AGENTSITE|TEMPORAL)_[A-Z0-9_]*[A-Z0-9]\b`)
	unknown := map[string][]string{}
	for _, f := range deployFiles(t) {
		for _, name := range re.FindAllString(read(t, f), -1) {
			if !known[name] && !strings.HasPrefix(name, "TEMPORAL_GRPC_META_") {
				unknown[name] = append(unknown[name], f)
			}
		}
	}
	names := make([]string, 0, len(unknown))
	for name := range unknown {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Errorf("%s names %s, which neither siteops, the Temporal SDK and CLI, the server configuration nor a script reads", strings.Join(unique(unknown[name]), ", "), name)
	}
}

func unique(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
