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
	// Failing is set when an earlier sweep recorded the site as failing
	// (RecordLeadSweepFailure): a read that succeeds clears it.
	Failing bool
}

// LeadSweepSites returns at most limit sites that have a lead sync
// position, in site id order, starting after the site id after ("" for
// the first).
func (s *Store) LeadSweepSites(ctx context.Context, after string, limit int) ([]LeadSweepSite, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT p.site_id, p.sync_key, p.position, f.site_id IS NOT NULL
		FROM lead_sync_positions p LEFT JOIN lead_sweep_failures f ON f.site_id = p.site_id
		WHERE p.site_id > $1 ORDER BY p.site_id LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: listing lead sync positions: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []LeadSweepSite
	for rows.Next() {
		var l LeadSweepSite
		var raw string
		if err := rows.Scan(&l.SiteID, &l.SyncKey, &raw, &l.Failing); err != nil {
			return nil, err
		}
		l.Undecodable = json.Unmarshal([]byte(raw), &l.Position) != nil
		out = append(out, l)
	}
	return out, rows.Err()
}

// LeadSweepFailure is a site whose leads the lead sweep could not read.
type LeadSweepFailure struct {
	SiteID string
	// Reason is the failure's class (an HTTP status, "network", ...),
	// never a message, a body or a key.
	Reason string
	// Since is the first failure of the run of failures, LastAt the
	// latest, Failures their count.
	Since    time.Time
	LastAt   time.Time
	Failures int64
}

// RecordLeadSweepFailure records that the sweep could not read the site's
// leads at at, for reason: a site already failing keeps its Since and
// counts one failure more.
func (s *Store) RecordLeadSweepFailure(ctx context.Context, siteID, reason string, at time.Time) error {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO lead_sweep_failures (site_id, reason, since, last_at, failures) VALUES ($1, $2, $3, $3, 1)
		ON CONFLICT (site_id) DO UPDATE SET reason = excluded.reason, last_at = excluded.last_at, failures = lead_sweep_failures.failures + 1`,
		siteID, reason, at.UTC()); err != nil {
		return fmt.Errorf("store: recording the lead sweep's failure at site %s: %w", siteID, err)
	}
	return nil
}

// ClearLeadSweepFailure forgets that the sweep could not read the site's
// leads: its read succeeded.
func (s *Store) ClearLeadSweepFailure(ctx context.Context, siteID string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM lead_sweep_failures WHERE site_id = $1`, siteID); err != nil {
		return fmt.Errorf("store: clearing the lead sweep's failure at site %s: %w", siteID, err)
	}
	return nil
}

// LeadSweepFailures returns the sites the sweep could not read whose last
// failure is after since, the longest failing first, at most limit, and
// how many there are in all.
func (s *Store) LeadSweepFailures(ctx context.Context, since time.Time, limit int) ([]LeadSweepFailure, int, error) {
	var total int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM lead_sweep_failures WHERE last_at > $1`, since.UTC()).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("store: counting the lead sweep's failures: %w", err)
	}
	if total == 0 || limit <= 0 {
		return nil, total, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT site_id, reason, since, last_at, failures FROM lead_sweep_failures
		WHERE last_at > $1 ORDER BY since, site_id LIMIT $2`, since.UTC(), limit)
	if err != nil {
		return nil, 0, fmt.Errorf("store: listing the lead sweep's failures: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []LeadSweepFailure
	for rows.Next() {
		var f LeadSweepFailure
		if err := rows.Scan(&f.SiteID, &f.Reason, &f.Since, &f.LastAt, &f.Failures); err != nil {
			return nil, 0, err
		}
		f.Since, f.LastAt = f.Since.UTC(), f.LastAt.UTC()
		out = append(out, f)
	}
	return out, total, rows.Err()
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
