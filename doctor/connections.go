package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/siteops/siteops/store"
)

// Connections checks the store's connection budget on PostgreSQL: that the
// pools of the workers and ingresses registered in the store (each
// SITEOPS_DATABASE_MAX_CONNS, recorded as it registers), together with
// the other clients' sessions open on the server now (Temporal's own, if
// it shares the server), fit in what the server allows (max_connections
// less superuser_reserved_connections). Past it, a process that grows its
// pool under load waits on "too many clients already". It warns and never
// fails: the processes run until their pools grow. SQLite has no server
// to share.
func Connections(ctx context.Context, st *store.Store) Result {
	const check = "database connections"
	if st.MaxConns() == 1 {
		return Skipped(check, "SQLite: one connection per process and no server to share")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b, err := st.ConnectionBudget(ctx)
	if err != nil {
		return Result{Check: check, Status: Warn, Detail: "the connection budget could not be read: " + oneLine(err.Error())}
	}
	return connectionBudget(b)
}

// connectionBudget judges a budget read (Connections).
func connectionBudget(b store.ConnectionBudget) Result {
	const check = "database connections"
	pools, roles := 0, map[string][]int{}
	for _, p := range b.Processes {
		n := p.MaxConns
		if n <= 0 {
			n = store.DefaultMaxConns // a release before pools were recorded
		}
		pools += n
		roles[p.Role] = append(roles[p.Role], n)
	}
	others := max(b.Open-b.OpenSiteops, 0)
	var parts []string
	for _, role := range []string{"worker", "ingress"} {
		if ns := roles[role]; len(ns) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s(s) %v", len(ns), role, ns))
		}
	}
	for role, ns := range roles {
		if role != "worker" && role != "ingress" {
			parts = append(parts, fmt.Sprintf("%d %s(s) %v", len(ns), role, ns))
		}
	}
	who := "no worker or ingress registered"
	if len(parts) > 0 {
		who = strings.Join(parts, ", ")
	}
	need := pools + others
	detail := fmt.Sprintf("the pools of the processes using the store may open %d (%s), other clients have %d open now: %d of the %d the server allows (max_connections %d less %d reserved)",
		pools, who, others, need, b.Allowed(), b.MaxConnections, b.Reserved)
	if need > b.Allowed() {
		return Result{Check: check, Status: Warn, Detail: detail + "; under load a process will wait on \"too many clients already\": lower SITEOPS_DATABASE_MAX_CONNS, run fewer processes, or raise max_connections (docs/sizing.md, Connection budget)"}
	}
	return ok(check, "%s", detail)
}
