package deploy_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/siteops/siteops/internal/cluster"
	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/siteopstest"
)

// TestTemporalImage checks deploy/temporal.Dockerfile: it builds siteops'
// server build (deploy/temporal-server), its SQL tool and the CLI at the
// versions the Makefile pins (the ones the tests run), and carries the kept configuration and the scripts
// where the compose file and the manifests expect them.
func TestTemporalImage(t *testing.T) {
	s := read(t, "temporal.Dockerfile")
	makefile := read(t, "../Makefile")
	// SERVER_GOTOOLCHAIN: the Go release the server build needs (its go.mod
	// asks for a newer Go than the machines'), the same in both.
	for _, name := range []string{"TEMPORAL_SERVER_VERSION", "TEMPORAL_CLI_VERSION", "SERVER_GOTOOLCHAIN"} {
		pin := regexp.MustCompile(`(?m)^` + name + `\s*:=\s*(\S+)`).FindStringSubmatch(makefile)
		arg := regexp.MustCompile(`(?m)^ARG ` + name + `=(\S+)`).FindStringSubmatch(s)
		if pin == nil || arg == nil || pin[1] != arg[1] {
			t.Errorf("temporal.Dockerfile has ARG %s=%v; the Makefile pins %v", name, arg, pin)
		}
	}
	if !strings.Contains(s, "ARG TEMPORAL_SERVER_VERSION="+cluster.ServerVersion+"\n") {
		t.Errorf("temporal.Dockerfile does not build the server version internal/cluster runs (%s)", cluster.ServerVersion)
	}
	// The server is siteops' build, of the version the Makefile pins.
	if !strings.Contains(s, "COPY deploy/temporal-server ") || !strings.Contains(s, "go build -trimpath -ldflags \"-s -w\" -o /out/temporal-server .") {
		t.Errorf("temporal.Dockerfile does not build the server from deploy/temporal-server")
	}
	mod := read(t, filepath.Join("temporal-server", "go.mod"))
	if want := "go.temporal.io/server " + cluster.ServerVersion + "\n"; !strings.Contains(mod, want) {
		t.Errorf("temporal-server/go.mod does not require %q, the version internal/cluster runs and the Makefile pins", strings.TrimSpace(want))
	}
	for _, pkg := range []string{
		"go.temporal.io/server/cmd/tools/sql@${TEMPORAL_SERVER_VERSION}",
		"github.com/temporalio/cli/cmd/temporal@${TEMPORAL_CLI_VERSION}",
	} {
		if !strings.Contains(s, "go install") || !strings.Contains(s, pkg) {
			t.Errorf("temporal.Dockerfile does not go install %s", pkg)
		}
	}
	for _, bin := range []string{"temporal-server", "temporal-sql-tool"} {
		if !strings.Contains(s, "/out/"+bin) {
			t.Errorf("temporal.Dockerfile does not name a binary %s (the scripts call it)", bin)
		}
	}
	if !strings.Contains(s, "USER 1000") {
		t.Errorf("temporal.Dockerfile does not run as uid 1000, the manifests' runAsUser")
	}

	// What it copies: source → destination.
	copies := map[string]string{}
	ignore := read(t, "temporal.Dockerfile.dockerignore")
	for _, m := range regexp.MustCompile(`(?m)^COPY ((?:--\S+ )*)(.+)$`).FindAllStringSubmatch(s, -1) {
		if strings.Contains(m[1], "--from=") {
			continue
		}
		f := strings.Fields(m[2])
		for _, src := range f[:len(f)-1] {
			copies[src] = f[len(f)-1]
			if _, err := os.Stat(filepath.Join("..", src)); err != nil {
				t.Errorf("temporal.Dockerfile copies %s: %v", src, err)
			}
			if !strings.Contains(ignore, "!"+strings.TrimSuffix(src, "/")) {
				t.Errorf("temporal.Dockerfile.dockerignore keeps %s out of the build context", src)
			}
		}
	}
	want := map[string]string{
		"deploy/temporal/config":        temporalRoot + "/config",
		"deploy/temporal/dynamicconfig": temporalRoot + "/dynamicconfig",
		"deploy/" + serviceScript:       "/usr/local/bin/",
		"deploy/" + schemaScript:        "/usr/local/bin/",
		"deploy/" + setupScript:         "/usr/local/bin/",
		"deploy/" + rolesScript:         "/usr/local/bin/",
		"deploy/" + secretsLib:          "/usr/local/bin/",
	}
	for src, dst := range want {
		if copies[src] != dst {
			t.Errorf("temporal.Dockerfile copies %s to %q; want %s", src, copies[src], dst)
		}
	}
}

