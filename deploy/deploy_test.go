// Package deploy_test checks offline what can be checked of the deployment
// files (the compose file, the Kubernetes manifests, both Dockerfiles and
// the Temporal scripts): they parse, they describe the same shape, and every
// image, subcommand, port, probe path and environment variable they name
// exists in the code or in the Temporal server configuration the project
// keeps. Nothing here needs Docker or a cluster; the one check that renders
// the server configuration uses the pinned temporal-server when it is built
// (make cluster-tools) and is skipped otherwise.
package deploy_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/ingress"
	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/telemetry"
	"github.com/siteops/siteops/wiring"
)

// knownEnv collects the envconfig variables of the process configs, with
// their defaults.
func knownEnv(t *testing.T) map[string]string {
	t.Helper()
	env := map[string]string{}
	var walk func(rt reflect.Type)
	walk = func(rt reflect.Type) {
		for i := range rt.NumField() {
			f := rt.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			if name := f.Tag.Get("envconfig"); name != "" {
				env[name] = f.Tag.Get("default")
			}
		}
	}
	walk(reflect.TypeOf(wiring.WorkerConfig{}))
	walk(reflect.TypeOf(wiring.IngressConfig{}))
	walk(reflect.TypeOf(config.Log{}))
	for _, name := range wiring.TemporalEnvironment {
		env[name] = ""
	}
	// Every secret may be given as a file instead (config.LoadSecretFiles).
	for _, name := range config.SecretVariables {
		env[name+config.FileSuffix] = ""
	}
	// Read by the Go runtime itself: the memory limit the collector works
	// to stay under (set for the ingress in deploy/, see the README).
	env["GOMEMLIMIT"] = ""
	return env
}

func envKnown(env map[string]string, name string) bool {
	_, ok := env[name]
	return ok || strings.HasPrefix(name, "OTEL_")
}

// docs reads every YAML document of a file as generic JSON-shaped data.
func docs(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseDocs(t, path, string(b))
}

// parseDocs reads every YAML document of text (from where, for messages).
func parseDocs(t *testing.T, where, text string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, part := range regexp.MustCompile(`(?m)^---\s*$`).Split(text, -1) {
		if strings.TrimSpace(part) == "" {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(part), &m); err != nil {
			t.Fatalf("%s does not parse: %v", where, err)
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

func dig(m any, path ...string) any {
	for _, p := range path {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[p]
	}
	return m
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// str is v when it is a string, else "".
func str(v any) string {
	s, _ := v.(string)
	return s
}

// num is v when it is a number (JSON-shaped YAML has float64), else 0.
func num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

// read returns the content of a file of the deploy directory.
func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// binary is the siteops binary, built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "siteops-deploy-test")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "siteops")
	if out, err := exec.Command("go", "build", "-o", binary, "../cmd/siteops").CombinedOutput(); err != nil {
		panic("building siteops: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func subcommandExists(t *testing.T, name string) bool {
	t.Helper()
	return exec.Command(binary, name, "--help").Run() == nil
}

// served reports whether a role's HTTP server answers path with 200: for
// "ingress" its admin address (where the probes go), for "ingress-webhooks"
// its public webhook port.
func served(t *testing.T, role string, path string) bool {
	t.Helper()
	switch role {
	case "ingress", "ingress-webhooks":
		st := storetest.Open(t, store.SQLite)
		h := ingress.NewHandler(ingress.Options{Inbox: st, EnvSecrets: []string{"whsec_x"}})
		rec := httptest.NewRecorder()
		if role == "ingress" {
			h.Admin().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		} else {
			h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		}
		return rec.Code == http.StatusOK
	case "worker":
		tel, err := telemetry.Setup(t.Context(), telemetry.Options{Service: "deploy-test"})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		addr := ln.Addr().String()
		go func() { _ = tel.ServeMetrics(ctx, ln) }()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	return false
}

func defaultPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("default address %q: %v", addr, err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if _, err := os.Stat("../cmd/siteops/main.go"); err != nil || !strings.Contains(s, "./cmd/siteops") {
		t.Errorf("the Dockerfile does not build ./cmd/siteops")
	}
	if !strings.Contains(s, "USER nonroot") || !strings.Contains(s, "CGO_ENABLED=0") || strings.Count(s, "FROM ") < 2 {
		t.Errorf("the Dockerfile is not a multi-stage static non-root build")
	}
	// BuildKit reads <Dockerfile>.dockerignore beside it: without it the
	// context of the repository root carries the pinned tools.
	if ignore := read(t, "Dockerfile.dockerignore"); !regexp.MustCompile(`(?m)^\.tools$`).MatchString(ignore) {
		t.Errorf("Dockerfile.dockerignore does not keep .tools out of the build context")
	}
	env := knownEnv(t)
	for _, port := range []int{defaultPort(t, env["SITEOPS_INGRESS_ADDR"]), defaultPort(t, env["SITEOPS_INGRESS_ADMIN_ADDR"]), defaultPort(t, env["SITEOPS_METRICS_ADDR"])} {
		if !regexp.MustCompile(`(?m)^EXPOSE .*\b` + strconv.Itoa(port) + `\b`).MatchString(s) {
			t.Errorf("the Dockerfile does not EXPOSE %d", port)
		}
	}
}

func TestSearchAttributeSetup(t *testing.T) {
	b, err := os.ReadFile("temporal-setup.sh")
	if err != nil {
		t.Fatal(err)
	}
	for name := range starter.SearchAttributes {
		if !strings.Contains(string(b), "--name "+name+" --type Keyword") {
			t.Errorf("temporal-setup.sh does not register %s", name)
		}
		if devserver.SearchAttributes[name] != "Keyword" {
			t.Errorf("the dev server does not register %s", name)
		}
	}
}

// TestREADMEMatchesTheCode checks that the README names every variable the
// configs read and every subcommand the binary has.
func TestREADMEMatchesTheCode(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for name := range knownEnv(t) {
		if !strings.Contains(readme, "`"+name+"`") {
			t.Errorf("README does not document %s", name)
		}
	}
	out, err := exec.Command(binary, "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	inCommands := false
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "Available Commands:") {
			inCommands = true
			continue
		}
		if inCommands && strings.TrimSpace(line) == "" {
			break
		}
		if f := strings.Fields(line); inCommands && len(f) > 0 && f[0] != "help" && f[0] != "completion" {
			if !strings.Contains(readme, "siteops "+f[0]) {
				t.Errorf("README does not show `siteops %s`", f[0])
			}
		}
	}
}
