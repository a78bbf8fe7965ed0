package store_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// firstExpandOnly is the first migration written under the rule that a
// release's migrations only expand (see store/release.go): the ones before
// it shipped before the rule.
const firstExpandOnly = 6

// contractOnly are the statements a migration may not run, since the
// previous release, still running beside it during a rollout, reads and
// writes the store as it was: they belong to a release's contract steps
// (store.Finalize), which run once no process of the previous release
// remains.
var contractOnly = []struct {
	re  *regexp.Regexp
	why string
}{
	{regexp.MustCompile(`(?is)\bDROP\s+(TABLE|COLUMN|INDEX|VIEW|TRIGGER|FUNCTION|TYPE|SCHEMA)\b`), "drops what the previous release may use"},
	{regexp.MustCompile(`(?is)\bRENAME\b`), "renames what the previous release names"},
	{regexp.MustCompile(`(?is)\bALTER\s+TABLE\s+\S+\s+ALTER\s+(COLUMN\s+)?\S+\s+(SET\s+DATA\s+)?TYPE\b`), "changes a column's type under the previous release"},
	{regexp.MustCompile(`(?is)\bSET\s+NOT\s+NULL\b`), "makes a column the previous release leaves empty required"},
	{regexp.MustCompile(`(?is)\bADD\s+CONSTRAINT\b|\bADD\s+(PRIMARY\s+KEY|UNIQUE|FOREIGN\s+KEY|CHECK)\b`), "adds a constraint the previous release's writes may break"},
	{regexp.MustCompile(`(?is)\bCREATE\s+UNIQUE\s+INDEX\b`), "adds a uniqueness the previous release's writes may break"},
	{regexp.MustCompile(`(?is)\bDELETE\s+FROM\b|\bTRUNCATE\b`), "removes rows the previous release may need"},
}

// addColumn matches ALTER TABLE ... ADD [COLUMN] name type ...; (one
// statement).
var addColumn = regexp.MustCompile(`(?is)\bALTER\s+TABLE\s+(\S+)\s+ADD\s+(COLUMN\s+)?([^;]*)`)

