package deploy_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/config"
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

// siteopsServices are compose's services of the siteops image, by the
// role (subcommand) each runs: the two worker slots and the ingress.
var siteopsServices = map[string]string{"worker-a": "worker", "worker-b": "worker", "ingress": "ingress"}

// composeImageVar is the deploy/.env variable of each siteops service's
// image (compose never builds the siteops image: see TestComposeSlots).
var composeImageVar = map[string]string{"worker-a": "WORKER_A_IMAGE", "worker-b": "WORKER_B_IMAGE", "ingress": "INGRESS_IMAGE"}

func TestComposeFile(t *testing.T) {
	env := knownEnv(t)
	server := serverEnv(t)
	services := composeServices(t)
	want := []string{"postgres", "postgres-roles", "temporal-schema", "temporal-setup", "temporal-ui", "worker-a", "worker-b", "ingress"}
	for _, s := range temporalServices {
		want = append(want, "temporal-"+s)
	}
	for _, name := range want {
		if services[name] == nil {
			t.Fatalf("compose.yaml has no %s service", name)
		}
	}

	// siteops: two of each role (of each worker slot), each with the time to
	// stop it needs.
	for name, role := range siteopsServices {
		svc := services[name]
		cmd := list(svc["command"])
		if len(cmd) == 0 || str(cmd[0]) != role || !subcommandExists(t, role) {
			t.Errorf("compose %s: command %v is not `siteops %s`", name, cmd, role)
		}
		if img := str(svc["image"]); !strings.HasPrefix(img, "${"+composeImageVar[name]+":?") {
			t.Errorf("compose %s: image %q; want the image deploy/.env names, ${%s:?...}", name, img, composeImageVar[name])
		}
		if svc["build"] != nil {
			t.Errorf("compose %s builds the siteops image; it runs the image deploy/.env names", name)
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
		if need := map[string]time.Duration{"worker": worker.StopTimeout, "ingress": ingressDrain}[role]; grace <= need {
			t.Errorf("compose %s: stop_grace_period %s; it needs more than %s after SIGTERM", name, grace, need)
		}
		if dependsOn(svc, "postgres") != "service_healthy" {
			t.Errorf("compose %s does not wait for a healthy postgres", name)
		}
		if dependsOn(svc, "postgres-roles") != "service_completed_successfully" {
			t.Errorf("compose %s does not wait for postgres-roles, which makes its database", name)
		}
	}
	for _, name := range []string{"worker-a", "worker-b"} {
		if dependsOn(services[name], "temporal-setup") != "service_completed_successfully" {
			t.Errorf("compose %s does not wait for temporal-setup: it refuses to start without the namespace and the search attributes", name)
		}
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
			if !serverReads(t, server, k) {
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
		if !setsOrFile(t, schemaEnv, name, schemaScript) && name != "TEMPORAL_SERVER_DB_PLUGIN" {
			t.Errorf("compose temporal-schema does not set %s, which %s reads", name, schemaScript)
		}
	}
	for k, v := range schemaEnv {
		if w := composeEnv(services["temporal-history"])[k]; w != v {
			t.Errorf("compose temporal-schema sets %s=%q; the services use %q", k, v, w)
		}
	}
	if dependsOn(schema, "postgres-roles") != "service_completed_successfully" {
		t.Errorf("compose temporal-schema does not wait for postgres-roles, which makes Temporal's role and databases")
	}
	checkComposeRoles(t, services, schemaEnv)

	// The namespace and search-attribute job: the one setup script, over the
	// connection siteops uses.
	setup := services["temporal-setup"]
	if cmd := strs(list(setup["command"])); !slices.Equal(cmd, []string{setupScript}) {
		t.Errorf("compose temporal-setup: command %v; want [%s]", cmd, setupScript)
	}
	checkTemporalImage(t, "temporal-setup", setup)
	knobs := setupKnobs(t)
	for k := range composeEnv(setup) {
		base, _ := strings.CutSuffix(k, config.FileSuffix)
		if _, knob := knobs[k]; !knob && !temporalClientEnv()[k] && !slices.Contains(scriptSecretFiles(t)[base], setupScript) {
			t.Errorf("compose temporal-setup sets %s, which neither the temporal CLI nor %s reads", k, setupScript)
		}
	}
	if dependsOn(setup, "temporal-frontend") != "service_healthy" {
		t.Errorf("compose temporal-setup does not wait for a healthy temporal-frontend")
	}
	for _, name := range []string{"temporal-setup", "worker-a", "worker-b", "ingress"} {
		if a := interpolate(composeEnv(services[name])["TEMPORAL_ADDRESS"], ""); a != frontend {
			t.Errorf("compose %s: TEMPORAL_ADDRESS is %q by default; the frontend is %s", name, a, frontend)
		}
	}
	checkComposeTemporalCredentials(t, services)
	checkComposeHealthChecks(t, services)
	checkComposePorts(t, services, ingressPort)
	checkComposeSecrets(t, services)
}

// setsOrFile reports whether env sets name, or name's _FILE when script
// reads name from a file.
func setsOrFile(t *testing.T, env map[string]string, name, script string) bool {
	t.Helper()
	if _, ok := env[name]; ok {
		return true
	}
	_, ok := env[name+config.FileSuffix]
	return ok && slices.Contains(scriptSecretFiles(t)[name], script)
}

// serverReads reports whether the Temporal services read name: a variable
// of cluster.yaml, or NAME_FILE of one that temporal-service.sh loads from
// a file.
func serverReads(t *testing.T, server map[string]string, name string) bool {
	t.Helper()
	if _, ok := server[name]; ok {
		return true
	}
	base, isFile := strings.CutSuffix(name, config.FileSuffix)
	_, read := server[base]
	return isFile && read && slices.Contains(scriptSecretFiles(t)[base], serviceScript)
}

// checkComposePorts checks what compose publishes on the host: the
// ingress's webhook port on every interface (the Agent-Site service
// delivers to it), everything else on loopback only, and the Web UI
// read-only.
func checkComposePorts(t *testing.T, services map[string]map[string]any, webhookPort int) {
	t.Helper()
	for name, svc := range services {
		for _, p := range list(svc["ports"]) {
			spec := str(p)
			parts := strings.Split(spec, ":")
			public := name == "ingress" && strings.HasSuffix(spec, ":"+strconv.Itoa(webhookPort)) && len(parts) == 2
			if !public && (len(parts) != 3 || parts[0] != "127.0.0.1") {
				t.Errorf("compose %s publishes %q; bind it to loopback (\"127.0.0.1:HOST:CONTAINER\"): only the ingress's webhook port %d is published on every interface", name, spec, webhookPort)
			}
		}
	}
	for _, name := range []string{"postgres", "postgres-roles", "temporal-schema", "temporal-history", "temporal-matching", "temporal-worker", "temporal-setup"} {
		if ports := list(services[name]["ports"]); len(ports) > 0 {
			t.Errorf("compose %s publishes %v; it serves nothing the host needs", name, ports)
		}
	}
	if env := composeEnv(services["temporal-ui"]); env["TEMPORAL_DISABLE_WRITE_ACTIONS"] != "true" && len(list(services["temporal-ui"]["ports"])) > 0 {
		t.Errorf("compose temporal-ui is published with its write actions on (TEMPORAL_DISABLE_WRITE_ACTIONS=%q); turn them off or publish it not at all", env["TEMPORAL_DISABLE_WRITE_ACTIONS"])
	}
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

// checkComposeRoles checks the database roles: postgres-roles gives
// Temporal the role and databases the Temporal services and the schema
// job use (schemaEnv), and siteops the role and database of the URL
// compose-secrets.sh writes into the file siteops reads; neither is the
// PostgreSQL superuser, and no siteops process connects as it.
func checkComposeRoles(t *testing.T, services map[string]map[string]any, schemaEnv map[string]string) {
	t.Helper()
	pg := composeEnv(services["postgres"])
	superuser := pg["POSTGRES_USER"]
	if superuser == "" {
		superuser = "postgres" // the postgres image's default
	}
	roles := composeEnv(services["postgres-roles"])
	if cmd := strs(list(services["postgres-roles"]["command"])); !slices.Equal(cmd, []string{rolesScript}) {
		t.Errorf("compose postgres-roles: command %v; want [%s]", cmd, rolesScript)
	}
	checkTemporalImage(t, "postgres-roles", services["postgres-roles"])
	if dependsOn(services["postgres-roles"], "postgres") != "service_healthy" {
		t.Errorf("compose postgres-roles does not wait for a healthy postgres")
	}
	if roles["PGHOST"] != "postgres" || roles["PGUSER"] != superuser || roles["PGPASSWORD_FILE"] != pg["POSTGRES_PASSWORD_FILE"] || pg["POSTGRES_PASSWORD_FILE"] == "" {
		t.Errorf("compose postgres-roles connects to %s as %s with the password file %s; want the postgres service's superuser %s and its POSTGRES_PASSWORD_FILE %s",
			roles["PGHOST"], roles["PGUSER"], roles["PGPASSWORD_FILE"], superuser, pg["POSTGRES_PASSWORD_FILE"])
	}
	known := rolesEnv(t)
	for k := range roles {
		if !known[k] {
			t.Errorf("compose postgres-roles sets %s, which %s does not read", k, rolesScript)
		}
	}
	for _, k := range []string{"TEMPORAL_SERVER_DB_USER", "TEMPORAL_SERVER_DB_PASSWORD_FILE", "TEMPORAL_SERVER_DB_NAME", "TEMPORAL_SERVER_VISIBILITY_DB_NAME"} {
		if roles[k] == "" || roles[k] != schemaEnv[k] {
			t.Errorf("compose postgres-roles sets %s=%q; the Temporal services use %q", k, roles[k], schemaEnv[k])
		}
	}
	if u := schemaEnv["TEMPORAL_SERVER_DB_USER"]; u == superuser || u == "" {
		t.Errorf("compose: Temporal connects as %q, the PostgreSQL superuser; give it its own role (postgres-roles)", u)
	}
	if h := schemaEnv["TEMPORAL_SERVER_DB_HOST"]; services[h] == nil {
		t.Errorf("compose: Temporal's database host %q is no compose service", h)
	}

	// siteops' URL: the file compose-secrets.sh makes, which both
	// postgres-roles and the siteops services mount.
	urlFile := roles["SITEOPS_DATABASE_URL_FILE"]
	for _, name := range []string{"worker-a", "worker-b", "ingress"} {
		if f := composeEnv(services[name])["SITEOPS_DATABASE_URL_FILE"]; f == "" || f != urlFile {
			t.Errorf("compose %s reads its database URL from %q; postgres-roles makes the role of %q", name, f, urlFile)
		}
	}
	dir := filepath.Join(t.TempDir(), "secrets")
	if out, err := exec.Command("bash", composeSecrets, dir).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", composeSecrets, err, out)
	}
	secret, _ := strings.CutPrefix(urlFile, "/run/secrets/")
	file := strings.TrimPrefix(str(dig(docs(t, "compose.yaml")[0], "secrets", secret, "file")), "./secrets/")
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatalf("the secret %s (%s) that siteops reads its URL from: %v", secret, file, err)
	}
	m := composeURL.FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("%s writes a database URL that is not postgres://USER:PASSWORD@HOST:PORT/DB (letters and digits), which %s cannot read", composeSecrets, rolesScript)
	}
	if m[1] == superuser || m[1] == schemaEnv["TEMPORAL_SERVER_DB_USER"] || services[m[3]] == nil || m[4] != "5432" || m[5] == schemaEnv["TEMPORAL_SERVER_DB_NAME"] {
		t.Errorf("%s: siteops connects as %s to %s:%s/%s; want its own role (not %s, not Temporal's) and database on the postgres service", composeSecrets, m[1], m[3], m[4], m[5], superuser)
	}
}

