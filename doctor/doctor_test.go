package doctor

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/release"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// TestSecretKey checks the secret key check against what the store holds:
// without SITEOPS_SECRET_KEY it is skipped only while no active secret is
// stored, and fails naming the endpoints and the fix once one is.
func TestSecretKey(t *testing.T) {
	for _, tc := range []struct {
		name    string
		store   func(t *testing.T, st *store.Store) // what the worker stored, with the key
		key     bool                                // whether the check runs with the key
		want    Status
		wantErr error
		says    []string
	}{
		{"no key, nothing stored", nil, false, Skip, nil, []string{"SITEOPS_SECRET_KEY is not set"}},
		{"no key, only a retired secret", func(t *testing.T, st *store.Store) {
			put(t, st, "we_old", "main")
			if err := st.RetireSecret(t.Context(), "we_old", time.Now().Add(-time.Minute)); err != nil {
				t.Fatal(err)
			}
		}, false, Skip, nil, nil},
		{"no key, secrets stored", func(t *testing.T, st *store.Store) {
			put(t, st, "we_1", "main")
			put(t, st, "we_2", "")
		}, false, Fail, store.ErrNoSecretKey, []string{"2 active webhook secret(s)", "we_1 (receiver main)", "we_2 (receiver default)", "set SITEOPS_SECRET_KEY to the key they were stored under"}},
		{"the key, secrets stored", func(t *testing.T, st *store.Store) { put(t, st, "we_1", "main") }, true, OK, nil, []string{"decrypts all 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := storetest.SQLiteURL(t)
			withKey, err := store.Open(t.Context(), url, store.Options{SecretKey: storetest.TestKey})
			if err != nil {
				t.Fatal(err)
			}
			if tc.store != nil {
				tc.store(t, withKey)
			}
			_ = withKey.Close()
			var o store.Options
			if tc.key {
				o.SecretKey = storetest.TestKey
			}
			st, err := store.Open(t.Context(), url, o)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = st.Close() }()

			r := SecretKey(t.Context(), st)
			if r.Status != tc.want {
				t.Errorf("status = %s (%s), want %s", r.Status, r.Detail, tc.want)
			}
			if tc.wantErr != nil && !errors.Is(r.Err, tc.wantErr) {
				t.Errorf("err = %v, want one matching %v", r.Err, tc.wantErr)
			}
			for _, s := range tc.says {
				if !strings.Contains(r.Detail, s) {
					t.Errorf("detail %q does not say %q", r.Detail, s)
				}
			}
			if strings.Contains(r.Detail, "openssl rand") {
				t.Errorf("detail %q advises a new key, which would not decrypt the stored secrets", r.Detail)
			}
			if strings.Contains(r.Detail, "whsec_") {
				t.Errorf("detail %q shows a secret", r.Detail)
			}
		})
	}
}

func put(t *testing.T, st *store.Store, endpointID, receiver string) {
	t.Helper()
	if err := st.PutSecret(t.Context(), endpointID, receiver, agentsite.NewSigningSecret("whsec_doctor_"+endpointID)); err != nil {
		t.Fatal(err)
	}
}

