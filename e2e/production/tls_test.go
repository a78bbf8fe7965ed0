package production

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/siteops/siteops/internal/testcerts"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// TestMutualTLS runs the siteops worker and CLI against the cluster's
// frontend, which demands a client certificate signed by its CA: with the
// certificate an onboarding goes through; without it, with a certificate
// from another CA, or trusting the wrong CA, every command fails in one
// line naming the setting to fix, and no key material is printed.
func TestMutualTLS(t *testing.T) {
	world.Need(t)
	_, simURL := newSimulator(t, simulator.Config{})
	dbURL := storetest.PostgresSchemaURL(t)
	// The store made and migrated up front, as a worker that ran before
	// would have: onboard, started beside the worker here, creates none.
	st, err := store.Open(t.Context(), dbURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	db := []string{"SITEOPS_DATABASE_URL=" + dbURL, "AGENTSITE_BASE_URL=" + simURL, "AGENTSITE_API_KEY=" + apiKey,
		"SITEOPS_TASK_QUEUE=tls-" + t.Name(), "SITEOPS_METRICS_ADDR="}
	env := append(clusterEnv(), db...)

	w := startProc(t, "worker", env, "worker")
	out, code := siteops(t, env, "onboard", "-f", "../../examples/bayside-dental.json", "--wait", "--timeout", "2m")
	if code != 0 || !strings.Contains(out, "published") {
		t.Fatalf("onboard over mutual TLS: exit %d\n%s\nworker log:\n%s", code, out, w.log.String())
	}
	if out, code := siteops(t, env, "doctor"); !strings.Contains(out, "ok    temporal") || !strings.Contains(out, "ok    search attributes") {
		t.Errorf("doctor over mutual TLS: exit %d\n%s", code, out)
	} else if !strings.Contains(out, "database connections") || !strings.Contains(out, "1 worker(s) [20]") {
		// The store is the cluster's PostgreSQL: the budget counts the
		// worker registered above with its pool (ok or warn, by what
		// else the shared test server has open).
		t.Errorf("doctor's connection budget does not count the running worker's pool:\n%s", out)
	}
	if !strings.Contains(w.log.String(), "mutual TLS") {
		t.Errorf("the worker does not say it uses mutual TLS:\n%s", w.log.String())
	}

	other, err := testcerts.Write(t.TempDir(), "stranger")
	if err != nil {
		t.Fatal(err)
	}
	without := func(env []string, keys ...string) []string {
		var out []string
		for _, kv := range env {
			keep := true
			for _, k := range keys {
				if strings.HasPrefix(kv, k+"=") {
					keep = false
				}
			}
			if keep {
				out = append(out, kv)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		env      []string
		wantCode int
		want     string
	}{
		{"no client certificate", without(env, "TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH"), 4,
			"set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH"},
		{"a certificate without its key", without(env, "TEMPORAL_TLS_CLIENT_KEY_PATH"), 2, "TEMPORAL_TLS_CLIENT_KEY_PATH"},
		{"a key that is not there", append(without(env, "TEMPORAL_TLS_CLIENT_KEY_PATH"), "TEMPORAL_TLS_CLIENT_KEY_PATH="+filepath.Join(t.TempDir(), "gone.pem")), 2,
			"TEMPORAL_TLS_CLIENT_KEY_PATH"},
		{"a certificate the cluster does not trust", append(without(env, "TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH"),
			"TEMPORAL_TLS_CLIENT_CERT_PATH="+other.ClientCert, "TEMPORAL_TLS_CLIENT_KEY_PATH="+other.ClientKey), 4, "TEMPORAL_TLS_CLIENT_CERT_PATH"},
		{"the wrong CA", append(without(env, "TEMPORAL_TLS_SERVER_CA_CERT_PATH"), "TEMPORAL_TLS_SERVER_CA_CERT_PATH="+other.CA), 4,
			"TEMPORAL_TLS_SERVER_CA_CERT_PATH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := siteops(t, tc.env, "status", "onboarding/bayside-dental")
			if code != tc.wantCode || !strings.Contains(out, tc.want) || strings.Count(strings.TrimSpace(out), "\n") > 0 {
				t.Errorf("exit %d (want %d), want one line naming %q:\n%s", code, tc.wantCode, tc.want, out)
			}
			if strings.Contains(out, "PRIVATE KEY") || strings.Contains(out, "BEGIN CERTIFICATE") {
				t.Errorf("key material in the output:\n%s", out)
			}
		})
	}
	w.stop()
	if strings.Contains(w.log.String(), "PRIVATE KEY") || strings.Contains(w.log.String(), apiKey) {
		t.Errorf("the worker logged key material or the API key")
	}
}
