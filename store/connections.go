package store

import (
	"context"
	"fmt"
	"time"
)

// ConnectionBudget is what a PostgreSQL server allows and what is open on
// it now, and what the siteops processes registered in the store may open.
type ConnectionBudget struct {
	// MaxConnections is the server's max_connections; Reserved its
	// superuser_reserved_connections, which other roles cannot use.
	MaxConnections, Reserved int
	// Open counts the server's client sessions now, every database and
	// role; OpenSiteops those that call themselves ApplicationName.
	Open, OpenSiteops int
	// Processes are the workers and ingresses seen in the process registry
	// within the last two heartbeats' time.
	Processes []Process
}

// Allowed is what the server allows roles without superuser.
func (b ConnectionBudget) Allowed() int { return b.MaxConnections - b.Reserved }

// processSeenWithin is how recently a registered process must have
// heartbeated to count as running: two of its 30 s beats and a margin.
const processSeenWithin = 75 * time.Second

// ConnectionBudget reads the server's limits and sessions and the
// processes registered as running. It is for PostgreSQL only: a SQLite
// store is one connection per process and has no server.
func (s *Store) ConnectionBudget(ctx context.Context) (ConnectionBudget, error) {
	if s.dialect != Postgres {
		return ConnectionBudget{}, fmt.Errorf("store: a connection budget is PostgreSQL's; this store is %s", s.dialect)
	}
	var b ConnectionBudget
	var maxConns, reserved string
	if err := s.db.QueryRowContext(ctx, `SELECT current_setting('max_connections'), current_setting('superuser_reserved_connections')`).Scan(&maxConns, &reserved); err != nil {
		return b, fmt.Errorf("store: reading the server's connection limits: %w", err)
	}
	if _, err := fmt.Sscan(maxConns, &b.MaxConnections); err != nil {
		return b, fmt.Errorf("store: max_connections %q: %w", maxConns, err)
	}
	if _, err := fmt.Sscan(reserved, &b.Reserved); err != nil {
		return b, fmt.Errorf("store: superuser_reserved_connections %q: %w", reserved, err)
	}
	if err := s.db.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE application_name = $1) FROM pg_stat_activity WHERE backend_type = 'client backend'`,
		ApplicationName).Scan(&b.Open, &b.OpenSiteops); err != nil {
		return b, fmt.Errorf("store: counting the server's sessions: %w", err)
	}
	ps, err := s.Processes(ctx, s.now().Add(-processSeenWithin))
	if err != nil {
		return b, err
	}
	b.Processes = ps
	return b, nil
}