// TestTemporalScripts checks the scripts the Temporal containers run.
func TestTemporalScripts(t *testing.T) {
	server := serverEnv(t)
	for _, script := range []string{serviceScript, schemaScript, setupScript, rolesScript, composeSecrets, secretsLib} {
		st, err := os.Stat(script)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode()&0o111 == 0 && script != secretsLib { // sourced, not run
			t.Errorf("%s is not executable", script)
		}
		if out, err := exec.Command("bash", "-n", script).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", script, err, out)
		}
	}

	// temporal-service.sh runs the kept configuration the way internal/cluster does.
	svc := read(t, serviceScript)
	if _, err := os.Stat(filepath.Join("temporal", "config", "cluster.yaml")); err != nil || !strings.Contains(svc, "--config config --env cluster") {
		t.Errorf("%s does not start the server with --config config --env cluster (temporal/config/cluster.yaml)", serviceScript)
	}
	if !strings.Contains(svc, `--root "${TEMPORAL_ROOT:-`+temporalRoot+`}"`) || !strings.Contains(svc, `start --service "$service"`) {
		t.Errorf("%s does not start one service of %s", serviceScript, temporalRoot)
	}
	for _, s := range temporalServices {
		if !strings.Contains(svc, s) {
			t.Errorf("%s does not accept the %s service", serviceScript, s)
		}
	}
	for name := range scriptVars(t, serviceScript, "TEMPORAL_SERVER_") {
		if _, ok := server[name]; !ok {
			t.Errorf("%s sets %s, which cluster.yaml does not read", serviceScript, name)
		}
	}

	// temporal-schema.sh sets up both schemas, on the server's databases.
	schema := read(t, schemaScript)
	for _, s := range []string{"create-database", "setup-schema -v 0.0", `update-schema --schema-name "$schema"`} {
		if !strings.Contains(schema, s) {
			t.Errorf("%s does not run %q", schemaScript, s)
		}
	}
	schemas := map[string]string{}
	for _, m := range regexp.MustCompile(`"\$\{(TEMPORAL_SERVER_[A-Z_]+)(?::-[^}]*)?\}=(\S+)"`).FindAllStringSubmatch(schema, -1) {
		schemas[m[1]] = m[2]
	}
	for db, want := range map[string]string{
		"TEMPORAL_SERVER_DB_NAME":            "postgresql/v12/temporal",
		"TEMPORAL_SERVER_VISIBILITY_DB_NAME": "postgresql/v12/visibility",
	} {
		if schemas[db] != want {
			t.Errorf("%s sets up the database $%s with schema %q; want %s", schemaScript, db, schemas[db], want)
		}
	}
	vars := scriptVars(t, schemaScript, "TEMPORAL_SERVER_")
	for _, name := range []string{"TEMPORAL_SERVER_DB_HOST", "TEMPORAL_SERVER_DB_PORT", "TEMPORAL_SERVER_DB_USER", "TEMPORAL_SERVER_DB_PASSWORD", "TEMPORAL_SERVER_DB_NAME", "TEMPORAL_SERVER_VISIBILITY_DB_NAME"} {
		if _, ok := vars[name]; !ok {
			t.Errorf("%s does not read %s", schemaScript, name)
		}
	}
	for name, def := range vars {
		if d, ok := server[name]; !ok || d != def {
			t.Errorf("%s reads %s with default %q; cluster.yaml's is %q (read: %t)", schemaScript, name, def, d, ok)
		}
	}
	if strings.Contains(schema, "--pw") || !strings.Contains(schema, "export SQL_PASSWORD") {
		t.Errorf("%s must hand the password to the tool in SQL_PASSWORD, never on a command line", schemaScript)
	}
}

