package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
)

// TestIngressStartsBesideADamagedSecret restarts `siteops ingress` with two
// stored secrets of which one no longer opens (a row sealed under another
// key, as a restored backup leaves it), on both databases: it starts
// without --skip-checks, degraded and saying so; the receiver whose secret
// is fine gets its deliveries, the damaged one's get 503 (the sender
// retries until it is fixed), its metric stays raised, and doctor keeps
// failing.
func TestIngressStartsBesideADamagedSecret(t *testing.T) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			e := newEnv(t, d, simulator.Config{})
			const good, bad = "whsec_still_fine", "whsec_restored_from_elsewhere" //nolint:gosec // made up for the test
			for id, s := range map[string][2]string{"we_good": {"good", good}, "we_bad": {"bad", bad}} {
				if err := e.Store.PutSecret(t.Context(), id, s[0], agentsite.NewSigningSecret(s[1])); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := e.Store.DB().ExecContext(t.Context(), `UPDATE webhook_secrets SET key_id = 'k2-0123456789ab' WHERE endpoint_id = $1`, "we_bad"); err != nil {
				t.Fatal(err)
			}
			url, admin, log := e.startIngressProcessFlags(t, nil, "SITEOPS_SECRET_KEY="+testSecretKey())
			if !strings.Contains(log.String(), "STARTING DEGRADED") || !strings.Contains(log.String(), "we_bad") || strings.Contains(log.String(), "CHECK FAILED") {
				t.Errorf("the ingress's log does not say it starts degraded by we_bad:\n%s", log.String())
			}
			if code := deliver(t, url, "/webhooks/good", "evt_good_1", good); code != http.StatusOK {
				t.Errorf("a delivery to the receiver whose secret is fine = %d, want 200", code)
			}
			if code := deliver(t, url, "/webhooks/bad", "evt_bad_1", bad); code != http.StatusUnauthorized {
				t.Errorf("a delivery signed with the damaged secret = %d, want 401, as an unknown receiver gets (the sender retries)", code)
			}
			body := get(t, admin+"/readyz")
			if !strings.Contains(body, `"status":"degraded"`) || !strings.Contains(body, "we_bad") {
				t.Errorf("/readyz = %s; want degraded, naming we_bad", body)
			}
			if m := get(t, admin+"/metrics"); !strings.Contains(m, `siteops_webhook_unreadable_secrets{receiver="bad"} 1`) || !strings.Contains(m, `siteops_check_ok{check="secret_key"} 0`) {
				t.Errorf("the metrics do not show the damaged secret:\n%s", grepLines(m, "siteops_"))
			}
			out, code := e.run(t, []string{"SITEOPS_SECRET_KEY=" + testSecretKey()}, "doctor")
			if code == 0 || !strings.Contains(out, "we_bad") {
				t.Errorf("doctor: exit %d; want a failure naming we_bad\n%s", code, out)
			}
		})
	}
}

// get answers a GET's body.
func get(t *testing.T, url string) string {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
