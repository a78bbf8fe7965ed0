package deploy_test

import (
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/wiring"
)

// TestKubernetesMutualTLS checks that the self-hosted frontend of
// deploy/kubernetes/temporal requires client certificates, and that every
// party holds what the handshake needs: the server configuration turns
// requireClientAuth on with a client CA; every Temporal service mounts the
// certificate, key and CAs the ConfigMap names (the services' own clients
// of the frontend present them); the name the services verify is the one
// siteops dials; and every siteops pod that talks to Temporal presents a
// client certificate from a Secret it must have (not optional).
func TestKubernetesMutualTLS(t *testing.T) {
	tmpl := read(t, filepath.Join("temporal", "config", "cluster.yaml"))
	if !regexp.MustCompile(`\{\{- if \$tlsClientCA \}\}(?:[^{]|\{[^{])*requireClientAuth: true`).MatchString(tmpl) {
		t.Fatalf("cluster.yaml does not turn requireClientAuth on when TEMPORAL_SERVER_TLS_CLIENT_CA is set")
	}
	tms := manifests(t, temporalDir)
	tcm := configMapData(tms)["temporal-server"]
	tsecrets := secretKeys(t, tms)
	serverFiles := []string{"TEMPORAL_SERVER_TLS_CERT", "TEMPORAL_SERVER_TLS_KEY", "TEMPORAL_SERVER_TLS_CLIENT_CA", "TEMPORAL_SERVER_TLS_CA"}
	for _, k := range append(serverFiles, "TEMPORAL_SERVER_TLS_SERVER_NAME") {
		if tcm[k] == "" {
			t.Errorf("the ConfigMap temporal-server does not set %s: the frontend would not require client certificates", k)
		}
	}
	for _, s := range temporalServices {
		d := mustFind(t, tms, "Deployment", "temporal-"+s)
		for _, c := range containers(d, false) {
			mounts := secretMounts(d, c)
			for _, k := range serverFiles {
				vol, key, ok := mounts.file(tcm[k])
				if !ok || !tsecrets[vol.secret][key] {
					t.Errorf("%s: %s=%s is no file of a Secret it mounts (and the examples show)", d, k, tcm[k])
				}
				if optional, _ := dig(volumeOf(d, vol.name), "secret", "optional").(bool); optional {
					t.Errorf("%s: the Secret volume %s is optional; without it the frontend cannot start its TLS", d, vol.name)
				}
			}
		}
	}

	// siteops dials the name the frontend's certificate carries.
	ms := kubernetesObjects(t)
	cm := configMapData(ms)["siteops"]
	host, _, err := net.SplitHostPort(cm["TEMPORAL_ADDRESS"])
	if err != nil || host != tcm["TEMPORAL_SERVER_TLS_SERVER_NAME"] {
		t.Errorf("siteops dials %q; the frontend's certificate name (TEMPORAL_SERVER_TLS_SERVER_NAME) is %q", cm["TEMPORAL_ADDRESS"], tcm["TEMPORAL_SERVER_TLS_SERVER_NAME"])
	}
	if cm["TEMPORAL_TLS"] != "true" {
		t.Errorf("the ConfigMap siteops: TEMPORAL_TLS=%q; the frontend serves TLS only", cm["TEMPORAL_TLS"])
	}
	// The server's role policy is the catalogue's and the relay's, for
	// siteops' namespace and task queue.
	for k, want := range wiring.TemporalPolicy(cm["TEMPORAL_NAMESPACE"], cm["SITEOPS_TASK_QUEUE"]) {
		if got := tcm[k]; got != want {
			t.Errorf("the ConfigMap temporal-server sets %s=%q; wiring.TemporalPolicy gives %q", k, got, want)
		}
	}
	clientFiles := []string{"TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_SERVER_CA_CERT_PATH"}
	secrets := secretKeys(t, ms)
	for _, m := range ms {
		if !isWorkload(m) {
			continue
		}
		component := str(podLabels(m)["app.kubernetes.io/component"])
		if !slices.Contains([]string{"worker", "ingress", "temporal-setup", "doctor"}, component) {
			continue
		}
		for _, c := range containers(m, false) {
			mounts := secretMounts(m, c)
			for _, k := range clientFiles {
				vol, key, ok := mounts.file(cm[k])
				if cm[k] == "" || !ok || !secrets[vol.secret][key] {
					t.Errorf("%s: %s=%q is no file of a Secret it mounts (and the examples show)", m, k, cm[k])
					continue
				}
				if optional, _ := dig(volumeOf(m, vol.name), "secret", "optional").(bool); optional {
					t.Errorf("%s: the client certificate's Secret volume %s is optional; the frontend refuses a client without one", m, vol.name)
				}
				// The internet-facing ingress presents its own certificate,
				// which the server keeps to signals; every other pod the
				// worker's.
				want := "siteops-temporal-tls"
				if component == "ingress" {
					want = "siteops-ingress-temporal-tls"
				}
				if vol.secret != want {
					t.Errorf("%s: %s is a file of the Secret %s; want %s", m, k, vol.secret, want)
				}
			}
		}
	}
}

// volumeOf returns the volume of m's pods named name.
func volumeOf(m manifest, name string) any {
	for _, v := range list(podSpec(m)["volumes"]) {
		if str(dig(v, "name")) == name {
			return v
		}
	}
	return nil
}

// checkHealthCommand checks an exec probe of the frontend: the temporal
// CLI's cluster health check on its own gRPC port over mutual TLS, with
// the certificate the services' own clients present, the CA of the
// frontend's certificate and the name it carries. With the pinned CLI
// built, it also checks that the CLI has every flag the probe passes.
func checkHealthCommand(t *testing.T, d manifest, probe string, cmd []string, cm map[string]string, grpcPort int) {
	t.Helper()
	if len(cmd) < 4 || !slices.Equal(cmd[:4], []string{"temporal", "operator", "cluster", "health"}) {
		t.Errorf("%s: its %s runs %v; want `temporal operator cluster health ...`", d, probe, cmd)
		return
	}
	cert := cm["TEMPORAL_SERVER_TLS_INTERNAL_CERT"]
	key := cm["TEMPORAL_SERVER_TLS_INTERNAL_KEY"]
	if cert == "" {
		cert, key = cm["TEMPORAL_SERVER_TLS_CERT"], cm["TEMPORAL_SERVER_TLS_KEY"]
	}
	want := map[string]string{
		"--address":         "127.0.0.1:" + strconv.Itoa(grpcPort),
		"--tls-cert-path":   cert,
		"--tls-key-path":    key,
		"--tls-ca-path":     cm["TEMPORAL_SERVER_TLS_CA"],
		"--tls-server-name": cm["TEMPORAL_SERVER_TLS_SERVER_NAME"],
	}
	got := map[string]string{}
	for i := 4; i+1 < len(cmd); i += 2 {
		got[cmd[i]] = cmd[i+1]
	}
	for flag, w := range want {
		if got[flag] != w || w == "" {
			t.Errorf("%s: its %s passes %s %q; want %q", d, probe, flag, got[flag], w)
		}
	}
	cli, err := devserver.FindCLI()
	if err != nil {
		siteopstest.Missing(t, siteopstest.RequireTemporal, "the probe's flags were not checked against the temporal CLI: %v", err)
	}
	help, err := exec.Command(cli, "operator", "cluster", "health", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("temporal operator cluster health --help: %v\n%s", err, help)
	}
	for flag := range want {
		if !strings.Contains(string(help), flag+" ") {
			t.Errorf("%s: its %s passes %s, which the pinned temporal CLI does not have", d, probe, flag)
		}
	}
}
