package deploy_test

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/worker"
)

// composeServices reads the services of compose.yaml (YAML anchors and
// merge keys resolved, ${...} left as written).
func composeServices(t *testing.T) map[string]map[string]any {
	t.Helper()
	d := docs(t, "compose.yaml")
	if len(d) != 1 {
		t.Fatalf("compose.yaml has %d documents", len(d))
	}
	out := map[string]map[string]any{}
	for name, s := range d[0]["services"].(map[string]any) {
		out[name], _ = s.(map[string]any)
	}
	return out
}

// composeEnv is a service's environment as written.
func composeEnv(svc map[string]any) map[string]string {
	out := map[string]string{}
	m, _ := svc["environment"].(map[string]any)
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// interpolation matches compose's ${NAME}, ${NAME:-default}, ${NAME:?message}.
var interpolation = regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)(?:(:?[-?])([^}]*))?\}`)

// interpolate replaces every ${...} with its default, or fake.
func interpolate(v, fake string) string {
	return interpolation.ReplaceAllStringFunc(v, func(s string) string {
		m := interpolation.FindStringSubmatch(s)
		if strings.HasSuffix(m[2], "-") {
			return m[3]
		}
		return fake
	})
}

// dependsOn returns the condition service waits for on dep ("" when it
// does not depend on it).
func dependsOn(svc map[string]any, dep string) string {
	d := dig(svc, "depends_on", dep)
	if d == nil {
		return ""
	}
	if c := str(dig(d, "condition")); c != "" {
		return c
	}
	return "service_started"
}

func TestComposeFile(t *testing.T) {
	env := knownEnv(t)
	server := serverEnv(t)
	services := composeServices(t)
	want := []string{"postgres", "temporal-schema", "temporal-setup", "worker", "ingress"}
	for _, s := range temporalServices {
		want = append(want, "temporal-"+s)
	}
	for _, name := range want {
		if services[name] == nil {
			t.Fatalf("compose.yaml has no %s service", name)
		}
	}

	// siteops: two of each role, each with the time to stop it needs.
	for _, name := range []string{"worker", "ingress"} {
		svc := services[name]
		cmd := list(svc["command"])
		if len(cmd) == 0 || str(cmd[0]) != name || !subcommandExists(t, name) {
			t.Errorf("compose %s: command %v is not `siteops %s`", name, cmd, name)
		}
		if img := str(svc["image"]); !strings.HasPrefix(img, "siteops:") {
			t.Errorf("compose %s: image %q is not the siteops image", name, img)
		}
		if df := str(dig(svc, "build", "dockerfile")); df != "deploy/Dockerfile" {
			t.Errorf("compose %s builds from %q", name, df)
		}
		envs := composeEnv(svc)
		if len(envs) == 0 {
			t.Errorf("compose %s: no environment (the YAML merge key did not resolve?)", name)
		}
		for k := range envs {
			if !envKnown(env, k) {
				t.Errorf("compose %s sets %s, which no siteops config reads", name, k)
			}
		}
		if r := num(dig(svc, "deploy", "replicas")); r != 2 {
			t.Errorf("compose %s: deploy.replicas is %d; want 2", name, r)
		}
		grace, err := time.ParseDuration(str(svc["stop_grace_period"]))
		if err != nil {
			grace = 10 * time.Second // compose's default
		}
		if need := map[string]time.Duration{"worker": worker.StopTimeout, "ingress": ingressDrain}[name]; grace <= need {
			t.Errorf("compose %s: stop_grace_period %s; it needs more than %s after SIGTERM", name, grace, need)
		}
		if dependsOn(svc, "postgres") != "service_healthy" {
			t.Errorf("compose %s does not wait for a healthy postgres", name)
		}
	}
	if dependsOn(services["worker"], "temporal-setup") != "service_completed_successfully" {
		t.Errorf("compose worker does not wait for temporal-setup: it refuses to start without the namespace and the search attributes")
	}
	if dependsOn(services["ingress"], "temporal-frontend") != "" {
		t.Errorf("compose ingress waits for Temporal; it must accept deliveries while Temporal is down")
	}
	ingressPort := defaultPort(t, composeEnv(services["ingress"])["SITEOPS_INGRESS_ADDR"])
	published := false
	for _, p := range list(services["ingress"]["ports"]) {
		published = published || strings.HasSuffix(str(p), ":"+strconv.Itoa(ingressPort))
	}
	if !published {
		t.Errorf("compose ingress publishes %v, not its port %d", services["ingress"]["ports"], ingressPort)
	}
	// Only the webhook port: /metrics and /readyz stay on the compose
	// network, and the runtime knows the memory limit.
	ingressEnv := composeEnv(services["ingress"])
	if admin := ingressEnv["SITEOPS_INGRESS_ADMIN_ADDR"]; admin == "" || strings.HasPrefix(admin, "127.") {
		t.Errorf("compose ingress: SITEOPS_INGRESS_ADMIN_ADDR=%q; set an address the compose network reaches (\":9091\")", admin)
	}
	for _, p := range list(services["ingress"]["ports"]) {
		if !strings.HasSuffix(str(p), ":"+strconv.Itoa(ingressPort)) {
			t.Errorf("compose ingress publishes %v; only the webhook port %d may be published", p, ingressPort)
		}
	}
	if ingressEnv["GOMEMLIMIT"] == "" || dig(services["ingress"], "deploy", "resources", "limits", "memory") == nil {
		t.Errorf("compose ingress: set a memory limit and GOMEMLIMIT below it")
	}

	// The Temporal cluster: the four services, history first.
	ports := map[string]map[string]int{}
	for _, s := range temporalServices {
		name := "temporal-" + s
		svc := services[name]
		if cmd := strs(list(svc["command"])); !slices.Equal(cmd, []string{serviceScript, s}) {
			t.Errorf("compose %s: command %v; want [%s %s]", name, cmd, serviceScript, s)
		}
		checkTemporalImage(t, name, svc)
		envs := composeEnv(svc)
		for k := range envs {
			if _, ok := server[k]; !ok {
				t.Errorf("compose %s sets %s, which deploy/temporal/config/cluster.yaml does not read", name, k)
			}
		}
		for _, dir := range []string{"config", "dynamicconfig"} {
			mount := "./temporal/" + dir + ":" + temporalRoot + "/" + dir
			if !slices.ContainsFunc(strs(list(svc["volumes"])), func(v string) bool { return strings.HasPrefix(v, mount) }) {
				t.Errorf("compose %s does not mount the kept %s (%s)", name, dir, mount)
			}
		}
		ports[s] = temporalPorts(t, server, envs)[s]
		if s != "history" && dependsOn(svc, "temporal-history") != "service_healthy" {
			t.Errorf("compose %s does not wait for a healthy temporal-history (the first service on fresh databases writes the cluster metadata)", name)
		}
	}
	if dependsOn(services["temporal-history"], "temporal-schema") != "service_completed_successfully" {
		t.Errorf("compose temporal-history does not wait for temporal-schema")
	}
	if hc := strings.Join(strs(list(dig(services["temporal-history"], "healthcheck", "test"))), " "); !strings.Contains(hc, "/dev/tcp/127.0.0.1/"+strconv.Itoa(ports["history"]["grpc"])) {
		t.Errorf("compose temporal-history's health check %q does not check its gRPC port %d", hc, ports["history"]["grpc"])
	}
	frontend := net.JoinHostPort("temporal-frontend", strconv.Itoa(ports["frontend"]["grpc"]))
	if hc := strings.Join(strs(list(dig(services["temporal-frontend"], "healthcheck", "test"))), " "); !strings.Contains(hc, "127.0.0.1:"+strconv.Itoa(ports["frontend"]["grpc"])) {
		t.Errorf("compose temporal-frontend's health check %q does not check its gRPC port", hc)
	}

	// The schema job: both schemas, with the server's own database settings.
	schema := services["temporal-schema"]
	if cmd := strs(list(schema["command"])); !slices.Equal(cmd, []string{schemaScript}) {
		t.Errorf("compose temporal-schema: command %v; want [%s]", cmd, schemaScript)
	}
	checkTemporalImage(t, "temporal-schema", schema)
	schemaEnv := composeEnv(schema)
	for name := range scriptVars(t, schemaScript, "TEMPORAL_SERVER_") {
		if _, ok := schemaEnv[name]; !ok && name != "TEMPORAL_SERVER_DB_PLUGIN" {
			t.Errorf("compose temporal-schema does not set %s, which %s reads", name, schemaScript)
		}
	}
	for k, v := range schemaEnv {
		if w := composeEnv(services["temporal-history"])[k]; w != v {
			t.Errorf("compose temporal-schema sets %s=%q; the services use %q", k, v, w)
		}
	}
	pg := composeEnv(services["postgres"])
	if h := schemaEnv["TEMPORAL_SERVER_DB_HOST"]; services[h] == nil || schemaEnv["TEMPORAL_SERVER_DB_USER"] != pg["POSTGRES_USER"] {
		t.Errorf("compose temporal-schema connects to %s as %s; the postgres service has user %s", h, schemaEnv["TEMPORAL_SERVER_DB_USER"], pg["POSTGRES_USER"])
	}

	// The namespace and search-attribute job: the one setup script, over the
	// connection siteops uses.
	setup := services["temporal-setup"]
	if cmd := strs(list(setup["command"])); !slices.Equal(cmd, []string{setupScript}) {
		t.Errorf("compose temporal-setup: command %v; want [%s]", cmd, setupScript)
	}
	checkTemporalImage(t, "temporal-setup", setup)
	knobs := setupKnobs(t)
	for k := range composeEnv(setup) {
		if _, knob := knobs[k]; !knob && !temporalClientEnv()[k] {
			t.Errorf("compose temporal-setup sets %s, which neither the temporal CLI nor %s reads", k, setupScript)
		}
	}
	if dependsOn(setup, "temporal-frontend") != "service_healthy" {
		t.Errorf("compose temporal-setup does not wait for a healthy temporal-frontend")
	}
	for _, name := range []string{"temporal-setup", "worker", "ingress"} {
		if a := interpolate(composeEnv(services[name])["TEMPORAL_ADDRESS"], ""); a != frontend {
			t.Errorf("compose %s: TEMPORAL_ADDRESS is %q by default; the frontend is %s", name, a, frontend)
		}
	}
	checkComposeTemporalCredentials(t, services)
	checkComposeHealthChecks(t, services)

	// The store: the postgres service's database and user.
	checkComposeDatabaseURL(t, composeEnv(services["worker"])["SITEOPS_DATABASE_URL"], services)
	checkComposeSecrets(t, services)
}

// checkTemporalImage checks that a compose service runs the Temporal image
// built from deploy/temporal.Dockerfile.
func checkTemporalImage(t *testing.T, name string, svc map[string]any) {
	t.Helper()
	if img := str(svc["image"]); img != temporalImage() {
		t.Errorf("compose %s: image %q; want %s", name, img, temporalImage())
	}
	if df := str(dig(svc, "build", "dockerfile")); df != "deploy/temporal.Dockerfile" {
		t.Errorf("compose %s builds from %q; want deploy/temporal.Dockerfile", name, df)
	}
}

// databaseURL matches postgres://USER:${PASSWORD}@HOST:PORT/DB?...
var databaseURL = regexp.MustCompile(`^postgres://([^:@/]+):(\$\{[^}]+\})@([^:/]+):(\d+)/([^?]+)`)