// composeURL matches the URL compose-secrets.sh writes:
// postgres://USER:PASSWORD@HOST:PORT/DB?...
var composeURL = regexp.MustCompile(`^postgres://([a-z_]+):([A-Za-z0-9]+)@([^:/]+):(\d+)/([a-z_]+)\?`)

// checkComposeSecrets checks that no secret is a variable in compose: no
// service sets a sensitive variable, each gets NAME_FILE instead, naming
// /run/secrets/S of a compose secret S that it mounts and that compose
// declares from a file in deploy/secrets/ (which git ignores, and which
// compose-secrets.sh makes); that compose.env.example, the settings, names
// no secret and every variable compose.yaml interpolates; and that git
// ignores deploy/.env.
func checkComposeSecrets(t *testing.T, services map[string]map[string]any) {
	t.Helper()
	declared := map[string]string{}
	for name, v := range dig(docs(t, "compose.yaml")[0], "secrets").(map[string]any) {
		declared[name] = str(dig(v, "file"))
		if !strings.HasPrefix(declared[name], "./secrets/") {
			t.Errorf("compose secret %s comes from %q; keep the files in deploy/secrets/, which git ignores", name, declared[name])
		}
	}
	made := read(t, composeSecrets)
	for name, file := range declared {
		if !regexp.MustCompile(`(?m)^put ` + regexp.QuoteMeta(strings.TrimPrefix(file, "./secrets/")) + ` `).MatchString(made) {
			t.Errorf("%s does not make %s, the file of the compose secret %s (compose fails on a missing file)", composeSecrets, file, name)
		}
	}
	files := secretFileVars(t)
	files["POSTGRES_PASSWORD"] = true // the postgres image reads POSTGRES_PASSWORD_FILE
	for name, svc := range services {
		mounted := strs(list(svc["secrets"]))
		for k, v := range composeEnv(svc) {
			if sensitive[k] {
				t.Errorf("compose %s sets %s; give %s%s, a compose secret's path, instead", name, k, k, config.FileSuffix)
			}
			base, isFile := strings.CutSuffix(k, config.FileSuffix)
			if !isFile || !files[base] {
				continue
			}
			secret, ok := strings.CutPrefix(v, "/run/secrets/")
			if !ok || declared[secret] == "" || !slices.Contains(mounted, secret) {
				t.Errorf("compose %s reads %s from %s, which is not a compose secret it declares and mounts (%v)", name, base, v, mounted)
			}
		}
		for _, secret := range mounted {
			if declared[secret] == "" {
				t.Errorf("compose %s mounts the secret %s, which compose.yaml does not declare", name, secret)
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
		if sensitive[m[1]] || strings.HasSuffix(m[1], "_PASSWORD") {
			t.Errorf("compose.yaml reads the secret ${%s} from the environment; make it a compose secret", m[1])
		}
	}
	for k := range example {
		if sensitive[k] || strings.HasSuffix(k, "_PASSWORD") || strings.HasSuffix(k, "_KEY") {
			t.Errorf("compose.env.example holds %s, a secret; it belongs in a file of deploy/secrets/", k)
		}
	}
	ignore := read(t, ".gitignore")
	for _, re := range []string{`(?m)^/?\.env$`, `(?m)^/?secrets/?$`} {
		if !regexp.MustCompile(re).MatchString(ignore) {
			t.Errorf("deploy/.gitignore does not keep %s out of git", re)
		}
	}
}
