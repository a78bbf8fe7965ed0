package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/siteops/siteops/agentsite"
)

// LeadSiteSync is what one sync of a lead event shard (workflow
// LeadEvents) did for one site: the events it was woken by and how it
// ended. Key names the sync, once per site: recording a key already
// recorded changes nothing.
type LeadSiteSync struct {
	SiteID string
	Key    string
	// Order is when the sync was scheduled (ms): a record of an earlier
	// sync than the one the site's record holds changes nothing.
	Order      int64
	Events     int
	Duplicates int
	CaughtUp   bool
	// Error is why the sync did not finish, empty when it did.
	Error string
	At    time.Time
}

// LeadSiteSyncs is what the lead event shards did for a site in all
// (RecordLeadSiteSync's sums and the last sync's state).
type LeadSiteSyncs struct {
	Events     int
	Duplicates int
	Syncs      int
	Leads      int
	CaughtUp   bool
	LastError  string
	LastSyncAt time.Time
}

// RecordLeadSiteSync adds one shard sync of a site to the site's record:
// its events to the counts, its end as the site's last state, with the
// leads the store holds for the site now. It is
// idempotent per sync: an activity that recorded its sync and was then
// retried does not count it twice (the same key), and an attempt that
// outlived its timeout and records after a later sync of the site
// changes nothing (an earlier Order).
func (s *Store) RecordLeadSiteSync(ctx context.Context, r LeadSiteSync) error {
	if r.Key == "" {
		return fmt.Errorf("store: a lead sync of site %s needs its key", r.SiteID)
	}
	syncs := 0
	if r.Error == "" {
		syncs = 1
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO lead_site_syncs (site_id, events, duplicate_events, syncs, leads, caught_up, last_error, last_key, last_sync_at, last_order)
		VALUES ($1, $2, $3, $4, (SELECT COUNT(*) FROM leads WHERE site_id = $1), $5, $6, $7, $8, $9)
		ON CONFLICT (site_id) DO UPDATE SET
			events = lead_site_syncs.events + excluded.events,
			duplicate_events = lead_site_syncs.duplicate_events + excluded.duplicate_events,
			syncs = lead_site_syncs.syncs + excluded.syncs,
			leads = excluded.leads, caught_up = excluded.caught_up, last_error = excluded.last_error,
			last_key = excluded.last_key, last_sync_at = excluded.last_sync_at, last_order = excluded.last_order
		WHERE lead_site_syncs.last_key <> excluded.last_key AND lead_site_syncs.last_order < excluded.last_order`,
		r.SiteID, r.Events, r.Duplicates, syncs, r.CaughtUp, r.Error, r.Key, r.At.UTC(), r.Order); err != nil {
		return fmt.Errorf("store: recording a lead sync of site %s: %w", r.SiteID, err)
	}
	return nil
}

// LeadSiteSyncs returns what the lead event shards did for the site,
// ErrNotFound when they never synced it.
func (s *Store) LeadSiteSyncs(ctx context.Context, siteID string) (LeadSiteSyncs, error) {
	var r LeadSiteSyncs
	err := s.db.QueryRowContext(ctx, `SELECT events, duplicate_events, syncs, leads, caught_up, last_error, last_sync_at FROM lead_site_syncs WHERE site_id = $1`, siteID).
		Scan(&r.Events, &r.Duplicates, &r.Syncs, &r.Leads, &r.CaughtUp, &r.LastError, &r.LastSyncAt)
	if errors.Is(err, sql.ErrNoRows) {
		return LeadSiteSyncs{}, fmt.Errorf("%w: no lead event shard synced site %s", ErrNotFound, siteID)
	}
	if err != nil {
		return LeadSiteSyncs{}, fmt.Errorf("store: reading the lead syncs of site %s: %w", siteID, err)
	}
	r.LastSyncAt = r.LastSyncAt.UTC()
	return r, nil
}

// LeadSyncFrom is where a new sync of the site's leads starts: the first
// page its last sync did not store or, when that sync reached the end, the
// last page it stored, which leads added since may have joined (the
// collection grows at its end). nil, the start, when no keyed sync
// stored a page of the site. Whichever sync wrote the position, every
// page before it is stored.
func (s *Store) LeadSyncFrom(ctx context.Context, siteID string) (*agentsite.Cursor, error) {
	var raw string
	err := s.db.QueryRowContext(ctx, `SELECT position FROM lead_sync_positions WHERE site_id = $1`, siteID).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: reading the lead sync position of site %s: %w", siteID, err)
	}
	var pos LeadSyncPosition
	if err := json.Unmarshal([]byte(raw), &pos); err != nil {
		// Read the collection again from the start: upserts make it safe.
		return nil, nil //nolint:nilerr // an undecodable position costs a full read, never a lead
	}
	if !pos.Done && pos.Next != nil {
		return pos.Next, nil
	}
	return pos.Resume, nil
}
