package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/internal/testcerts"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
)

// TestAPIKeyReachesTheServer runs the worker and the CLI against a TLS
// front of the dev server with TEMPORAL_API_KEY set, as Temporal Cloud is
// reached: the front sees the key as `authorization: Bearer <key>` on
// every call, and the key shows in no output of siteops.
func TestAPIKeyReachesTheServer(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	certs, err := testcerts.Write(t.TempDir(), "cloud")
	if err != nil {
		t.Fatal(err)
	}
	proxy := startAuthProxy(t, certs.ServerCert, certs.ServerKey, e.Address)
	const key = "tmprl_e2e_api_key_7f3c9a" //nolint:gosec // a made-up key for the test
	conn := []string{"TEMPORAL_ADDRESS=" + proxy.addr, "TEMPORAL_API_KEY=" + key, "TEMPORAL_TLS_SERVER_CA_CERT_PATH=" + certs.CA,
		"AGENTSITE_BASE_URL=" + e.SimURL, "AGENTSITE_API_KEY=" + apiKey}

	workerLog := &siteopstest.Log{}
	w := exec.Command(binary, "worker")
	w.Env = append(e.cliEnv(), append(conn, "SITEOPS_METRICS_ADDR=")...)
	w.Stdout, w.Stderr = workerLog, workerLog
	w.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Process.Signal(syscall.SIGTERM); _, _ = w.Process.Wait() })

	out, err := e.siteopsWith(t, conn, "onboard", "-f", "../examples/bayside-dental.json", "--wait", "--timeout", "90s")
	if err != nil || !strings.Contains(out, "published") {
		t.Fatalf("onboard through the TLS front with an API key: %v\n%s", err, out)
	}
	out2, err := e.siteopsWith(t, conn, "doctor")
	if !strings.Contains(out2, "ok    temporal") {
		t.Errorf("doctor through the front: %v\n%s", err, out2)
	}
	matching, calls := proxy.sawAuthorization("Bearer " + key)
	if calls == 0 || matching != calls {
		t.Errorf("%d of %d calls carried the API key as authorization; others: %v", matching, calls, proxy.otherAuthorizations("Bearer "+key))
	}
	for what, text := range map[string]string{"onboard": out, "doctor": out2, "worker log": workerLog.String()} {
		if strings.Contains(text, key) {
			t.Errorf("the API key appears in the %s", what)
		}
	}
	if !strings.Contains(workerLog.String(), "API key") || !strings.Contains(workerLog.String(), "(TLS") {
		t.Errorf("the worker does not say how it connects:\n%s", workerLog.String())
	}
}

// TestConnectionErrorsNameTheSetting checks that a wrong connection setting
// fails in one line that names the setting to fix, with the documented
// exit code, and that the flags and profiles of the temporal CLI work.
func TestConnectionErrorsNameTheSetting(t *testing.T) {
	t.Parallel() // it mostly waits (main_test.go)
	e := newEnv(t, store.SQLite, simulator.Config{})
	dir := t.TempDir()
	certs, err := testcerts.Write(dir, "front")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testcerts.Write(dir, "other")
	if err != nil {
		t.Fatal(err)
	}
	proxy := startAuthProxy(t, certs.ServerCert, certs.ServerKey, e.Address)
	profile := filepath.Join(dir, "temporal.toml")
	toml := "[profile.staging]\naddress = \"" + e.Address + "\"\nnamespace = \"" + e.Namespace + "\"\n"
	if err := os.WriteFile(profile, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		env      []string
		args     []string
		wantCode int
		want     []string
	}{
		{"wrong CA", []string{"TEMPORAL_ADDRESS=" + proxy.addr, "TEMPORAL_TLS=true", "TEMPORAL_TLS_SERVER_CA_CERT_PATH=" + other.CA},
			nil, 4, []string{"TEMPORAL_TLS_SERVER_CA_CERT_PATH"}},
		{"certificate without its key", []string{"TEMPORAL_ADDRESS=" + proxy.addr, "TEMPORAL_TLS_SERVER_CA_CERT_PATH=" + certs.CA, "TEMPORAL_TLS_CLIENT_CERT_PATH=" + certs.ClientCert},
			nil, 2, []string{"TEMPORAL_TLS_CLIENT_KEY_PATH"}},
		{"key file missing", []string{"TEMPORAL_ADDRESS=" + proxy.addr, "TEMPORAL_TLS_SERVER_CA_CERT_PATH=" + certs.CA, "TEMPORAL_TLS_CLIENT_CERT_PATH=" + certs.ClientCert, "TEMPORAL_TLS_CLIENT_KEY_PATH=" + filepath.Join(dir, "nope.pem")},
			nil, 2, []string{"TEMPORAL_TLS_CLIENT_KEY_PATH", "no such file"}},
		{"plaintext to a TLS server", []string{"TEMPORAL_ADDRESS=" + proxy.addr},
			nil, 5, []string{"TEMPORAL_TLS=true"}},
		{"TLS to a plaintext server", []string{"TEMPORAL_TLS=true"},
			nil, 5, []string{"does not speak TLS", "TEMPORAL_TLS"}},
		{"nothing listening", []string{"TEMPORAL_ADDRESS=127.0.0.1:1"},
			nil, 5, []string{"127.0.0.1:1", "TEMPORAL_ADDRESS"}},
		{"unknown profile", []string{"TEMPORAL_CONFIG_FILE=" + profile},
			[]string{"--profile", "prod"}, 2, []string{`"prod"`, profile}},
		{"--address wins over TEMPORAL_ADDRESS", []string{"TEMPORAL_ADDRESS=127.0.0.1:1"},
			[]string{"--address", e.Address}, 3, []string{"no workflow with ID onboarding/none"}},
		{"a profile of the temporal CLI", []string{"TEMPORAL_CONFIG_FILE=" + profile, "TEMPORAL_ADDRESS=", "TEMPORAL_NAMESPACE="},
			[]string{"--profile", "staging"}, 3, []string{"no workflow with ID onboarding/none"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			out, code := e.run(t, tc.env, append([]string{"status", "onboarding/none"}, tc.args...)...)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d\n%s", code, tc.wantCode, out)
			}
			if lines := strings.Count(strings.TrimSpace(out), "\n") + 1; lines != 1 {
				t.Errorf("%d lines, want one:\n%s", lines, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("the message does not name %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "BEGIN") || strings.Contains(out, "PRIVATE") {
				t.Errorf("the message shows key material:\n%s", out)
			}
			if took := time.Since(start); took > 30*time.Second {
				t.Errorf("took %s", took)
			}
		})
	}
}
