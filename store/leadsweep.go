package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// LeadSweepSite is one site the lead sweep checks: where its lead sync
// stood after the last page it stored.
type LeadSweepSite struct {
	SiteID   string
	SyncKey  string
	Position LeadSyncPosition
	// Undecodable is set when the stored position does not decode; the
	// sweep counts the site as failed and goes on with the others.
	Undecodable bool
}

// LeadSweepSites returns at most limit sites that have a lead sync
// position, in site id order, starting after the site id after ("" for
// the first).
func (s *Store) LeadSweepSites(ctx context.Context, after string, limit int) ([]LeadSweepSite, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT site_id, sync_key, position FROM lead_sync_positions WHERE site_id > $1 ORDER BY site_id LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: listing lead sync positions: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []LeadSweepSite
	for rows.Next() {
		var l LeadSweepSite
		var raw string
		if err := rows.Scan(&l.SiteID, &l.SyncKey, &raw); err != nil {
			return nil, err
		}
		l.Undecodable = json.Unmarshal([]byte(raw), &l.Position) != nil
		out = append(out, l)
	}
	return out, rows.Err()
}

// KnownLeads returns how many of ids the store holds for the site.
func (s *Store) KnownLeads(ctx context.Context, siteID string, ids []string) (int, error) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return knownLeads(ctx, s.db, siteID, args)
}

// knownLeads counts the leads of ids the site has, read through q.
func knownLeads(ctx context.Context, q leadWriter, siteID string, ids []any) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	// Only placeholders are concatenated; every value is a bound argument.
	inList := `SELECT COUNT(*) FROM leads WHERE site_id = $1 AND lead_id IN (` + placeholdersFrom(2, len(ids)) + `)` //nolint:gosec // see above
	var n int
	if err := q.QueryRowContext(ctx, inList, append([]any{siteID}, ids...)...).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: reading known leads of site %s: %w", siteID, err)
	}
	return n, nil
}

// LeadSyncChecked records that the store was found to hold every lead the
// service lists for the site at at (the lead sweep's check): the site's
// position counts as current from then on (StaleLeadSyncs,
// LeadSyncLastSeen), as after a sync that stored a page. It leaves the
// row alone when a sync with another key has replaced it since the check
// read it, or when it is already newer.
func (s *Store) LeadSyncChecked(ctx context.Context, siteID, syncKey string, at time.Time) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE lead_sync_positions SET updated_at = $3 WHERE site_id = $1 AND sync_key = $2 AND updated_at < $3`,
		siteID, syncKey, at.UTC()); err != nil {
		return fmt.Errorf("store: recording the lead sweep's check of site %s: %w", siteID, err)
	}
	return nil
}
