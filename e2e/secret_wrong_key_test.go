package e2e

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// TestSecretRetireWithAnotherKeyChangesNothing is issue 33, item 1, with
// the binary, on both databases: `siteops secret retire --endpoint we_1
// --at 30m` with a SITEOPS_SECRET_KEY that did not seal the secret exits 4
// with one line that names the problem and leaves the row byte for byte
// as it was (and so does `siteops secret rekey` whose keys open nothing,
// exit 4); without SITEOPS_SECRET_KEY it exits 2 asking for the key that
// sealed it, never advising a new one; the right key then retires it and
// still opens it. Doctor and an ingress started with the other key say
// that none of the stored secrets decrypts, naming it, never that all of
// them do.
func TestSecretRetireWithAnotherKeyChangesNothing(t *testing.T) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			e := newEnv(t, d, simulator.Config{})
			const secret = "whsec_sealed_by_the_right_key" //nolint:gosec // made up for the test
			if err := e.Store.PutSecret(t.Context(), "we_1", "main", agentsite.NewSigningSecret(secret)); err != nil {
				t.Fatal(err)
			}
			wrongKey := []string{"SITEOPS_SECRET_KEY=" + base64.StdEncoding.EncodeToString([]byte("ffffffffffffffffffffffffffffffff"))}
			rightKey := []string{"SITEOPS_SECRET_KEY=" + testSecretKey()}
			before := storetest.SecretRows(t, e.Store.DB())

			out, code := e.run(t, wrongKey, "secret", "retire", "--endpoint", "we_1", "--at", "30m")
			storetest.SameSecretRows(t, "secret retire with another key", before, storetest.SecretRows(t, e.Store.DB()))
			line := strings.TrimSpace(out)
			if code != 4 || strings.Count(line, "\n") > 0 || !strings.Contains(line, "we_1") || !strings.Contains(line, "nothing was changed") ||
				!strings.Contains(line, "SITEOPS_SECRET_KEY") || strings.Contains(line, "retires at") {
				t.Errorf("secret retire with another key: exit %d\n%s\nwant exit 4 and one line naming we_1, the key and that nothing changed", code, out)
			}

			out, code = e.run(t, []string{"SITEOPS_SECRET_KEY="}, "secret", "retire", "--endpoint", "we_1", "--at", "30m")
			storetest.SameSecretRows(t, "secret retire without a key", before, storetest.SecretRows(t, e.Store.DB()))
			if code != 2 || strings.Contains(out, "openssl") || !strings.Contains(out, "SITEOPS_SECRET_KEY_FILE") || !strings.Contains(out, "the worker and the ingress run with") {
				t.Errorf("secret retire without a key: exit %d\n%s\nwant exit 2 asking for the key that sealed the secret, never advising a new one", code, out)
			}

			out, code = e.run(t, append(wrongKey, "SITEOPS_OLD_SECRET_KEY="+base64.StdEncoding.EncodeToString([]byte("0000000000000000000000000000000x"))), "secret", "rekey")
			storetest.SameSecretRows(t, "secret rekey with keys that open nothing", before, storetest.SecretRows(t, e.Store.DB()))
			if code != 4 || !strings.Contains(out, "re-encrypted 0") || !strings.Contains(out, "decrypt with neither") || !strings.Contains(out, "we_1") {
				t.Errorf("secret rekey with keys that open nothing: exit %d\n%s\nwant exit 4 naming we_1, left as it was", code, out)
			}

			out, code = e.run(t, wrongKey, "doctor")
			if code != 4 || !strings.Contains(out, "none of the 1 active stored secrets decrypts with SITEOPS_SECRET_KEY") || !strings.Contains(out, "we_1 (receiver main)") ||
				strings.Contains(out, "decrypts all") {
				t.Errorf("doctor with another key: exit %d\n%s", code, out)
			}

			// An operator keeping an ingress up anyway (--skip-checks): it
			// is not ready for this secret, and says so.
			_, admin, _ := e.startIngressProcessFlags(t, []string{"--skip-checks"}, wrongKey...)
			body := get(t, admin+"/readyz")
			if !strings.Contains(body, `"status":"degraded"`) || !strings.Contains(body, "none of the 1 active stored secrets decrypts") || !strings.Contains(body, "we_1") || strings.Contains(body, "decrypts all") {
				t.Errorf("/readyz with another key = %s", body)
			}
			if m := get(t, admin+"/metrics"); !strings.Contains(m, `siteops_check_ok{check="secret_key"} 0`) {
				t.Errorf("siteops_check_ok{check=\"secret_key\"} is not 0 with another key:\n%s", grepLines(m, "siteops_check_ok"))
			}
			if strings.Contains(out+body, secret) {
				t.Error("a secret was shown")
			}

			out, code = e.run(t, rightKey, "secret", "retire", "--endpoint", "we_1", "--at", "30m", "--yes")
			if code != 0 || !strings.Contains(out, "retires at") {
				t.Fatalf("secret retire with the right key: exit %d\n%s", code, out)
			}
			set, err := e.Store.ActiveSecrets(t.Context(), "main")
			if err != nil || len(set.Secrets) != 1 || set.Secrets[0].Reveal() != secret || set.Infos[0].RetiredAt == nil {
				t.Errorf("after retiring with the right key: %+v, %v; want we_1 retiring in 30 minutes, still opening", set.Infos, err)
			}
		})
	}
}
