package wiring

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/doctor"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// TestInspectStoreCreatesNothing checks that a store that does not exist is
// reported with the fix, and that looking for it creates neither its
// directory nor its file.
func TestInspectStoreCreatesNothing(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	for _, tc := range []struct {
		name string
		db   config.Database
		path string
	}{
		{"the default store", config.Database{}, filepath.Join(state, "siteops", "siteops.db")},
		{"a named file", config.Database{URL: "sqlite://" + filepath.Join(state, "elsewhere", "x.db")}, filepath.Join(state, "elsewhere", "x.db")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, where, err := InspectStore(t.Context(), tc.db)
			if !errors.Is(err, ErrNoStore) || where != "sqlite://"+tc.path {
				t.Errorf("InspectStore = %q, %v; want ErrNoStore at %s", where, err, tc.path)
			}
			if _, err := os.Stat(filepath.Dir(tc.path)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the directory %s exists after the look (%v); want it left uncreated", filepath.Dir(tc.path), err)
			}
		})
	}
	empty := filepath.Join(state, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := InspectStore(t.Context(), config.Database{URL: "sqlite://" + empty}); !errors.Is(err, ErrNoStore) {
		t.Errorf("an empty file: %v, want ErrNoStore", err)
	}
}

// TestInspectStoreReadsAsItIs checks, on both databases, that an
// unmigrated store is opened read-only, fails the database check, and is
// left without goose's version table; a migrated one passes.
func TestInspectStoreReadsAsItIs(t *testing.T) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			url := storetest.SQLiteURL(t)
			if d == store.Postgres {
				url = storetest.PostgresSchemaURL(t)
			}
			// A database that exists but that no siteops process migrated.
			raw, err := store.Open(t.Context(), url, store.Options{NoMigration: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := raw.DB().ExecContext(t.Context(), "CREATE TABLE unrelated (a INTEGER)"); err != nil {
				t.Fatal(err)
			}
			_ = raw.Close()

			st, where, err := InspectStore(t.Context(), config.Database{URL: url})
			if err != nil {
				t.Fatal(err)
			}
			r := doctor.Database(t.Context(), st, where)
			if r.Status != doctor.Fail || !errors.Is(r.Err, doctor.ErrNotMigrated) {
				t.Errorf("database check of an unmigrated store = %s %q, want fail with ErrNotMigrated", r.Status, r.Detail)
			}
			if _, err := st.DB().ExecContext(t.Context(), "CREATE TABLE written (a INTEGER)"); err == nil {
				t.Error("the inspected store accepted a write; want it read-only")
			}
			_ = st.Close()
			if hasTable(t, url, "goose_db_version") {
				t.Error("the check created goose's version table")
			}

			migrated, _, err := OpenStore(t.Context(), config.Database{URL: url})
			if err != nil {
				t.Fatal(err)
			}
			_ = migrated.Close()
			st, where, err = InspectStore(t.Context(), config.Database{URL: url})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = st.Close() }()
			if r := doctor.Database(t.Context(), st, where); r.Status != doctor.OK {
				t.Errorf("database check of a migrated store = %s %q, want ok", r.Status, r.Detail)
			}
		})
	}
}

