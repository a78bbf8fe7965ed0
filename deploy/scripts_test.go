package deploy_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the pgx driver for database/sql
	"go.temporal.io/api/workflowservice/v1"

	"github.com/siteops/siteops/internal/cluster"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// runBash runs a bash snippet from deploy/ with env added, and returns its
// combined output and exit code.
func runBash(t *testing.T, script string, env ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "bash", "-c", script)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// TestSecretFilesLib runs secret-files.sh, the scripts' NAME_FILE loader,
// as the scripts source it: values as config.LoadSecretFiles reads them,
// and the same refusals.
func TestSecretFilesLib(t *testing.T) {
	const secret = "s3cret-do-not-print"
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	show := `. ./secret-files.sh; load_secret_files A_KEY B_KEY || exit $?; ` +
		`printf 'A=[%s] B=[%s] AF=%s B_SET=%s\n' "${A_KEY-}" "${B_KEY-}" "${A_KEY_FILE-unset}" "${B_KEY+set}"`
	for _, tc := range []struct {
		name     string
		env      []string
		wantCode int
		want     string
	}{
		{"newline trimmed", []string{"A_KEY_FILE=" + write("a", secret+"\n")}, 0, "A=[" + secret + "] B=[] AF=unset B_SET="},
		{"CRLF trimmed", []string{"A_KEY_FILE=" + write("crlf", secret+"\r\n\r\n")}, 0, "A=[" + secret + "]"},
		{"empty file leaves it unset", []string{"A_KEY_FILE=" + write("empty", "\n"), "B_KEY_FILE="}, 0, "A=[] B=[] AF=unset B_SET="},
		{"direct value kept", []string{"B_KEY=direct"}, 0, "B=[direct]"},
		{"both set", []string{"A_KEY=" + secret, "A_KEY_FILE=" + write("both", secret)}, 1, "A_KEY and A_KEY_FILE are both set"},
		{"missing file", []string{"B_KEY_FILE=" + filepath.Join(dir, "absent")}, 1, "B_KEY_FILE=" + filepath.Join(dir, "absent") + " cannot be read"},
		{"a directory", []string{"B_KEY_FILE=" + dir}, 1, "B_KEY_FILE=" + dir + " cannot be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := runBash(t, show, append([]string{"A_KEY=", "B_KEY=", "A_KEY_FILE=", "B_KEY_FILE="}, tc.env...)...)
			if code != tc.wantCode || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, output %q; want exit %d with %q", code, out, tc.wantCode, tc.want)
			}
			if tc.wantCode != 0 && strings.Contains(out, secret) {
				t.Errorf("the refusal %q shows the secret", out)
			}
		})
	}
}

// TestComposeSecretsScript runs compose-secrets.sh into a new directory:
// it makes every file compose.yaml declares, generated or empty, readable
// by the containers (0444) inside a directory only its owner enters (0700),
// and never overwrites one that exists.
func TestComposeSecretsScript(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secrets")
	if out, code := runBash(t, "./"+composeSecrets+" "+dir); code != 0 {
		t.Fatalf("%s: exit %d\n%s", composeSecrets, code, out)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("%s: mode %v; want 0700 (%v)", dir, st.Mode().Perm(), err)
	}
	generated := map[string]*regexp.Regexp{
		"postgres-password":    regexp.MustCompile(`^[0-9a-f]{32}$`),
		"temporal-db-password": regexp.MustCompile(`^[0-9a-f]{32}$`),
		"siteops-database-url": composeURL,
		"siteops-secret-key":   regexp.MustCompile(`^[A-Za-z0-9+/]{43}=$`),
	}
	for name, file := range composeSecretFiles(t) {
		p := filepath.Join(dir, file)
		st, err := os.Stat(p)
		if err != nil {
			t.Errorf("compose secret %s: %v", name, err)
			continue
		}
		if st.Mode().Perm() != 0o444 {
			t.Errorf("%s: mode %v; want 0444 (read by the containers' own users)", file, st.Mode().Perm())
		}
		b, _ := os.ReadFile(p)
		if re, ok := generated[file]; ok && !re.Match(b) {
			t.Errorf("%s holds a value that is not of the form %s", file, re)
		} else if !ok && len(b) != 0 {
			t.Errorf("%s is not empty: it is for the user to fill, or optional", file)
		}
	}
	before, _ := os.ReadFile(filepath.Join(dir, "postgres-password"))
	out, code := runBash(t, "./"+composeSecrets+" "+dir)
	after, _ := os.ReadFile(filepath.Join(dir, "postgres-password"))
	if code != 0 || string(before) != string(after) || !strings.Contains(out, "kept") {
		t.Errorf("a second run: exit %d, password changed %t, output %q; want every file kept", code, string(before) != string(after), out)
	}
}

// composeSecretFiles returns the file (under deploy/secrets/) of every
// compose secret compose.yaml declares.
func composeSecretFiles(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, v := range dig(docs(t, "compose.yaml")[0], "secrets").(map[string]any) {
		out[name] = strings.TrimPrefix(str(dig(v, "file")), "./secrets/")
	}
	return out
}