// TestAddress checks the address checks: a free address passes, one held
// by a running siteops process (the worker's metrics endpoint answers
// "ok", the ingress {"status":"ok"}) passes saying so, and one held by
// anything else fails naming the setting.
func TestAddress(t *testing.T) {
	answering := func(body string) func(t *testing.T) string {
		return func(t *testing.T) string {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/healthz" {
					http.NotFound(w, r)
					return
				}
				_, _ = io.WriteString(w, body)
			}))
			t.Cleanup(srv.Close)
			return srv.Listener.Addr().String()
		}
	}
	for _, tc := range []struct {
		name string
		hold func(t *testing.T) string // holds an address and returns it
		want Status
		says string
	}{
		{"free", func(t *testing.T) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			_ = ln.Close()
			return addr
		}, OK, "is free"},
		{"held by a siteops worker", answering("ok\n"), OK, "in use by a running siteops process"},
		{"held by a siteops ingress", answering(`{"status":"ok"}` + "\n"), OK, "in use by a running siteops process"},
		{"held by another server", answering("<html>welcome</html>"), Fail, "SITEOPS_METRICS_ADDR="},
		{"held by a plain listener", func(t *testing.T) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ln.Close() })
			return ln.Addr().String()
		}, Fail, "SITEOPS_METRICS_ADDR="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := tc.hold(t)
			r := Address(t.Context(), "SITEOPS_METRICS_ADDR", addr)
			if r.Status != tc.want || !strings.Contains(r.Detail, tc.says) {
				t.Errorf("Address(%s) = %s %q, want %s saying %q", addr, r.Status, r.Detail, tc.want, tc.says)
			}
		})
	}
	if r := Address(t.Context(), "SITEOPS_METRICS_ADDR", ""); r.Status != Skip {
		t.Errorf("Address of an empty setting = %s %q, want skip", r.Status, r.Detail)
	}
}

func TestLocalURL(t *testing.T) {
	for addr, want := range map[string]string{
		":9090":          "http://127.0.0.1:9090/healthz",
		"0.0.0.0:9090":   "http://127.0.0.1:9090/healthz",
		"[::]:9090":      "http://127.0.0.1:9090/healthz",
		"10.0.0.5:9090":  "http://10.0.0.5:9090/healthz",
		"[::1]:9090":     "http://[::1]:9090/healthz",
		"localhost:8088": "http://localhost:8088/healthz",
	} {
		if got, err := LocalURL(addr, "/healthz"); err != nil || got != want {
			t.Errorf("LocalURL(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
	if _, err := LocalURL("9090", "/healthz"); err == nil {
		t.Error("LocalURL of an address without a port: no error")
	}
}

// TestSecretKeyPartialAndDamaged checks what a process does with stored
// secrets it cannot all read, on both databases: one under another key
// beside a good one degrades (doctor fails, the process starts), naming the
// key; a row whose binding was edited is named as edited, without blaming
// the key; a key that reads none of them refuses.
func TestSecretKeyPartialAndDamaged(t *testing.T) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			url := storetest.SQLiteURL(t)
			if d == store.Postgres {
				url = storetest.PostgresSchemaURL(t)
			}
			st, err := store.Open(t.Context(), url, store.Options{SecretKey: storetest.TestKey})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			put(t, st, "we_good", "main")
			// A row sealed under another key (a restored backup of another
			// deployment, say): its key id names a key this one is not.
			put(t, st, "we_foreign", "main")
			if _, err := st.DB().ExecContext(t.Context(), `UPDATE webhook_secrets SET key_id = 'k2-0123456789ab' WHERE endpoint_id = $1`, "we_foreign"); err != nil {
				t.Fatal(err)
			}

			r := SecretKey(t.Context(), st)
			if r.Status != Fail || !r.Partial || r.Refuses() || !errors.Is(r.Err, store.ErrKeyMismatch) ||
				!strings.Contains(r.Detail, "1 of 2") || !strings.Contains(r.Detail, "we_foreign") || !strings.Contains(r.Detail, "another key") {
				t.Errorf("one secret under another key = %+v; want a partial failure naming we_foreign and the key", r)
			}

			if _, err := st.DB().ExecContext(t.Context(), `UPDATE webhook_secrets SET receiver = 'moved' WHERE endpoint_id = $1`, "we_good"); err != nil {
				t.Fatal(err)
			}
			r = SecretKey(t.Context(), st)
			if r.Status != Fail || r.Partial || !r.Refuses() {
				t.Errorf("no secret readable = %+v; want a failure that refuses", r)
			}
			if !strings.Contains(r.Detail, "we_good") || !strings.Contains(r.Detail, "changed outside siteops") || !strings.Contains(r.Detail, "the key is right") {
				t.Errorf("the edited row's advice = %q; want it named as changed outside siteops, the key right", r.Detail)
			}
			for clause := range strings.SplitSeq(r.Detail, "; ") {
				if strings.Contains(clause, "we_good") && (strings.Contains(clause, "another key") || !strings.Contains(clause, "changed outside siteops")) {
					t.Errorf("the edited row is blamed on the key: %q", clause)
				}
			}
		})
	}
}