// TestMigrationsOnlyExpand reads every migration from firstExpandOnly on,
// in both dialects, and refuses in its Up part anything the previous
// release could not live beside: drops, renames, type changes, new NOT
// NULL without a default, new constraints or unique indexes on existing
// tables, deletes. Both dialects must have the same migrations.
func TestMigrationsOnlyExpand(t *testing.T) {
	versions := map[string][]string{}
	for _, dialect := range []string{"sqlite", "postgres"} {
		files, err := filepath.Glob(filepath.Join("migrations", dialect, "*.sql"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no migrations for %s", dialect)
		}
		for _, f := range files {
			base := filepath.Base(f)
			versions[dialect] = append(versions[dialect], base)
			n, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
			if err != nil {
				t.Fatalf("%s: the name does not start with its version", f)
			}
			if n < firstExpandOnly {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			problems := expandProblems(string(b))
			if dialect == "postgres" {
				problems = append(problems, blockingIndexes(string(b))...)
			}
			for _, problem := range problems {
				t.Errorf("%s: %s; a migration only expands (tables, nullable columns or columns with a constant default, indexes, backfills) — put it in the release's contract steps (store.Finalize), which run at `siteops release finalize`", f, problem)
			}
		}
	}
	if !slices.Equal(versions["sqlite"], versions["postgres"]) {
		t.Errorf("the dialects' migrations differ:\nsqlite   %v\npostgres %v", versions["sqlite"], versions["postgres"])
	}
}

// expandProblems lists what in a migration's Up part is not expand-only.
func expandProblems(sql string) []string {
	up, _, _ := strings.Cut(sql, "-- +goose Down")
	up = stripComments(up)
	var out []string
	for _, c := range contractOnly {
		if m := c.re.FindString(up); m != "" {
			out = append(out, strings.Join(strings.Fields(m), " ")+": "+c.why)
		}
	}
	for _, m := range addColumn.FindAllStringSubmatch(up, -1) {
		def := strings.ToUpper(strings.Join(strings.Fields(m[3]), " "))
		if strings.Contains(def, "NOT NULL") && !strings.Contains(def, "DEFAULT") {
			out = append(out, "ALTER TABLE "+m[1]+" ADD "+strings.Join(strings.Fields(m[3]), " ")+": a NOT NULL column without a default, which the previous release's inserts leave out")
		}
		if strings.Contains(def, "REFERENCES") || strings.Contains(def, "UNIQUE") || strings.Contains(def, "PRIMARY KEY") || strings.Contains(def, "CHECK") {
			out = append(out, "ALTER TABLE "+m[1]+" ADD "+strings.Join(strings.Fields(m[3]), " ")+": a constraint on an existing table")
		}
	}
	return out
}

func stripComments(sql string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(sql, "\n") {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestExpandLintCatchesContractSteps feeds the linter what it must refuse
// and what it must let through.
func TestExpandLintCatchesContractSteps(t *testing.T) {
	refused := []string{
		"ALTER TABLE leads DROP COLUMN raw;",
		"DROP TABLE leads;",
		"DROP INDEX inbox_site_events;",
		"ALTER TABLE leads RENAME COLUMN raw TO body;",
		"ALTER TABLE leads RENAME TO contacts;",
		"ALTER TABLE leads ALTER COLUMN raw TYPE BYTEA;",
		"ALTER TABLE leads ALTER COLUMN raw SET DATA TYPE BYTEA;",
		"ALTER TABLE leads ALTER COLUMN raw SET NOT NULL;",
		"ALTER TABLE leads ADD COLUMN origin TEXT NOT NULL;",
		"ALTER TABLE leads ADD origin TEXT NOT NULL;",
		"ALTER TABLE leads ADD CONSTRAINT one_raw UNIQUE (raw);",
		"ALTER TABLE leads ADD COLUMN site TEXT REFERENCES sites (id);",
		"CREATE UNIQUE INDEX leads_raw ON leads (raw);",
		"DELETE FROM inbox WHERE status = 'handled';",
	}
	for _, sql := range refused {
		if ps := expandProblems("-- +goose Up\n" + sql + "\n"); len(ps) == 0 {
			t.Errorf("the linter lets %q through", sql)
		}
	}
	allowed := []string{
		"ALTER TABLE leads ADD COLUMN origin TEXT;",
		"ALTER TABLE leads ADD type TEXT;",
		"ALTER TABLE webhook_secrets ADD COLUMN key_id TEXT NOT NULL DEFAULT '';",
		"CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER NOT NULL);",
		"CREATE INDEX leads_seen ON leads (last_seen);",
		"UPDATE knowledge_texts SET bytes = length(text) WHERE bytes IS NULL;",
		"-- DROP TABLE leads; (a comment)\nCREATE INDEX x ON leads (site_id);",
		"CREATE INDEX x ON leads (site_id);\n-- +goose Down\nDROP INDEX x;",
	}
	for _, sql := range allowed {
		if ps := expandProblems("-- +goose Up\n" + sql + "\n"); len(ps) != 0 {
			t.Errorf("the linter refuses %q: %v", sql, ps)
		}
	}
}

// busyTables are the tables the ingress and the relay write all the time.
var busyTables = []string{"inbox", "inbox_history", "leads"}

// createIndex matches CREATE INDEX [CONCURRENTLY] [IF NOT EXISTS] name ON table.
var createIndex = regexp.MustCompile(`(?is)\bCREATE\s+INDEX\s+(CONCURRENTLY\s+)?(IF\s+NOT\s+EXISTS\s+)?\S+\s+ON\s+(\w+)`)

// blockingIndexes lists the indexes a PostgreSQL migration builds on a busy
// table without CONCURRENTLY: a plain CREATE INDEX blocks every write to
// the table while it builds, so the ingresses, the previous release's
// among them, would refuse deliveries meanwhile.
func blockingIndexes(sql string) []string {
	up, _, _ := strings.Cut(sql, "-- +goose Down")
	var out []string
	for _, m := range createIndex.FindAllStringSubmatch(up, -1) {
		if m[1] == "" && slices.Contains(busyTables, strings.ToLower(m[3])) {
			out = append(out, "builds an index on "+m[3]+" without CONCURRENTLY (and -- +goose NO TRANSACTION), which blocks every write to it while it builds")
		}
	}
	if len(out) > 0 && !strings.Contains(sql, "-- +goose NO TRANSACTION") {
		out = append(out, "CREATE INDEX CONCURRENTLY needs -- +goose NO TRANSACTION")
	}
	return out
}