// TestPostgresRoles runs postgres-roles.sh against the test PostgreSQL
// server (SITEOPS_TEST_POSTGRES_URL, as an administrator) with fresh role and
// database names, twice, then checks what it made: two login roles without
// any server-wide privilege, each the owner of its databases and of their
// schema public, each refused by the other's databases, and Temporal's able
// to create the one extension its visibility schema needs; then, as the
// runbook goes on, temporal-schema.sh sets up Temporal's schemas as its
// role, a cluster's services run on those databases as that role (its
// namespace registered by temporal-setup.sh), and siteops' store migrates
// as siteops' role. Skipped without psql or the server.
func TestPostgresRoles(t *testing.T) {
	if _, err := exec.LookPath("psql"); err != nil {
		siteopstest.Missing(t, siteopstest.RequirePostgres, "psql is not installed (Debian: postgresql-client); %s needs it", rolesScript)
	}
	admin, err := url.Parse(storetest.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", admin.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() }) // after the cleanup below, which uses it
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		siteopstest.Missing(t, siteopstest.RequirePostgres, "PostgreSQL is not reachable at %s (%v); start it or set SITEOPS_TEST_POSTGRES_URL", admin.Redacted(), err)
	}
	var may bool
	if err := db.QueryRowContext(ctx, `SELECT rolsuper OR (rolcreaterole AND rolcreatedb) FROM pg_roles WHERE rolname = current_user`).Scan(&may); err != nil || !may {
		siteopstest.Missing(t, siteopstest.RequirePostgres, "%s may not create roles and databases on %s (%v)", admin.User.Username(), admin.Redacted(), err)
	}

	var b [4]byte
	_, _ = rand.Read(b[:])
	sfx := hex.EncodeToString(b[:])
	tRole, tDB, tVis := "rt_temporal_"+sfx, "rt_temporal_"+sfx, "rt_temporal_vis_"+sfx
	sRole, sDB := "rt_siteops_"+sfx, "rt_siteops_"+sfx
	tPass, sPass := "Tpw"+sfx, "Spw"+sfx
	t.Cleanup(func() {
		ctx := context.Background()
		for _, d := range []string{tDB, tVis, sDB} {
			if _, err := db.ExecContext(ctx, `DROP DATABASE IF EXISTS `+d+` WITH (FORCE)`); err != nil {
				t.Errorf("dropping the test database %s: %v", d, err)
			}
		}
		for _, r := range []string{tRole, sRole} {
			if _, err := db.ExecContext(ctx, `DROP ROLE IF EXISTS `+r); err != nil {
				t.Errorf("dropping the test role %s: %v", r, err)
			}
		}
	})

	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	host, port := admin.Hostname(), admin.Port()
	if port == "" {
		port = "5432"
	}
	env := []string{
		"PGHOST=" + host, "PGPORT=" + port, "PGUSER=" + admin.User.Username(), "PGDATABASE=" + strings.TrimPrefix(admin.Path, "/"),
		"PGSSLMODE=" + cmp.Or(admin.Query().Get("sslmode"), "prefer"), "PGPASSWORD=", "PGPASSWORD_FILE=",
		"TEMPORAL_SERVER_DB_USER=" + tRole, "TEMPORAL_SERVER_DB_NAME=" + tDB, "TEMPORAL_SERVER_VISIBILITY_DB_NAME=" + tVis,
		"TEMPORAL_SERVER_DB_PASSWORD=", "TEMPORAL_SERVER_DB_PASSWORD_FILE=" + file("temporal", tPass),
		"SITEOPS_DATABASE_URL=", "SITEOPS_DATABASE_URL_FILE=" + file("url", fmt.Sprintf("postgres://%s:%s@%s:%s/%s?sslmode=disable", sRole, sPass, host, port, sDB)),
	}
	if adminPass, ok := admin.User.Password(); ok { // none with trust authentication
		env = append(env, "PGPASSWORD_FILE="+file("admin", adminPass))
	}
	for run := 1; run <= 2; run++ { // idempotent
		out, code := runBash(t, "./"+rolesScript, env...)
		if code != 0 {
			t.Fatalf("run %d of %s: exit %d\n%s", run, rolesScript, code, out)
		}
		for _, s := range []string{tPass, sPass} {
			if strings.Contains(out, s) {
				t.Fatalf("%s printed a password: %s", rolesScript, out)
			}
		}
	}

	// What it made.
	for role, dbs := range map[string][]string{tRole: {tDB, tVis}, sRole: {sDB}} {
		var super, createdb, createrole, repl, bypass bool
		if err := db.QueryRowContext(ctx, `SELECT rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls FROM pg_roles WHERE rolname = $1`, role).
			Scan(&super, &createdb, &createrole, &repl, &bypass); err != nil {
			t.Fatalf("role %s: %v", role, err)
		}
		if super || createdb || createrole || repl || bypass {
			t.Errorf("role %s: superuser %t, createdb %t, createrole %t, replication %t, bypassrls %t; want none", role, super, createdb, createrole, repl, bypass)
		}
		for _, d := range dbs {
			var owner string
			var public bool
			if err := db.QueryRowContext(ctx, `SELECT pg_get_userbyid(datdba), has_database_privilege('public', datname, 'CONNECT') FROM pg_database WHERE datname = $1`, d).Scan(&owner, &public); err != nil {
				t.Fatalf("database %s: %v", d, err)
			}
			if owner != role || public {
				t.Errorf("database %s: owner %s, PUBLIC may connect %t; want %s and false", d, owner, public, role)
			}
		}
	}
	connect := func(role, pass, database string) (*sql.DB, error) {
		u := *admin
		u.User, u.Path = url.UserPassword(role, pass), "/"+database
		c, err := sql.Open("pgx", u.String())
		if err != nil {
			return nil, err
		}
		if err := c.PingContext(ctx); err != nil {
			_ = c.Close()
			return nil, err
		}
		return c, nil
	}
	for _, tc := range []struct{ role, pass, db string }{{sRole, sPass, tDB}, {sRole, sPass, tVis}, {tRole, tPass, sDB}} {
		if c, err := connect(tc.role, tc.pass, tc.db); err == nil {
			_ = c.Close()
			t.Errorf("%s connected to %s, a database of another role", tc.role, tc.db)
		} else if !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("%s connecting to %s: %v; want permission denied", tc.role, tc.db, err)
		}
	}
	// Each owns its schema: the store's migrations and Temporal's schema
	// (with btree_gin, a trusted extension) run as these roles.
	for _, tc := range []struct{ role, pass, db, ddl string }{
		{sRole, sPass, sDB, `CREATE TABLE migration_probe (id int); DROP TABLE migration_probe`},
		{tRole, tPass, tVis, `CREATE EXTENSION IF NOT EXISTS btree_gin`},
	} {
		c, err := connect(tc.role, tc.pass, tc.db)
		if err != nil {
			t.Errorf("%s cannot connect to its database %s: %v", tc.role, tc.db, err)
			continue
		}
		if _, err := c.ExecContext(ctx, tc.ddl); err != nil {
			t.Errorf("%s in %s: %s: %v", tc.role, tc.db, tc.ddl, err)
		}
		_ = c.Close()
	}

	// Temporal's schema job, as Temporal's role: it cannot create the
	// databases (NOCREATEDB), finds them, and sets up both schemas.
	t.Run("temporal-schema.sh as Temporal's role", func(t *testing.T) {
		tool, err := cluster.FindSQLTool()
		if err != nil {
			siteopstest.Missing(t, siteopstest.RequireTemporal, "%v", err)
		}
		pathDir := t.TempDir()
		if err := os.Symlink(tool, filepath.Join(pathDir, "temporal-sql-tool")); err != nil {
			t.Fatal(err)
		}
		out, code := runBash(t, "./"+schemaScript,
			"PATH="+pathDir+":"+os.Getenv("PATH"),
			"TEMPORAL_SERVER_DB_HOST="+host, "TEMPORAL_SERVER_DB_PORT="+port, "TEMPORAL_SERVER_DB_USER="+tRole,
			"TEMPORAL_SERVER_DB_PASSWORD=", "TEMPORAL_SERVER_DB_PASSWORD_FILE="+file("temporal-again", tPass),
			"TEMPORAL_SERVER_DB_NAME="+tDB, "TEMPORAL_SERVER_VISIBILITY_DB_NAME="+tVis)
		if code != 0 || strings.Count(out, "is at the latest") != 2 {
			t.Fatalf("%s as %s: exit %d\n%s", schemaScript, tRole, code, out)
		}
		if strings.Contains(out, tPass) {
			t.Errorf("%s printed the password", schemaScript)
		}

		// The runbook's next step: Temporal's services on those
		// databases as that role, and temporal-setup.sh registering
		// siteops' namespace with them; siteops' store migrates as its
		// own role.
		c := cluster.StartFor(t, cluster.Options{
			PostgresURL: admin.String(), Namespaces: []string{"siteops"},
			Databases: &cluster.Databases{Temporal: tDB, Visibility: tVis, User: tRole, Password: tPass},
		})
		cl, err := c.Dial(t.Context(), "siteops")
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if _, err := cl.WorkflowService().DescribeNamespace(t.Context(), &workflowservice.DescribeNamespaceRequest{Namespace: "siteops"}); err != nil {
			t.Errorf("the cluster on %s's databases: describing namespace siteops: %v", tRole, err)
		}
		var conns int
		if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE usename = $1 AND datname IN ($2, $3)`, tRole, tDB, tVis).Scan(&conns); err != nil || conns == 0 {
			t.Errorf("%d connections of %s to its databases while the cluster runs (%v); want the services' own", conns, tRole, err)
		}
		st, err := store.Open(t.Context(), fmt.Sprintf("postgres://%s:%s@%s:%s/%s?sslmode=disable", sRole, sPass, host, port, sDB), store.Options{})
		if err != nil {
			t.Fatalf("siteops' store, migrated as %s: %v", sRole, err)
		}
		_ = st.Close()
	})
}