// hasTable reports whether the database at url has the table name.
func hasTable(t *testing.T, url, name string) bool {
	t.Helper()
	st, err := store.Open(context.Background(), url, store.Options{NoMigration: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	q := "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = $1"
	if st.Dialect() == store.Postgres {
		q = "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = $1"
	}
	var n int
	if err := st.DB().QueryRowContext(t.Context(), q, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// TestIngressRefusesWithoutTheSecretKey checks that an ingress started
// with SITEOPS_WEBHOOK_SECRETS but without SITEOPS_SECRET_KEY beside
// stored secrets refuses to start with the secret key check (it would
// answer 503 to every delivery for their receivers while /readyz said
// ready), and that one beside no stored secret starts.
func TestIngressRefusesWithoutTheSecretKey(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1") // the ingress dials lazily; never reached here
	for _, tc := range []struct {
		name    string
		secrets bool
		refuses bool
	}{
		{"secrets stored", true, true},
		{"nothing stored", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := storetest.SQLiteURL(t)
			st, err := store.Open(t.Context(), url, store.Options{SecretKey: storetest.TestKey})
			if err != nil {
				t.Fatal(err)
			}
			if tc.secrets {
				if err := st.PutSecret(t.Context(), "we_1", "main", agentsite.NewSigningSecret("whsec_ingress_check")); err != nil {
					t.Fatal(err)
				}
			}
			_ = st.Close()

			for k, v := range map[string]string{"SITEOPS_DATABASE_URL": url, "SITEOPS_SECRET_KEY": "",
				"SITEOPS_INGRESS_ADDR": "127.0.0.1:0", "SITEOPS_INGRESS_ADMIN_ADDR": "", "SITEOPS_WEBHOOK_SECRETS": "whsec_env_only"} {
				t.Setenv(k, v)
			}
			var cfg IngressConfig
			if err := config.Load(&cfg); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			err = RunIngress(ctx, cfg, slog.New(slog.DiscardHandler), nil, Preflight{})
			var refused *PreflightError
			switch {
			case tc.refuses && (!errors.As(err, &refused) || refused.Result.Check != "secret key" || !errors.Is(err, store.ErrNoSecretKey)):
				t.Errorf("RunIngress = %v, want a refusal by the secret key check matching store.ErrNoSecretKey", err)
			case tc.refuses && !strings.Contains(err.Error(), "we_1 (receiver main)"):
				t.Errorf("the refusal %q does not name the endpoint", err)
			case !tc.refuses && err != nil:
				t.Errorf("RunIngress beside no stored secret = %v, want it to serve until stopped", err)
			}
		})
	}
}

// TestOpenExistingStore checks, on both databases, that the commands'
// store opens only a store that a worker or an ingress migrated: a missing
// SQLite file (its directory left uncreated), an empty one, or a database
// no siteops process migrated is ErrNoStore with the fix; one behind this
// build's schema is doctor.ErrNotMigrated; a migrated one opens for
// writing. A password in the URL is never in a message.
func TestOpenExistingStore(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	for _, tc := range []struct {
		name string
		db   config.Database
		made string // what must still not exist afterwards
	}{
		{"the default store", config.Database{}, filepath.Join(state, "siteops")},
		{"a named file", config.Database{URL: "sqlite://" + filepath.Join(state, "elsewhere", "x.db")}, filepath.Join(state, "elsewhere")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := OpenExistingStore(t.Context(), tc.db); !errors.Is(err, ErrNoStore) || !strings.Contains(err.Error(), "SITEOPS_DATABASE_URL") {
				t.Errorf("OpenExistingStore = %v; want ErrNoStore naming SITEOPS_DATABASE_URL", err)
			}
			if _, err := os.Stat(tc.made); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s exists after the open (%v); want it left uncreated", tc.made, err)
			}
		})
	}
	empty := filepath.Join(state, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenExistingStore(t.Context(), config.Database{URL: "sqlite://" + empty}); !errors.Is(err, ErrNoStore) {
		t.Errorf("an empty file: %v, want ErrNoStore", err)
	}

	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			url := storetest.SQLiteURL(t)
			if d == store.Postgres {
				url = withPassword(t, storetest.PostgresSchemaURL(t), "pw-not-to-print")
			}
			raw, err := store.Open(t.Context(), url, store.Options{NoMigration: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := raw.DB().ExecContext(t.Context(), "CREATE TABLE unrelated (a INTEGER)"); err != nil {
				t.Fatal(err)
			}
			_ = raw.Close()
			_, where, err := OpenExistingStore(t.Context(), config.Database{URL: url})
			if !errors.Is(err, ErrNoStore) || !strings.Contains(err.Error(), "start the worker") {
				t.Errorf("a database no siteops process migrated: %v, want ErrNoStore with the fix", err)
			}
			if strings.Contains(where+err.Error(), "pw-not-to-print") {
				t.Errorf("the password is in %q / %q", where, err)
			}
			if hasTable(t, url, "goose_db_version") {
				t.Error("opening created goose's version table")
			}

			migrated, _, err := OpenStore(t.Context(), config.Database{URL: url})
			if err != nil {
				t.Fatal(err)
			}
			_ = migrated.Close()
			st, _, err := OpenExistingStore(t.Context(), config.Database{URL: url})
			if err != nil {
				t.Fatalf("a migrated store: %v", err)
			}
			if _, err := st.DB().ExecContext(t.Context(), "CREATE TABLE written (a INTEGER)"); err != nil {
				t.Errorf("the store refused a write: %v", err)
			}
			// One migration undone in the record: the store is behind this build.
			if _, err := st.DB().ExecContext(t.Context(), "DELETE FROM goose_db_version WHERE version_id = (SELECT max(version_id) FROM goose_db_version)"); err != nil {
				t.Fatal(err)
			}
			_ = st.Close()
			if _, _, err := OpenExistingStore(t.Context(), config.Database{URL: url}); !errors.Is(err, doctor.ErrNotMigrated) {
				t.Errorf("a store behind this build: %v, want doctor.ErrNotMigrated", err)
			}
		})
	}
}

// withPassword puts a password in a PostgreSQL URL (the test server
// trusts local connections, so it is not checked).
func withPassword(t *testing.T, raw, password string) string {
	t.Helper()
	u, err := neturl.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = neturl.UserPassword(u.User.Username(), password)
	return u.String()
}

// TestReceiverSecretsFromEnv reads the secrets stored for a receiver in
// the store the environment names: without SITEOPS_SECRET_KEY it is a
// setting to give, without a store ErrNoStore, and with both the secrets
// and their endpoints.
func TestReceiverSecretsFromEnv(t *testing.T) {
	url := storetest.SQLiteURL(t)
	t.Setenv("SITEOPS_DATABASE_URL", url)
	t.Setenv("SITEOPS_SECRET_KEY", "")
	if _, err := ReceiverSecretsFromEnv(t.Context(), "default"); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "receiver default") {
		t.Errorf("without SITEOPS_SECRET_KEY = %v, want a setting to give, naming the receiver", err)
	}
	t.Setenv("SITEOPS_SECRET_KEY", base64.StdEncoding.EncodeToString(storetest.TestKey))
	if _, err := ReceiverSecretsFromEnv(t.Context(), "default"); !errors.Is(err, ErrNoStore) {
		t.Errorf("without a store = %v, want ErrNoStore", err)
	}
	st, _, err := OpenStore(t.Context(), config.Database{URL: url, SecretKey: base64.StdEncoding.EncodeToString(storetest.TestKey)})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutSecret(t.Context(), "we_1", "", agentsite.NewSigningSecret("whsec_one")); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	got, err := ReceiverSecretsFromEnv(t.Context(), "default")
	if err != nil || len(got.Secrets) != 1 || got.Secrets[0] != "whsec_one" || got.Endpoints[0] != "we_1" {
		t.Errorf("ReceiverSecretsFromEnv = %v (endpoints %v); want we_1's secret", err, got.Endpoints)
	}
}

