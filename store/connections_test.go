package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// TestConnectionBudget checks, on PostgreSQL, that the pool's size is the
// one asked, that a registered process records it, and that the budget
// reads the server's limits, counts the store's own session as siteops'
// and lists the process; on SQLite that there is one connection and no
// budget to read.
func TestConnectionBudget(t *testing.T) {
	st := storetest.OpenWith(t, store.Postgres, store.Options{MaxConns: 7})
	ctx := t.Context()
	if st.MaxConns() != 7 {
		t.Fatalf("MaxConns = %d, want 7", st.MaxConns())
	}
	p := store.Process{ID: "proc-1", Role: "worker", Release: 3, StartedAt: time.Now(), MaxConns: st.MaxConns()}
	if err := st.Heartbeat(ctx, p); err != nil {
		t.Fatal(err)
	}
	b, err := st.ConnectionBudget(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.MaxConnections <= 0 || b.Reserved < 0 || b.Allowed() != b.MaxConnections-b.Reserved || b.Open < b.OpenSiteops || b.OpenSiteops < 1 {
		t.Errorf("budget %+v: want the server's limits, and at least this store's session counted as siteops'", b)
	}
	if !slices.ContainsFunc(b.Processes, func(q store.Process) bool { return q.ID == "proc-1" && q.MaxConns == 7 && q.Role == "worker" }) {
		t.Errorf("budget's processes %+v; want proc-1, a worker with a pool of 7", b.Processes)
	}

	lite := storetest.OpenWith(t, store.SQLite, store.Options{MaxConns: 7})
	if lite.MaxConns() != 1 {
		t.Errorf("SQLite MaxConns = %d, want 1", lite.MaxConns())
	}
	if _, err := lite.ConnectionBudget(ctx); err == nil {
		t.Error("SQLite has a connection budget; want an error saying it is PostgreSQL's")
	}
}
