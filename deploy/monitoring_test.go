package deploy_test

import (
	"net"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/siteops/siteops/internal/siteopstest"
)

// monitoringConfigMaps are the ConfigMaps the Kubernetes manifests make of
// the monitoring files: each one's folder and files.
var monitoringConfigMaps = map[string]struct {
	dir   string
	files []string
}{
	"siteops-prometheus-rules":  {"prometheus", []string{"siteops-recording.yaml", "siteops-alerts.yaml"}},
	"siteops-grafana-dashboard": {"grafana", []string{"siteops.json"}},
}

// TestMonitoringKustomization checks that deploy/kubernetes applies the
// rules and the dashboard as ConfigMaps made from the very files compose
// mounts (kustomizations in deploy/prometheus and deploy/grafana that the
// Kubernetes kustomization lists), and, where kubectl is installed,
// renders the kustomization and compares the ConfigMaps with the files.
func TestMonitoringKustomization(t *testing.T) {
	listed := strs(list(kustomization(t, "kubernetes")["resources"]))
	for name, cm := range monitoringConfigMaps {
		if !slices.Contains(listed, "../"+cm.dir) {
			t.Errorf("kubernetes/kustomization.yaml does not list ../%s, which makes the ConfigMap %s", cm.dir, name)
		}
		k := kustomization(t, cm.dir)
		found := false
		for _, g := range list(k["configMapGenerator"]) {
			if str(dig(g, "name")) != name {
				continue
			}
			found = true
			if files := strs(list(dig(g, "files"))); !slices.Equal(files, cm.files) {
				t.Errorf("%s/kustomization.yaml makes %s of %v; want %v", cm.dir, name, files, cm.files)
			}
		}
		if !found || dig(k, "generatorOptions", "disableNameSuffixHash") != true {
			t.Errorf("%s/kustomization.yaml does not make the ConfigMap %s under that fixed name", cm.dir, name)
		}
	}
	if v := str(dig(kustomization(t, "grafana"), "generatorOptions", "labels", "grafana_dashboard")); v != "1" {
		t.Errorf("grafana/kustomization.yaml labels the dashboard grafana_dashboard=%q; Grafana's dashboard sidecar looks for \"1\"", v)
	}

	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		siteopstest.Missing(t, siteopstest.RequireKubectl, "kubectl is not installed: the rendered ConfigMaps were not compared with the files (the kustomizations were checked as files)")
	}
	out, err := exec.Command(kubectl, "kustomize", "kubernetes").Output()
	if err != nil {
		t.Fatalf("kubectl kustomize kubernetes: %v", err)
	}
	rendered := map[string]map[string]any{}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("kubectl kustomize kubernetes: %v", err)
		}
		if m["kind"] == "ConfigMap" {
			rendered[str(dig(m, "metadata", "name"))] = m
		}
	}
	for name, cm := range monitoringConfigMaps {
		m := rendered[name]
		if m == nil {
			t.Errorf("kubectl kustomize kubernetes renders no ConfigMap %s", name)
			continue
		}
		if ns := str(dig(m, "metadata", "namespace")); ns != "siteops" {
			t.Errorf("ConfigMap %s is in the namespace %q, want siteops", name, ns)
		}
		for _, f := range cm.files {
			if got := str(dig(m, "data", f)); got != read(t, filepath.Join(cm.dir, f)) {
				t.Errorf("ConfigMap %s: its key %s differs from %s/%s", name, f, cm.dir, f)
			}
		}
	}
}

