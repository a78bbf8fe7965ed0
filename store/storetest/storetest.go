// Package storetest opens real stores for tests: a SQLite file in the test's
// temporary directory, and a fresh schema on the PostgreSQL server named by
// SITEOPS_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test).
// When PostgreSQL cannot be reached the PostgreSQL variant is skipped with a
// message that says so; it never passes silently.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/siteops/siteops/store"
)

// RequirePostgres names the variable that, set, makes a test that needs
// PostgreSQL fail when the server cannot be reached instead of skipping (CI sets it: .ci/run). It
// is internal/siteopstest.RequirePostgres, named here so that the store's
// test helpers import nothing above the store.
const RequirePostgres = "SITEOPS_REQUIRE_POSTGRES"

// DefaultPostgresURL is used when SITEOPS_TEST_POSTGRES_URL is unset.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// TestKey is a fixed secret key for tests.
var TestKey = []byte("0123456789abcdef0123456789abcdef")

// PostgresURL returns the server URL tests use.
func PostgresURL() string {
	if u := os.Getenv("SITEOPS_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return DefaultPostgresURL
}

// SQLiteURL returns the URL of a new SQLite file for t.
func SQLiteURL(t testing.TB) string {
	t.Helper()
	return "sqlite://" + t.TempDir() + "/siteops.db"
}

// PostgresSchemaURL creates a fresh schema for t on the test server and
// returns a URL whose connections use it; the schema is dropped at cleanup.
// It skips t when the server cannot be reached (fails it when
// SITEOPS_REQUIRE_POSTGRES is set).
func PostgresSchemaURL(t testing.TB) string {
	t.Helper()
	base := PostgresURL()
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		msg := fmt.Sprintf("PostgreSQL is not reachable at %s (%v); start it or set SITEOPS_TEST_POSTGRES_URL to run the PostgreSQL variant", store.Redact(base), err)
		if os.Getenv(RequirePostgres) != "" {
			t.Fatalf("%s is set, and %s", RequirePostgres, msg)
		}
		t.Skipf("SKIP: %s (set %s=1 to make this a failure)", msg, RequirePostgres)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	if _, err := db.ExecContext(ctx, `CREATE SCHEMA `+schema); err != nil {
		_ = db.Close()
		t.Fatalf("storetest: creating schema: %v", err)
	}
	t.Cleanup(func() {
		_, _ = db.ExecContext(context.Background(), `DROP SCHEMA `+schema+` CASCADE`)
		_ = db.Close()
	})
	u, _ := url.Parse(base)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Open opens a migrated store of the given dialect for t, with TestKey,
// closed at cleanup.
func Open(t testing.TB, d store.Dialect) *store.Store {
	t.Helper()
	return OpenWith(t, d, store.Options{})
}

// OpenWith is Open with o: its SecretKey, when it has none, is TestKey.
func OpenWith(t testing.TB, d store.Dialect, o store.Options) *store.Store {
	t.Helper()
	u := SQLiteURL(t)
	if d == store.Postgres {
		u = PostgresSchemaURL(t)
	}
	if len(o.SecretKey) == 0 {
		o.SecretKey = TestKey
	}
	s, err := store.Open(context.Background(), u, o)
	if err != nil {
		t.Fatalf("storetest: opening %s store: %v", d, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Each runs f as a subtest on SQLite and on PostgreSQL.
func Each(t *testing.T, f func(t *testing.T, s *store.Store)) {
	t.Helper()
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) { f(t, Open(t, d)) })
	}
}