// TestIsTransient tells the failures a retry may fix from configuration.
func TestIsTransient(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"500", &agentsite.APIError{Status: 500}, true},
		{"503", &agentsite.APIError{Status: 503}, true},
		{"429", &agentsite.APIError{Status: 429}, true},
		{"401", &agentsite.APIError{Status: 401}, false},
		{"403", &agentsite.APIError{Status: 403}, false},
		{"connection refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{"a deadline", context.DeadlineExceeded, true},
		{"the database unreachable", errors.Join(store.ErrUnreachable), true},
		{"not migrated", ErrNotMigrated, false},
		{"nil", nil, false},
	} {
		if got := IsTransient(tc.err); got != tc.want {
			t.Errorf("IsTransient(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPublicURL(t *testing.T) {
	for _, tc := range []struct {
		value    string
		loopback bool
		want     Status
		says     string
	}{
		{"https://hooks.example.com/webhooks", false, OK, "under https://hooks.example.com/webhooks only"},
		{"", false, Warn, "no webhook endpoint can be registered or rotated"},
		{"", true, Warn, "on loopback only"},
		{"hooks.example.com/webhooks", false, Fail, "SITEOPS_PUBLIC_URL"},
	} {
		r := PublicURL(tc.value, tc.loopback)
		if r.Status != tc.want || !strings.Contains(r.Detail, tc.says) {
			t.Errorf("PublicURL(%q, %v) = %s %q; want %s saying %q", tc.value, tc.loopback, r.Status, r.Detail, tc.want, tc.says)
		}
	}
}

// TestBuildID checks the build id a versioned worker would poll as: a
// usable one passes, one that names no build fails as a setting to fix,
// and without versioning there is nothing to check.
func TestBuildID(t *testing.T) {
	if r := BuildID(config.Worker{Versioning: true, BuildID: "v3.0.1"}); r.Status != OK || !strings.Contains(r.Detail, "build id v3.0.1 (from SITEOPS_BUILD_ID)") {
		t.Errorf("a usable build id = %+v", r)
	}
	r := BuildID(config.Worker{Versioning: true, BuildID: "latest"})
	if r.Status != Fail || !errors.Is(r.Err, config.ErrInvalid) || !errors.Is(r.Err, release.ErrBuildID) || r.Detail != r.Err.Error() {
		t.Errorf("a build id that names no build = %+v; want a failure matching config.ErrInvalid and release.ErrBuildID", r)
	}
	if r := BuildID(config.Worker{BuildID: "latest"}); r.Status != Skip {
		t.Errorf("without versioning = %+v, want skipped", r)
	}
}

// TestDatabaseWarnsOfAnInvalidIndex: an index whose concurrent build was
// interrupted stays in PostgreSQL, invalid (maintained, never read). The
// database check warns, naming it and the command that rebuilds it; it
// does not fail, since the store works on without it. Here the build is
// made to fail the way an interruption leaves it: a unique index over
// values that repeat.
func TestDatabaseWarnsOfAnInvalidIndex(t *testing.T) {
	st, err := store.Open(t.Context(), storetest.PostgresSchemaURL(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if r := Database(t.Context(), st, "the test store"); r.Status != OK {
		t.Fatalf("a fresh store: %+v; want ok", r)
	}
	for _, id := range []string{"evt_1", "evt_2"} {
		if _, err := st.RecordEvent(t.Context(), store.InboxEvent{EventID: id, EventType: "lead.created", Lane: store.LaneBulk, EndpointID: "env", ReceivedAt: time.Now(), Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.DB().ExecContext(t.Context(), `CREATE UNIQUE INDEX CONCURRENTLY inbox_interrupted ON inbox (event_type)`); err == nil {
		t.Fatal("the unique index over repeated values was built; the test needs its build to fail")
	}
	r := Database(t.Context(), st, "the test store")
	if r.Status != Warn || r.Refuses() || !strings.Contains(r.Detail, "inbox_interrupted") || !strings.Contains(r.Detail, "REINDEX INDEX CONCURRENTLY") {
		t.Errorf("with an invalid index: %+v; want a warning naming inbox_interrupted and REINDEX INDEX CONCURRENTLY", r)
	}
	if _, err := st.DB().ExecContext(t.Context(), `DROP INDEX inbox_interrupted`); err != nil {
		t.Fatal(err)
	}
	if r := Database(t.Context(), st, "the test store"); r.Status != OK {
		t.Errorf("after the invalid index is dropped: %+v; want ok", r)
	}
}

// TestSecretKeyNamesWhatDoesNotDecrypt is issue 33, item 1, in doctor and
// readiness: secrets that do not decrypt are counted as such, never as
// "decrypts all 0"; a key that opens none of them says so plainly and
// refuses; no stored secret is not "all decrypt"; without a key the check
// names the key that sealed them and never advises a new one; and the
// result is watched, since what it checks changes while a process runs.
func TestSecretKeyNamesWhatDoesNotDecrypt(t *testing.T) {
	url := storetest.SQLiteURL(t)
	open := func(key []byte) *store.Store {
		st, err := store.Open(t.Context(), url, store.Options{SecretKey: key})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	right := open(storetest.TestKey)
	r := SecretKey(t.Context(), right)
	if r.Status != OK || strings.Contains(r.Detail, "decrypts all") || !strings.Contains(r.Detail, "no active webhook secret is stored") || !r.Watch {
		t.Errorf("nothing stored = %+v; want OK saying nothing is stored (not that all 0 decrypt), watched", r)
	}
	put(t, right, "we_1", "main")
	put(t, right, "we_2", "")

	wrong := open([]byte("ffffffffffffffffffffffffffffffff"))
	r = SecretKey(t.Context(), wrong)
	for _, s := range []string{"none of the 2 active stored secrets decrypts with SITEOPS_SECRET_KEY (key " + wrong.SecretKeyID() + ")", "we_1 (receiver main)", "we_2 (receiver default)", "key " + right.SecretKeyID()} {
		if !strings.Contains(r.Detail, s) {
			t.Errorf("another key: detail %q does not say %q", r.Detail, s)
		}
	}
	if r.Status != Fail || !r.Refuses() || !errors.Is(r.Err, store.ErrKeyMismatch) || !r.Watch || strings.Contains(r.Detail, "decrypts all") {
		t.Errorf("another key = %+v; want a watched failure that refuses, matching ErrKeyMismatch", r)
	}

	// One of three under the right key: partial, counted.
	put(t, right, "we_3", "main")
	if _, err := right.DB().ExecContext(t.Context(), `UPDATE webhook_secrets SET key_id = 'k2-0123456789ab' WHERE endpoint_id = 'we_2'`); err != nil {
		t.Fatal(err)
	}
	r = SecretKey(t.Context(), right)
	if r.Status != Fail || !r.Partial || !strings.Contains(r.Detail, "1 of 3 active stored secrets do not decrypt with SITEOPS_SECRET_KEY") || !strings.Contains(r.Detail, "we_2") || !strings.Contains(r.Detail, "key k2-0123456789ab") {
		t.Errorf("one of three unreadable = %+v; want a partial failure counting and naming we_2 and its key", r)
	}

	none := open(nil)
	r = SecretKey(t.Context(), none)
	if r.Status != Fail || !errors.Is(r.Err, store.ErrNoSecretKey) || strings.Contains(r.Detail, "openssl") ||
		!strings.Contains(r.Detail, "key "+right.SecretKeyID()) || !strings.Contains(r.Detail, "SITEOPS_SECRET_KEY_FILE") || !r.Watch {
		t.Errorf("no key = %+v; want a watched failure naming the key that sealed them, never advising a new one", r)
	}
}
