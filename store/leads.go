package store

import (
	"context"
	"fmt"

	"github.com/siteops/siteops/agentsite"
)

// UpsertLeads writes one page of a site's leads in a single statement: new
// leads are inserted, known ones get their record and last_seen refreshed.
// It returns how many rows the page touched.
func (s *Store) UpsertLeads(ctx context.Context, siteID string, leads []agentsite.Lead) (int, error) {
	if len(leads) == 0 {
		return 0, nil
	}
	now := s.now().UTC()
	args := make([]any, 0, len(leads)*5)
	seen := make(map[string]bool, len(leads))
	rows := 0
	for _, l := range leads {
		if l.ID == "" {
			return 0, fmt.Errorf("store: a lead of site %s has no id", siteID)
		}
		if seen[l.ID] {
			continue // ON CONFLICT cannot touch one row twice in a statement
		}
		seen[l.ID] = true
		args = append(args, siteID, l.ID, string(l.Raw), now, now)
		rows++
	}
	// Only placeholders are concatenated; every value is a bound argument.
	q := `INSERT INTO leads (site_id, lead_id, raw, first_seen, last_seen) VALUES ` + placeholders(rows, 5) + //nolint:gosec // see above
		` ON CONFLICT (site_id, lead_id) DO UPDATE SET raw = excluded.raw, last_seen = excluded.last_seen`
	res, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("store: upserting %d leads of site %s: %w", rows, siteID, err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// CountLeads returns how many leads of a site are stored.
func (s *Store) CountLeads(ctx context.Context, siteID string) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM leads WHERE site_id = $1`, siteID).Scan(&n)
	return n, err
}

// LeadIDs returns the ids of a site's stored leads in id order.
func (s *Store) LeadIDs(ctx context.Context, siteID string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT lead_id FROM leads WHERE site_id = $1 ORDER BY lead_id`, siteID)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
