package storetest

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
)

// SecretRows is every row of webhook_secrets, every column, as the
// database returns it, in one string: two calls that return the same
// string saw the table byte for byte the same (bytes are written in hex,
// times to the nanosecond). A test of a writer that must refuse takes it
// before and after. It never appears in output as is: it holds
// ciphertexts.
func SecretRows(t testing.TB, db *sql.DB) string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), `SELECT * FROM webhook_secrets ORDER BY endpoint_id`)
	if err != nil {
		t.Fatalf("storetest: reading webhook_secrets: %v", err)
	}
	defer func() { _ = rows.Close() }()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			switch v := v.(type) {
			case []byte:
				fmt.Fprintf(&b, "%s=%x;", cols[i], v)
			default:
				fmt.Fprintf(&b, "%s=%#v;", cols[i], v)
			}
		}
		b.WriteByte('\n')
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// SameSecretRows fails t, saying which rows changed but never their
// ciphertexts, when after is not before (both from SecretRows).
func SameSecretRows(t testing.TB, what, before, after string) {
	t.Helper()
	if before == after {
		return
	}
	changed := func(rows string) map[string]bool {
		m := map[string]bool{}
		for r := range strings.SplitSeq(rows, "\n") {
			if r != "" {
				m[r] = true
			}
		}
		return m
	}
	b, a := changed(before), changed(after)
	var ids []string
	for r := range b {
		if !a[r] {
			ids = append(ids, endpointOf(r))
		}
	}
	for r := range a {
		if !b[r] {
			ids = append(ids, endpointOf(r))
		}
	}
	t.Errorf("%s changed webhook_secrets (rows of %v differ, added or gone); want every row byte for byte as it was", what, ids)
}

// endpointOf is the endpoint_id column of a row of SecretRows.
func endpointOf(row string) string {
	for f := range strings.SplitSeq(row, ";") {
		if v, ok := strings.CutPrefix(f, "endpoint_id="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "?"
}