// TestServerConfigRendersForDeployments renders the kept server
// configuration with the environment of the frontend of the compose file
// and of the manifests, with the pinned server (skipped when it is not
// built): it must listen on every interface, on the ports the files
// declare, and reach their database.
func TestServerConfigRendersForDeployments(t *testing.T) {
	bin, err := cluster.FindServer()
	if err != nil {
		siteopstest.Missing(t, siteopstest.RequireTemporal, "%v", err)
	}
	server := serverEnv(t)
	const podIP = "10.1.2.3"

	ms := manifests(t, temporalDir)
	d, ok := find(ms, "Deployment", "temporal-frontend")
	if !ok {
		t.Fatal("no Deployment temporal-frontend")
	}
	k8s := values(podEnv(t, d, containers(d, false)[0], configMapData(ms)), "fake-password")
	k8s["TEMPORAL_SERVER_BROADCAST_ADDRESS"] = podIP
	compose := map[string]string{}
	for k, v := range composeEnv(composeServices(t)["temporal-frontend"]) {
		compose[k] = interpolate(v, "fake-password")
	}

	for name, env := range map[string]map[string]string{"kubernetes": k8s, "compose": compose} {
		t.Run(name, func(t *testing.T) {
			// What temporal-service.sh adds in the container.
			for k, def := range scriptVars(t, serviceScript, "TEMPORAL_SERVER_") {
				if env[k] == "" && def != "" {
					env[k] = def
				}
			}
			if env["TEMPORAL_SERVER_BROADCAST_ADDRESS"] == "" {
				env["TEMPORAL_SERVER_BROADCAST_ADDRESS"] = podIP
			}
			m := renderServerConfig(t, bin, env)
			ports := temporalPorts(t, server, env)
			want := map[string]any{
				"services.frontend.rpc.bindOnIP":                   "0.0.0.0",
				"services.frontend.rpc.grpcPort":                   float64(ports["frontend"]["grpc"]),
				"services.frontend.rpc.httpPort":                   float64(ports["frontend"]["http"]),
				"services.history.rpc.grpcPort":                    float64(ports["history"]["grpc"]),
				"global.membership.broadcastAddress":               podIP,
				"persistence.datastores.postgres.sql.connectAddr":  setting(server, env, "TEMPORAL_SERVER_DB_HOST") + ":" + setting(server, env, "TEMPORAL_SERVER_DB_PORT"),
				"persistence.datastores.postgres.sql.databaseName": setting(server, env, "TEMPORAL_SERVER_DB_NAME"),
				"persistence.datastores.postgres.sql.user":         setting(server, env, "TEMPORAL_SERVER_DB_USER"),
				"dynamicConfigClient.filepath":                     temporalRoot + "/dynamicconfig/cluster.yaml",
			}
			for path, w := range want {
				if got := dig(m, strings.Split(path, ".")...); fmt.Sprint(got) != fmt.Sprint(w) {
					t.Errorf("%s = %#v, want %#v", path, got, w)
				}
			}
			if !slices.Contains([]string{"postgres12", "postgres12_pgx"}, str(dig(m, "persistence", "datastores", "postgres", "sql", "pluginName"))) {
				t.Errorf("the store is not PostgreSQL")
			}
			// Kubernetes: the frontend requires a client certificate.
			if name == "kubernetes" {
				server := dig(m, "global", "tls", "frontend", "server")
				if dig(server, "requireClientAuth") != true || len(list(dig(server, "clientCaFiles"))) == 0 {
					t.Errorf("global.tls.frontend.server = %v; want requireClientAuth with clientCaFiles (mutual TLS)", server)
				}
			}
		})
	}
}

// renderServerConfig renders deploy/temporal/config/cluster.yaml with env
// and nothing else of this process's environment, as the server loads it.
func renderServerConfig(t *testing.T, bin string, env map[string]string) map[string]any {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("temporal", "config"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", dir, "--env", "cluster", "render-config")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("render-config: %v\n%s", err, stderr.String())
	}
	var m map[string]any
	if err := yaml.Unmarshal(out, &m); err != nil {
		t.Fatalf("render-config output does not parse: %v\n%s", err, out)
	}
	return m
}

// TestClusterDynamicConfigIsTheDevServers holds the cluster's dynamic
// configuration to what every dev server of siteops starts with
// (devserver.Dynamic): Task Queue Priority and Fairness among it, so that
// the playbooks go first on the cluster as in the tests.
func TestClusterDynamicConfigIsTheDevServers(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("temporal", "dynamicconfig", "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string][]struct {
		Value       any `json:"value"`
		Constraints any `json:"constraints"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	for key, want := range devserver.Dynamic {
		if slices.Contains(devserver.DevOnly, key) {
			continue
		}
		vals, ok := cfg[key]
		if !ok || len(vals) != 1 || vals[0].Constraints != nil {
			t.Errorf("cluster.yaml: %s is not set once for every namespace, as the dev server's --dynamic-config-value %s=%s", key, key, want)
			continue
		}
		if got := fmt.Sprint(vals[0].Value); got != want {
			t.Errorf("cluster.yaml: %s = %s, the dev server's %s", key, got, want)
		}
	}
}
