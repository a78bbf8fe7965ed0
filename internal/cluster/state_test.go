package cluster

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateNeverHoldsThePassword writes the state of a cluster started with
// a password and checks that the file has neither the password nor a
// redacted stand-in that Attach would later send as one.
func TestStateNeverHoldsThePassword(t *testing.T) {
	for _, raw := range []string{
		"postgres://admin:s3cret-pw@db.example:5433/postgres?sslmode=disable",
		"postgres://admin@db.example:5433/postgres?password=s3cret-pw&sslmode=disable",
		"host=db.example port=5433 user=admin password=s3cret-pw dbname=postgres",
		"host=db.example port=5433 user=admin password='s3cret pw' dbname=postgres",
	} {
		pg, err := parsePostgres(raw)
		if err != nil {
			t.Fatal(err)
		}
		c := &Cluster{Dir: t.TempDir(), pg: pg}
		if err := c.writeState(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(c.statePath())
		if err != nil {
			t.Fatal(err)
		}
		var st state
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "s3cret") || strings.Contains(st.Postgres, "xxxxx") {
			t.Errorf("state of %s records %q; want no password at all", redact(raw), st.Postgres)
		}
		got, err := parsePostgres(st.Postgres)
		if err != nil || got.host != "db.example" || got.port != 5433 || got.user != "admin" {
			t.Errorf("state records %q (%v); want the server db.example:5433 and user admin", st.Postgres, err)
		}
	}
}

// TestAttachTakesThePasswordFromTheEnvironment checks the admin connection
// Attach picks without --postgres: the environment's URL when it names the
// recorded server (only it can hold the password), else the recorded URL
// without a password, even from an older state file that kept the redacted
// "xxxxx"; and an explicit URL always.
func TestAttachTakesThePasswordFromTheEnvironment(t *testing.T) {
	const recorded = "postgres://admin@db.example:5433/postgres?sslmode=disable"
	for _, tc := range []struct {
		name, recorded, env, explicit string
		wantPassword                  string
		wantHost                      string
	}{
		{"environment names the server", recorded, "postgres://admin:pw-from-env@db.example:5433/postgres", "", "pw-from-env", "db.example"},
		{"environment names another server", recorded, "postgres://admin:pw-from-env@other.example:5432/postgres", "", "", "db.example"},
		{"environment names another port", recorded, "postgres://admin:pw-from-env@db.example:5432/postgres", "", "", "db.example"},
		{"older state file with the redacted password", "postgres://admin:xxxxx@db.example:5433/postgres", "postgres://admin@other.example/postgres", "", "", "db.example"},
		{"explicit URL wins", recorded, "postgres://admin:pw-from-env@db.example:5433/postgres", "postgres://root:pw-explicit@db.example:5433/postgres", "pw-explicit", "db.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(PostgresURLEnv, tc.env)
			t.Setenv("PGPASSWORD", "")
			t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
			dir := t.TempDir()
			b, err := json.Marshal(state{Postgres: tc.recorded, Database: "siteops_tc_x", VisibilityDatabase: "siteops_tc_x_vis"})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, stateFile), b, 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := Attach(dir, tc.explicit, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.pg.password != tc.wantPassword || c.pg.host != tc.wantHost {
				t.Errorf("Attach connects to %s with password %q; want %s with %q", c.pg.addr(), c.pg.password, tc.wantHost, tc.wantPassword)
			}
		})
	}
}
