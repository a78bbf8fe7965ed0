package schemas_test

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/schemagen"
	"github.com/siteops/siteops/schemas"
	"github.com/siteops/siteops/workflows"
)

// readmeTable returns the rows, as cells, of the README table that follows
// the line <!-- schemas-test: name -->, without its header.
func readmeTable(t *testing.T, name string) [][]string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	marker := "<!-- schemas-test: " + name + " -->\n"
	_, rest, found := strings.Cut(string(b), marker)
	if !found {
		t.Fatalf("the README has no %q; the test reads the table after it", strings.TrimSpace(marker))
	}
	var rows [][]string
	for i, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if i < 2 { // the header and its rule
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		rows = append(rows, cells)
	}
	if len(rows) == 0 {
		t.Fatalf("the table after %q has no rows", strings.TrimSpace(marker))
	}
	return rows
}

var (
	codeSpan   = regexp.MustCompile("`([^`]*)`")
	schemaLink = regexp.MustCompile(`\(schemas/([a-z0-9-]+\.schema\.json)\)`)
)

// code returns the first code span of a cell.
func code(t *testing.T, cell string) string {
	t.Helper()
	m := codeSpan.FindStringSubmatch(cell)
	if m == nil {
		t.Fatalf("no code in the cell %q", cell)
	}
	return m[1]
}

// schemaOf returns the schema file a cell links to, checking that it is
// one that is generated; "" when the cell links to none.
func schemaOf(t *testing.T, cell string) string {
	t.Helper()
	m := schemaLink.FindStringSubmatch(cell)
	if m == nil {
		return ""
	}
	if !slices.ContainsFunc(schemagen.Files, func(f schemagen.File) bool { return f.Name == m[1] }) {
		t.Errorf("the README links to schemas/%s, which is not generated", m[1])
	}
	return m[1]
}