// TestOldSecretKeyFromEnv reads SITEOPS_OLD_SECRET_KEY: none when unset,
// 32 bytes in base64 when set, else a setting to fix.
func TestOldSecretKeyFromEnv(t *testing.T) {
	t.Setenv(OldSecretKeyEnv, "")
	if k, err := OldSecretKeyFromEnv(); k != nil || err != nil {
		t.Errorf("unset = %v, %v; want none", k, err)
	}
	t.Setenv(OldSecretKeyEnv, " "+base64.StdEncoding.EncodeToString(storetest.TestKey)+"\n")
	if k, err := OldSecretKeyFromEnv(); err != nil || string(k) != string(storetest.TestKey) {
		t.Errorf("a key = %v, %v; want it decoded", k, err)
	}
	t.Setenv(OldSecretKeyEnv, base64.StdEncoding.EncodeToString([]byte("short")))
	if _, err := OldSecretKeyFromEnv(); !errors.Is(err, config.ErrInvalid) {
		t.Errorf("a short key = %v, want a setting to fix", err)
	}
}

// TestPoolSizeOutsideItsBoundsIsRefused checks SITEOPS_DATABASE_MAX_CONNS:
// a pool too small for a process's own work, or absurdly large, is refused
// before the store is opened, naming the setting and its bounds.
func TestPoolSizeOutsideItsBoundsIsRefused(t *testing.T) {
	for _, n := range []int{-1, 2, 1001} {
		d := config.Database{URL: "sqlite://" + t.TempDir() + "/s.db", MaxConns: n}
		_, _, err := OpenStore(t.Context(), d)
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "SITEOPS_DATABASE_MAX_CONNS") || !strings.Contains(err.Error(), "from 4 to 1000") {
			t.Errorf("MaxConns %d: %v; want it refused, naming the setting and its bounds", n, err)
		}
	}
	st, _, err := OpenStore(t.Context(), config.Database{URL: "sqlite://" + t.TempDir() + "/s.db", MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
}