// TestComposeMonitoring checks compose's Prometheus and Grafana: the rule
// files Prometheus loads are the ones in deploy/prometheus, mounted where
// its configuration looks; it scrapes the ports the workers and the
// ingress replicas serve /metrics on; Grafana is provisioned with that
// Prometheus and the dashboard file.
func TestComposeMonitoring(t *testing.T) {
	services := composeServices(t)
	prom, graf := services["prometheus"], services["grafana"]
	if prom == nil || graf == nil {
		t.Fatal("compose.yaml has no prometheus or no grafana service")
	}
	mounts := func(svc map[string]any) map[string]string {
		out := map[string]string{} // container path → host path
		for _, v := range strs(list(svc["volumes"])) {
			parts := strings.Split(v, ":")
			if len(parts) >= 2 {
				out[parts[1]] = parts[0]
			}
		}
		return out
	}
	// inHost maps a path in a container to the file of deploy/ mounted
	// there ("" when none is).
	inHost := func(m map[string]string, p string) string {
		for c, h := range m {
			if rel, ok := strings.CutPrefix(p, c); ok && (rel == "" || strings.HasPrefix(rel, "/")) && strings.HasPrefix(h, "./") {
				return filepath.Join(strings.TrimPrefix(h, "./"), rel)
			}
		}
		return ""
	}

	pm := mounts(prom)
	var config string
	for _, arg := range strs(list(prom["command"])) {
		if v, ok := strings.CutPrefix(arg, "--config.file="); ok {
			config = inHost(pm, v)
		}
	}
	if config != promConfig {
		t.Fatalf("compose prometheus reads its configuration from %q, not %s", config, promConfig)
	}
	var cfg struct {
		RuleFiles     []string `json:"rule_files"`
		ScrapeConfigs []struct {
			JobName      string `json:"job_name"`
			DNSSDConfigs []struct {
				Names []string `json:"names"`
				Port  int      `json:"port"`
			} `json:"dns_sd_configs"`
		} `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal([]byte(read(t, promConfig)), &cfg); err != nil {
		t.Fatal(err)
	}
	var loaded []string
	for _, f := range cfg.RuleFiles {
		loaded = append(loaded, inHost(pm, f))
	}
	if want := []string{recordingRules, alertingRules}; !slices.Equal(loaded, want) {
		t.Errorf("compose prometheus loads the rule files %v (from %v); want %v", loaded, cfg.RuleFiles, want)
	}
	want := map[string]int{
		"worker-a": defaultPort(t, composeEnv(services["worker-a"])["SITEOPS_METRICS_ADDR"]),
		"worker-b": defaultPort(t, composeEnv(services["worker-b"])["SITEOPS_METRICS_ADDR"]),
		"ingress":  defaultPort(t, composeEnv(services["ingress"])["SITEOPS_INGRESS_ADMIN_ADDR"]),
	}
	scraped := map[string]int{}
	for _, sc := range cfg.ScrapeConfigs {
		for _, sd := range sc.DNSSDConfigs {
			for _, n := range sd.Names {
				scraped[n] = sd.Port
			}
		}
	}
	for svc, port := range want {
		if scraped[svc] != port {
			t.Errorf("%s scrapes %s on port %d; it serves /metrics on %d", promConfig, svc, scraped[svc], port)
		}
	}

	gm := mounts(graf)
	provisioning := inHost(gm, "/etc/grafana/provisioning")
	if provisioning == "" {
		t.Fatal("compose grafana mounts no provisioning folder of deploy/")
	}
	var ds struct {
		Datasources []struct {
			Type string `json:"type"`
			URL  string `json:"url"`
		} `json:"datasources"`
	}
	if err := yaml.Unmarshal([]byte(read(t, filepath.Join(provisioning, "datasources", "prometheus.yaml"))), &ds); err != nil {
		t.Fatal(err)
	}
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("grafana's data sources are %+v; want the compose Prometheus at http://prometheus:9090", ds.Datasources)
	}
	var dash struct {
		Providers []struct {
			Options struct {
				Path string `json:"path"`
			} `json:"options"`
		} `json:"providers"`
	}
	if err := yaml.Unmarshal([]byte(read(t, filepath.Join(provisioning, "dashboards", "siteops.yaml"))), &dash); err != nil {
		t.Fatal(err)
	}
	if len(dash.Providers) != 1 || inHost(gm, path.Join(dash.Providers[0].Options.Path, "siteops.json")) != dashboardFile {
		t.Errorf("grafana loads dashboards from %+v, where compose does not mount %s", dash.Providers, dashboardFile)
	}
	for _, p := range []map[string]any{prom, graf} {
		for _, port := range strs(list(p["ports"])) {
			if host, _, _ := strings.Cut(port, ":"); net.ParseIP(host) == nil || !net.ParseIP(host).IsLoopback() {
				t.Errorf("compose publishes %s on %q; Prometheus and Grafana have no login here: loopback only", port, host)
			}
		}
	}
}
