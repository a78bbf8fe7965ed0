// Package deploy_test checks offline what can be checked of the deployment
// files: they parse, and every image, subcommand, port, probe path and
// environment variable they name exists in the code.
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
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/telemetry"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/webhookingress"
	"github.com/siteops/siteops/worker"
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
	walk(reflect.TypeOf(worker.Config{}))
	walk(reflect.TypeOf(webhookingress.Config{}))
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
	var out []map[string]any
	for _, part := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(part) == "" {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(part), &m); err != nil {
			t.Fatalf("%s does not parse: %v", path, err)
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

// served reports which of paths a role's HTTP server answers with 200.
func served(t *testing.T, role string, path string) bool {
	t.Helper()
	switch role {
	case "ingress":
		st := storetest.Open(t, store.SQLite)
		h := webhookingress.NewHandler(webhookingress.Options{Inbox: st, EnvSecrets: []string{"whsec_x"}})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code == http.StatusOK
	case "worker":
		tel, err := telemetry.Setup(t.Context(), telemetry.Options{Service: "deploy-test"})
		if err != nil {
			t.Fatal(err)
		}
		port, _ := devserver.FreePort()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		addr := "127.0.0.1:" + strconv.Itoa(port)
		go func() { _ = tel.ServeMetrics(ctx, addr) }()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if c, err := net.Dial("tcp", addr); err == nil {
				_ = c.Close()
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
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

func TestKubernetesManifests(t *testing.T) {
	env := knownEnv(t)
	files, _ := filepath.Glob("kubernetes/*.yaml")
	if len(files) < 4 {
		t.Fatalf("found %d manifests", len(files))
	}
	kinds := map[string]int{}
	for _, f := range files {
		for _, d := range docs(t, f) {
			kind, _ := d["kind"].(string)
			kinds[kind]++
			switch kind {
			case "ConfigMap", "Secret":
				for _, field := range []string{"data", "stringData"} {
					m, _ := d[field].(map[string]any)
					for k := range m {
						if !envKnown(env, k) {
							t.Errorf("%s: %s %s names %s, which no siteops config reads", f, kind, dig(d, "metadata", "name"), k)
						}
					}
				}
			case "Deployment":
				for _, c := range list(dig(d, "spec", "template", "spec", "containers")) {
					checkContainer(t, f, c.(map[string]any), env)
				}
			}
		}
	}
	for _, k := range []string{"Deployment", "Service", "PodDisruptionBudget", "ConfigMap", "Secret"} {
		if kinds[k] == 0 {
			t.Errorf("no %s among the manifests", k)
		}
	}
}

func checkContainer(t *testing.T, file string, c map[string]any, env map[string]string) {
	t.Helper()
	if img, _ := c["image"].(string); !strings.HasPrefix(img, "siteops:") {
		t.Errorf("%s: image %q is not the siteops image the Dockerfile builds", file, img)
	}
	args := list(c["args"])
	if len(args) == 0 {
		t.Fatalf("%s: container %v has no subcommand", file, c["name"])
	}
	role := args[0].(string)
	if !subcommandExists(t, role) {
		t.Errorf("%s: `siteops %s` does not exist", file, role)
	}
	ports := map[string]int{}
	for _, p := range list(c["ports"]) {
		pm := p.(map[string]any)
		ports[pm["name"].(string)] = int(pm["containerPort"].(float64))
	}
	want := map[string]int{"ingress": defaultPort(t, env["SITEOPS_INGRESS_ADDR"]), "worker": defaultPort(t, env["SITEOPS_METRICS_ADDR"])}[role]
	if !slices.Contains(mapsValues(ports), want) {
		t.Errorf("%s: %s declares ports %v; the code listens on %d by default", file, role, ports, want)
	}
	for _, probe := range []string{"livenessProbe", "readinessProbe"} {
		path, _ := dig(c, probe, "httpGet", "path").(string)
		port, _ := dig(c, probe, "httpGet", "port").(string)
		if path == "" {
			t.Errorf("%s: %s has no %s", file, role, probe)
			continue
		}
		if _, ok := ports[port]; !ok {
			t.Errorf("%s: %s %s uses port %q, which the container does not declare", file, role, probe, port)
		}
		if !served(t, role, path) {
			t.Errorf("%s: %s %s checks %s, which the %s does not serve", file, role, probe, path, role)
		}
	}
	if dig(c, "resources", "requests") == nil {
		t.Errorf("%s: %s has no resource requests", file, role)
	}
	for _, ef := range list(c["env"]) {
		if name, _ := dig(ef, "name").(string); !envKnown(env, name) {
			t.Errorf("%s: %s sets %s, which no siteops config reads", file, role, name)
		}
	}
}

func mapsValues(m map[string]int) []int {
	var out []int
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func TestComposeFile(t *testing.T) {
	env := knownEnv(t)
	d := docs(t, "compose.yaml")
	if len(d) != 1 {
		t.Fatalf("compose.yaml has %d documents", len(d))
	}
	services, _ := d[0]["services"].(map[string]any)
	for _, want := range []string{"postgres", "temporal", "worker", "ingress"} {
		if services[want] == nil {
			t.Errorf("compose.yaml has no %s service", want)
		}
	}
	for _, name := range []string{"worker", "ingress"} {
		svc := services[name].(map[string]any)
		cmd := list(svc["command"])
		if len(cmd) == 0 || !subcommandExists(t, cmd[0].(string)) {
			t.Errorf("compose %s: command %v is not a siteops subcommand", name, cmd)
		}
		envs, _ := svc["environment"].(map[string]any)
		if len(envs) == 0 {
			t.Errorf("compose %s: no environment (the YAML merge key did not resolve?)", name)
		}
		for k := range envs {
			if !envKnown(env, k) {
				t.Errorf("compose %s sets %s, which no siteops config reads", name, k)
			}
		}
	}
	if df, _ := dig(services["worker"], "build", "dockerfile").(string); df != "deploy/Dockerfile" {
		t.Errorf("compose builds from %q", df)
	}
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
	env := knownEnv(t)
	for _, port := range []int{defaultPort(t, env["SITEOPS_INGRESS_ADDR"]), defaultPort(t, env["SITEOPS_METRICS_ADDR"])} {
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
	for _, name := range []string{starter.SearchAttrSiteID, starter.SearchAttrOperator} {
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
