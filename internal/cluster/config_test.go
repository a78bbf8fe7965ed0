package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/siteops/siteops/internal/siteopstest"
)

// server returns the temporal-server binary, skipping t without one (or
// failing it when SITEOPS_REQUIRE_TEMPORAL is set).
func server(t *testing.T) string {
	t.Helper()
	bin, err := FindServer()
	if err != nil {
		siteopstest.Missing(t, siteopstest.RequireTemporal, "%v", err)
	}
	return bin
}

// render renders deploy/temporal/config/cluster.yaml the way the server
// loads it, with env, and returns it as generic data.
func render(t *testing.T, env map[string]string) map[string]any {
	t.Helper()
	root, _, err := findDeployFiles()
	if err != nil {
		t.Fatal(err)
	}
	// Unlike start, render-config does not join --root and --config.
	cmd := exec.Command(server(t), "--config", filepath.Join(root, "config"), "--env", configEnv, "render-config")
	cmd.Env = mergeEnv(withoutTemporal(os.Environ()), env)
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

func dig(m any, path string) any {
	for _, p := range strings.Split(path, ".") {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[p]
	}
	return m
}

func TestServerConfigRendersFromEnvironment(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want map[string]any
	}{
		{
			name: "defaults",
			env:  nil,
			want: map[string]any{
				"services.frontend.rpc.grpcPort":                          float64(7233),
				"services.frontend.rpc.httpPort":                          float64(7243),
				"services.history.rpc.membershipPort":                     float64(6934),
				"persistence.datastores.postgres.sql.databaseName":        "temporal",
				"persistence.datastores.postgres.sql.connectAddr":         "127.0.0.1:5432",
				"persistence.datastores.postgres.sql.pluginName":          "postgres12",
				"clusterMetadata.clusterInformation.active.httpAddress":   "127.0.0.1:7243",
				"global.tls.frontend.server.certFile":                     "",
				"global.tls.systemWorker.certFile":                        "",
				"global.metrics":                                          nil,
				"dynamicConfigClient.filepath":                            "dynamicconfig/cluster.yaml",
				"persistence.datastores.postgres-visibility.sql.maxConns": float64(10),
			},
		},
		{
			name: "everything set",
			env: map[string]string{
				"TEMPORAL_SERVER_FRONTEND_GRPC_PORT":      "17233",
				"TEMPORAL_SERVER_FRONTEND_HTTP_PORT":      "17243",
				"TEMPORAL_SERVER_HISTORY_MEMBERSHIP_PORT": "16934",
				"TEMPORAL_SERVER_DB_HOST":                 "db.internal",
				"TEMPORAL_SERVER_DB_PORT":                 "6543",
				"TEMPORAL_SERVER_DB_NAME":                 "t1",
				"TEMPORAL_SERVER_VISIBILITY_DB_NAME":      "t1_vis",
				"TEMPORAL_SERVER_BROADCAST_ADDRESS":       "10.0.0.7",
				"TEMPORAL_SERVER_TLS_CERT":                "/tls/server.pem",
				"TEMPORAL_SERVER_TLS_KEY":                 "/tls/server-key.pem",
				"TEMPORAL_SERVER_TLS_CLIENT_CA":           "/tls/clients-ca.pem",
				"TEMPORAL_SERVER_TLS_CA":                  "/tls/ca.pem",
				"TEMPORAL_SERVER_METRICS_ADDRESS":         "127.0.0.1:9464",
				"TEMPORAL_SERVER_DYNAMIC_CONFIG_FILE":     "/etc/temporal/dc.yaml",
				"TEMPORAL_SERVER_PUBLIC_CLIENT_ADDRESS":   "frontend:7233",
				"TEMPORAL_SERVER_VISIBILITY_DB_MAX_CONNS": "3",
			},
			want: map[string]any{
				"services.frontend.rpc.grpcPort":                              float64(17233),
				"services.history.rpc.membershipPort":                         float64(16934),
				"persistence.datastores.postgres.sql.databaseName":            "t1",
				"persistence.datastores.postgres-visibility.sql.databaseName": "t1_vis",
				"persistence.datastores.postgres.sql.connectAddr":             "db.internal:6543",
				"global.membership.broadcastAddress":                          "10.0.0.7",
				"clusterMetadata.clusterInformation.active.rpcAddress":        "10.0.0.7:17233",
				"global.tls.frontend.server.certFile":                         "/tls/server.pem",
				"global.tls.frontend.server.keyFile":                          "/tls/server-key.pem",
				"global.tls.frontend.server.requireClientAuth":                true,
				"global.tls.frontend.server.clientCaFiles":                    []any{"/tls/clients-ca.pem"},
				"global.tls.systemWorker.certFile":                            "/tls/server.pem",
				"global.tls.systemWorker.client.serverName":                   "10.0.0.7",
				"global.tls.systemWorker.client.rootCaFiles":                  []any{"/tls/ca.pem"},
				"global.metrics.prometheus.listenAddress":                     "127.0.0.1:9464",
				"dynamicConfigClient.filepath":                                "/etc/temporal/dc.yaml",
				"publicClient.hostPort":                                       "frontend:7233",
				"persistence.datastores.postgres-visibility.sql.maxConns":     float64(3),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := render(t, tt.env)
			for path, want := range tt.want {
				if got := dig(m, path); !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %#v, want %#v", path, got, want)
				}
			}
		})
	}
}

// TestDynamicConfigIsValid checks the kept dynamic config, and the one a
// cluster writes from it, with the server's own validator.
func TestDynamicConfigIsValid(t *testing.T) {
	bin := server(t)
	root, _, err := findDeployFiles()
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: t.TempDir(), configRoot: root, HTTPAddress: "127.0.0.1:17243"}
	if err := c.writeDynamicConfig(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(root, "dynamicconfig", "cluster.yaml"), c.dynamicConfigFile()} {
		out, err := exec.Command(bin, "validate-dynamic-config", f).CombinedOutput()
		if err != nil || strings.Contains(string(out), "error:") || strings.Contains(string(out), "warning:") {
			t.Errorf("%s: %v\n%s", f, err, out)
		}
	}
	b, _ := os.ReadFile(c.dynamicConfigFile())
	if !strings.Contains(string(b), "http://127.0.0.1:17243/namespaces/{{.NamespaceName}}/nexus/callback") {
		t.Errorf("the cluster's dynamic config lacks its Nexus callback URL:\n%s", b)
	}
}

// TestMakefilePinsServerVersion keeps the Makefile's pin and ServerVersion
// (named in error messages) together.
func TestMakefilePinsServerVersion(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^TEMPORAL_SERVER_VERSION\s*:=\s*(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("the Makefile has no TEMPORAL_SERVER_VERSION")
	}
	if string(m[1]) != ServerVersion {
		t.Errorf("the Makefile pins TEMPORAL_SERVER_VERSION %s; ServerVersion is %s", m[1], ServerVersion)
	}
}
