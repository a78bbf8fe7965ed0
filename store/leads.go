package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/siteops/siteops/agentsite"
)

// UpsertLeads writes one page of a site's leads in one transaction: new
// leads are inserted, known ones whose record changed get it and last_seen
// refreshed, and known ones whose record is the same are left as they are
// (no new row version: a lead sync reads its last page again on each
// wake-up, and rewriting its unchanged leads was most of what a lead event
// cost the database; see docs/sizing.md). last_seen is thus when the
// record last changed.
// It returns how many of the page's leads were new, so that callers count
// distinct leads stored rather than records read.
func (s *Store) UpsertLeads(ctx context.Context, siteID string, leads []agentsite.Lead) (int, error) {
	if len(leads) == 0 {
		return 0, nil
	}
	if s.dialect == Postgres {
		// One statement, its own transaction.
		return s.upsertLeads(ctx, s.db, siteID, leads)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	fresh, err := s.upsertLeads(ctx, tx, siteID, leads)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return fresh, nil
}

// leadWriter is a connection pool or a transaction.
type leadWriter interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// upsertLeads writes leads through w and returns how many were new. On
// SQLite w must be a transaction, so that the count of known leads and the
// write see the same rows.
func (s *Store) upsertLeads(ctx context.Context, w leadWriter, siteID string, leads []agentsite.Lead) (int, error) {
	if len(leads) == 0 {
		return 0, nil
	}
	now := s.now().UTC()
	args := make([]any, 0, len(leads)*5)
	seen := make(map[string]bool, len(leads))
	var ids []any
	for _, l := range leads {
		if l.ID == "" {
			return 0, fmt.Errorf("store: a lead of site %s has no id", siteID)
		}
		if seen[l.ID] {
			continue // ON CONFLICT cannot touch one row twice in a statement
		}
		seen[l.ID] = true
		args = append(args, siteID, l.ID, string(l.Raw), now, now)
		ids = append(ids, l.ID)
	}
	rows := len(ids)
	// Only placeholders are concatenated; every value is a bound argument.
	q := `INSERT INTO leads (site_id, lead_id, raw, first_seen, last_seen) VALUES ` + placeholders(rows, 5) + //nolint:gosec // see above
		` ON CONFLICT (site_id, lead_id) DO UPDATE SET raw = excluded.raw, last_seen = excluded.last_seen` +
		` WHERE leads.raw IS DISTINCT FROM excluded.raw`
	if s.dialect == Postgres {
		// xmax is 0 on a row this statement inserted, not on one it updated.
		return countInserted(ctx, w, q+` RETURNING (xmax = 0)`, args, siteID, rows)
	}
	known, err := knownLeads(ctx, w, siteID, ids)
	if err != nil {
		return 0, err
	}
	if _, err := w.ExecContext(ctx, q, args...); err != nil {
		return 0, fmt.Errorf("store: upserting %d leads of site %s: %w", rows, siteID, err)
	}
	return rows - known, nil
}

func countInserted(ctx context.Context, w leadWriter, q string, args []any, siteID string, rows int) (int, error) {
	res, err := w.QueryContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("store: upserting %d leads of site %s: %w", rows, siteID, err)
	}
	defer func() { _ = res.Close() }()
	inserted := 0
	for res.Next() {
		var fresh bool
		if err := res.Scan(&fresh); err != nil {
			return 0, err
		}
		if fresh {
			inserted++
		}
	}
	return inserted, res.Err()
}

// CountLeads returns how many leads of a site are stored.
func (s *Store) CountLeads(ctx context.Context, siteID string) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM leads WHERE site_id = $1`, siteID).Scan(&n)
	return n, err
}

// LeadIDs returns the ids of a site's stored leads in id order.
func (s *Store) LeadIDs(ctx context.Context, siteID string) ([]string, error) {
	return s.queryStrings(ctx, `SELECT lead_id FROM leads WHERE site_id = $1 ORDER BY lead_id`, siteID)
}