func checkComposeDatabaseURL(t *testing.T, url string, services map[string]map[string]any) {
	t.Helper()
	m := databaseURL.FindStringSubmatch(url)
	if m == nil {
		t.Errorf("compose SITEOPS_DATABASE_URL=%q is not postgres://USER:${PASSWORD}@HOST:PORT/DB: the password must come from the environment", url)
		return
	}
	pg := composeEnv(services[m[3]])
	if services[m[3]] == nil || pg["POSTGRES_USER"] != m[1] || pg["POSTGRES_DB"] != m[5] || m[4] != "5432" {
		t.Errorf("compose SITEOPS_DATABASE_URL=%q does not name the postgres service's database %s as %s", url, pg["POSTGRES_DB"], pg["POSTGRES_USER"])
	}
}

// checkComposeSecrets checks that no secret is written in compose.yaml:
// every sensitive variable takes its value from the environment (deploy/.env
// or the shell) through ${...}; that compose.env.example names every
// variable compose.yaml interpolates, with placeholders only; and that git
// ignores deploy/.env.
func checkComposeSecrets(t *testing.T, services map[string]map[string]any) {
	t.Helper()
	for name, svc := range services {
		for k, v := range composeEnv(svc) {
			if sensitive[k] && !interpolation.MatchString(v) {
				t.Errorf("compose %s writes %s; take it from the environment (${%s} and deploy/.env)", name, k, k)
			}
		}
	}
	example := map[string]string{}
	for _, line := range strings.Split(read(t, "compose.env.example"), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			example[k] = v
		}
	}
	var body strings.Builder
	for _, line := range strings.Split(read(t, "compose.yaml"), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			body.WriteString(line + "\n")
		}
	}
	for _, m := range interpolation.FindAllStringSubmatch(body.String(), -1) {
		if _, ok := example[m[1]]; !ok {
			t.Errorf("compose.yaml reads ${%s}, which compose.env.example does not show", m[1])
		}
	}
	for k, v := range example {
		if (sensitive[k] || strings.HasSuffix(k, "_PASSWORD")) && v != "" && v != "replace-me" {
			t.Errorf("compose.env.example: %s=%q is not a placeholder (replace-me or empty)", k, v)
		}
	}
	if !regexp.MustCompile(`(?m)^/?\.env$`).MatchString(read(t, ".gitignore")) {
		t.Errorf("deploy/.gitignore does not keep deploy/.env out of git")
	}
}
