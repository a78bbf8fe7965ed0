package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// LeadSyncSeen is when a site's lead sync last stored a page: every sync
// stores at least the page it resumes from, so it is when the site last
// synced.
type LeadSyncSeen struct {
	SiteID string    `json:"site_id"`
	At     time.Time `json:"last_synced_at"`
}

// StaleLeadSyncs returns the sites whose lead sync last stored a page
// before before, the longest ago first, at most limit of them, and how
// many there are in all. It reads the positions that keyed syncs write
// with their pages (UpsertLeadsAt): one row per site.
func (s *Store) StaleLeadSyncs(ctx context.Context, before time.Time, limit int) ([]LeadSyncSeen, int, error) {
	var total int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM lead_sync_positions WHERE updated_at < $1`, before.UTC()).Scan(&total); err != nil {
		return nil, 0, err
	}
	if total == 0 || limit <= 0 {
		return nil, total, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT site_id, updated_at FROM lead_sync_positions WHERE updated_at < $1 ORDER BY updated_at, site_id LIMIT $2`, before.UTC(), limit)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = rows.Close() }()
	var out []LeadSyncSeen
	for rows.Next() {
		var l LeadSyncSeen
		if err := rows.Scan(&l.SiteID, &l.At); err != nil {
			return nil, 0, err
		}
		l.At = l.At.UTC()
		out = append(out, l)
	}
	return out, total, rows.Err()
}

// LeadSyncLastSeen returns when the site's lead sync last stored a page,
// ErrNotFound when it never has.
func (s *Store) LeadSyncLastSeen(ctx context.Context, siteID string) (time.Time, error) {
	var at time.Time
	err := s.db.QueryRowContext(ctx, `SELECT updated_at FROM lead_sync_positions WHERE site_id = $1`, siteID).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, fmt.Errorf("%w: site %s has no lead sync position", ErrNotFound, siteID)
	}
	return at.UTC(), err
}
