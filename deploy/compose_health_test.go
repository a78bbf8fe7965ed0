package deploy_test

import (
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// checkComposeTemporalCredentials checks that the siteops services and the
// setup job read the Temporal API key from the compose secret
// temporal_api_key (empty by default: compose-secrets.sh makes it so), as
// the Kubernetes pods read it from a file of the Secret; and that
// compose.temporal-tls.yaml hands the client certificate and key to the
// same services as compose secrets, as the pods mount the Secret
// siteops-temporal-tls.
func checkComposeTemporalCredentials(t *testing.T, services map[string]map[string]any) {
	t.Helper()
	clients := []string{"temporal-setup", "worker-a", "worker-b", "ingress"}
	for _, name := range clients {
		env := composeEnv(services[name])
		if f := env["TEMPORAL_API_KEY_FILE"]; f != "/run/secrets/temporal_api_key" || !slices.Contains(strs(list(services[name]["secrets"])), "temporal_api_key") {
			t.Errorf("compose %s: TEMPORAL_API_KEY_FILE=%q; want /run/secrets/temporal_api_key, the compose secret it mounts", name, f)
		}
	}
	if !regexp.MustCompile(`(?m)^put temporal-api-key ""$`).MatchString(read(t, composeSecrets)) {
		t.Errorf("%s does not make the Temporal API key file empty (no key: the cluster of compose.yaml takes none)", composeSecrets)
	}

	d := docs(t, "compose.temporal-tls.yaml")
	if len(d) != 1 {
		t.Fatalf("compose.temporal-tls.yaml has %d documents", len(d))
	}
	declared := map[string]string{} // secret → its file
	for name, v := range dig(d[0], "secrets").(map[string]any) {
		declared[name] = str(dig(v, "file"))
		if f := declared[name]; !strings.HasPrefix(f, "./secrets/") {
			t.Errorf("compose.temporal-tls.yaml: secret %s comes from %q; keep the files in deploy/secrets/, which git ignores", name, f)
		}
	}
	overridden, _ := d[0]["services"].(map[string]any)
	for _, name := range clients {
		svc, _ := overridden[name].(map[string]any)
		if svc == nil {
			t.Errorf("compose.temporal-tls.yaml does not give the client certificate to %s", name)
			continue
		}
		mounted := strs(list(svc["secrets"]))
		env := composeEnv(svc)
		for _, v := range []string{"TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH"} {
			if env[v] == "" {
				t.Errorf("compose.temporal-tls.yaml: %s does not set %s", name, v)
			}
		}
		for k, v := range env {
			if !temporalClientEnv()[k] {
				t.Errorf("compose.temporal-tls.yaml: %s sets %s, which neither siteops nor the temporal CLI reads", name, k)
			}
			secret, ok := strings.CutPrefix(v, "/run/secrets/")
			if strings.HasSuffix(k, "_PATH") && (!ok || declared[secret] == "" || !slices.Contains(mounted, secret)) {
				t.Errorf("compose.temporal-tls.yaml: %s reads %s=%s, which is not a secret it declares and mounts (%v)", name, k, v, mounted)
			}
		}
	}
	for name := range overridden {
		if services[name] == nil {
			t.Errorf("compose.temporal-tls.yaml overrides %s, which compose.yaml does not have", name)
		}
	}
}

// checkComposeHealthChecks checks that worker and ingress have health checks
// that work in their distroless image: the image's own binary running
// `siteops probe ROLE`, given the time the probe itself allows.
func checkComposeHealthChecks(t *testing.T, services map[string]map[string]any) {
	t.Helper()
	entry := regexp.MustCompile(`(?m)^ENTRYPOINT \["([^"]+)"\]`).FindStringSubmatch(read(t, "Dockerfile"))
	if entry == nil {
		t.Fatal("the Dockerfile has no exec-form ENTRYPOINT")
	}
	help, err := exec.Command(binary, "probe", "--help").Output()
	if err != nil {
		t.Fatalf("siteops probe --help: %v", err)
	}
	m := regexp.MustCompile(`--timeout duration.*\(default ([^)]+)\)`).FindSubmatch(help)
	if m == nil {
		t.Fatalf("siteops probe --help shows no --timeout default:\n%s", help)
	}
	probeTimeout, err := time.ParseDuration(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	for name, role := range siteopsServices {
		hc, _ := services[name]["healthcheck"].(map[string]any)
		if got, want := strs(list(dig(hc, "test"))), []string{"CMD", entry[1], "probe", role}; !slices.Equal(got, want) {
			t.Errorf("compose %s: health check %q; want %q (the image has no shell and no HTTP client)", name, got, want)
		}
		timeout, err := time.ParseDuration(str(dig(hc, "timeout")))
		if err != nil {
			timeout = 30 * time.Second // compose's default
		}
		if timeout <= probeTimeout {
			t.Errorf("compose %s: health check timeout %s; the probe waits up to %s for its answer, give it more", name, timeout, probeTimeout)
		}
	}
}