// TestTheREADMEExamplesMatchTheirSchemas checks the documents of the
// README's table of what the schemas check: a valid one breaks nothing, and
// a refused one breaks exactly one rule, so that it is refused for the rule
// its row names and not for a typo.
func TestTheREADMEExamplesMatchTheirSchemas(t *testing.T) {
	refused := 0
	for _, row := range readmeTable(t, "examples") {
		if len(row) != 3 {
			t.Fatalf("row %q: want 3 cells (document, schema, verdict)", row)
		}
		doc, schema, verdict := code(t, row[0]), schemaOf(t, row[1]), row[2]
		if schema == "" {
			t.Fatalf("row %q links to no schema", row)
		}
		problems, err := schemas.Validate(schema, []byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		switch {
		case strings.HasPrefix(verdict, "valid"):
			if len(problems) > 0 {
				t.Errorf("%s breaks %s: %v; the README says it is valid", doc, schema, problems)
			}
		case strings.HasPrefix(verdict, "refused"):
			refused++
			if len(problems) != 1 {
				t.Errorf("%s breaks %d rules of %s (%v); the README says it is %s, and a refused example breaks that one rule", doc, len(problems), schema, problems, verdict)
			}
		default:
			t.Errorf("row %q: the verdict starts with valid or refused", row)
		}
	}
	if refused == 0 {
		t.Error("the table refuses nothing")
	}
}

// TestTheREADMEMessagesMatchTheirSchemas checks the argument of every
// message the README says a caller may send against its schema.
func TestTheREADMEMessagesMatchTheirSchemas(t *testing.T) {
	for _, row := range readmeTable(t, "messages") {
		if len(row) != 5 {
			t.Fatalf("row %q: want 5 cells (workflow, message, argument, schema, answer)", row)
		}
		kind, ok := workflows.KindNamed(code(t, row[0]))
		if !ok {
			t.Errorf("row %q names no workflow of the catalogue", row)
		}
		schema := schemaOf(t, row[3])
		if schema == "" {
			t.Fatalf("row %q links to no schema of the argument", row)
		}
		schemaOf(t, row[4])
		doc := code(t, row[2])
		if problems, err := schemas.Validate(schema, []byte(doc)); err != nil || len(problems) > 0 {
			t.Errorf("%s's message %s: %s breaks %s: %v %v", kind.Name, code(t, row[1]), doc, schema, problems, err)
		}
	}
}

// TestTheREADMEStatesTheCataloguePolicies holds the README's table for
// callers that start workflows directly to workflows.Catalogue: a row for
// every workflow, with its ID form, its reuse and conflict policies by
// Temporal's names, and the schema of its result (none for a workflow
// that returns none).
func TestTheREADMEStatesTheCataloguePolicies(t *testing.T) {
	eachCatalogueRow(t, "id-policies", "type, ID, reuse, conflict, defaults, result", func(k workflows.Kind, row []string) {
		reuse := strings.TrimPrefix(enumspb.WorkflowIdReusePolicy_name[int32(k.Policy.Reuse)], "WORKFLOW_ID_REUSE_POLICY_")
		conflict := strings.TrimPrefix(enumspb.WorkflowIdConflictPolicy_name[int32(k.Policy.Conflict)], "WORKFLOW_ID_CONFLICT_POLICY_")
		if got := code(t, row[2]); got != reuse {
			t.Errorf("%s: the README says reuse policy %s; the catalogue's is %s", k.Name, got, reuse)
		}
		if got := code(t, row[3]); got != conflict {
			t.Errorf("%s: the README says conflict policy %s; the catalogue's is %s", k.Name, got, conflict)
		}
		fn := reflect.TypeOf(k.Func)
		result := schemaOf(t, row[5])
		switch {
		case fn.NumOut() == 1 && !strings.HasPrefix(row[5], "none"):
			t.Errorf("%s returns no result; the README's row says %q", k.Name, row[5])
		case fn.NumOut() == 2:
			i := slices.IndexFunc(schemagen.Files, func(f schemagen.File) bool { return f.Name == result })
			if i < 0 || schemagen.Files[i].Type != fn.Out(0) || !schemagen.Files[i].Output {
				t.Errorf("%s's result is a %s; the README links %q, which is not its schema", k.Name, fn.Out(0), result)
			}
		}
	})
}

// TestTheREADMEWorkflowsTableIsTheCatalogue checks the README's table of
// workflows against workflows.Catalogue: one row per kind, its ID prefix
// and its versioning behaviour (Pinned or AutoUpgrade).
func TestTheREADMEWorkflowsTableIsTheCatalogue(t *testing.T) {
	eachCatalogueRow(t, "workflows", "type, ID, ID policy, messages, versioning", func(k workflows.Kind, row []string) {
		want := map[workflow.VersioningBehavior]string{
			workflow.VersioningBehaviorPinned:      "Pinned",
			workflow.VersioningBehaviorAutoUpgrade: "AutoUpgrade",
		}[k.Versioning]
		if got := row[4]; got != want {
			t.Errorf("%s: the README says versioning %q; the catalogue's is %q", k.Name, got, want)
		}
	})
}

// eachCatalogueRow reads the README table after <!-- schemas-test: table
// -->, whose rows have the cells columns names, the first two a workflow
// type and its ID, and holds it to workflows.Catalogue: a row for every
// kind and none for anything else, each ID with the kind's prefix; check
// is called with each kind and its row.
func eachCatalogueRow(t *testing.T, table, columns string, check func(k workflows.Kind, row []string)) {
	t.Helper()
	cells := len(strings.Split(columns, ", "))
	rows := map[string][]string{}
	for _, row := range readmeTable(t, table) {
		if len(row) != cells {
			t.Fatalf("row %q: want %d cells (%s)", row, cells, columns)
		}
		rows[code(t, row[0])] = row
	}
	for _, k := range workflows.Catalogue {
		row, ok := rows[k.Name]
		if !ok {
			t.Errorf("the README's %s table has no row for %s", table, k.Name)
			continue
		}
		delete(rows, k.Name)
		if id := code(t, row[1]); !strings.HasPrefix(id, k.Prefix) {
			t.Errorf("%s: the README says ID %s; its IDs start with %s", k.Name, id, k.Prefix)
		}
		check(k, row)
	}
	for name := range rows {
		t.Errorf("the README's %s table has a row for %s, which is not in the catalogue", table, name)
	}
}

// TestTheCodePointsAreCounted checks that lengths count code points, as
// JSON Schema and the contract do, not bytes.
func TestTheCodePointsAreCounted(t *testing.T) {
	for doc, want := range map[string]int{
		`{"text": "🙂🙂🙂🙂"}`:  1, // 4 code points, 16 bytes
		`{"text": "🙂🙂🙂🙂🙂"}`: 0,
		`{"text": "abcde"}`: 0,
	} {
		problems, err := schemas.Validate(schemas.NexusStoreKnowledgeInput, []byte(doc))
		if err != nil || len(problems) != want {
			t.Errorf("%s: %v %v; want %d problem(s)", doc, problems, err, want)
		}
	}
	long := `{"text": "` + strings.Repeat("é", 200_000) + `"}`
	if problems, _ := schemas.Validate(schemas.NexusStoreKnowledgeInput, []byte(long)); len(problems) > 0 {
		t.Errorf("200,000 code points (400,000 bytes): %v; want none", problems)
	}
	if problems, _ := schemas.Validate(schemas.NexusStoreKnowledgeInput, []byte(strings.Replace(long, "é", "éé", 1))); len(problems) != 1 {
		t.Errorf("200,001 code points: %v; want one problem", problems)
	}
}
