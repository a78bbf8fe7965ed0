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

// LeadSyncPosition is where one sync of a site's leads stands after the
// last page it stored. It is written in that page's transaction
// (UpsertLeadsAt), so it never runs ahead of the pages stored nor lags
// them: a retried attempt, or the next run of a sync cut short, goes on
// from Next and reads no stored page again.
type LeadSyncPosition struct {
	// Pages and Leads count the pages and records the sync stored since it
	// began; New how many of those leads were new to the store.
	Pages int `json:"pages"`
	Leads int `json:"leads"`
	New   int `json:"new"`
	// Resume is the cursor of the last page stored; Next the cursor of the
	// first page not stored (nil once Done: that page had no next_cursor).
	Resume *agentsite.Cursor `json:"resume,omitempty"`
	Next   *agentsite.Cursor `json:"next,omitempty"`
	Done   bool              `json:"done,omitempty"`
	// LastPageAt is when the last page was stored: the sync's stall clock.
	LastPageAt time.Time `json:"last_page_at"`
}

// UpsertLeadsAt stores one page of a site's leads as UpsertLeads does and,
// in the same transaction, the position of the sync named syncKey after
// it: pos with New raised by the page's new leads. It returns how many of
// the page's leads were new. An empty page records the position alone.
// The site keeps one position, the last sync's: a new key replaces it.
func (s *Store) UpsertLeadsAt(ctx context.Context, siteID, syncKey string, leads []agentsite.Lead, pos LeadSyncPosition) (int, error) {
	if syncKey == "" {
		return 0, fmt.Errorf("store: a lead sync position of site %s needs its sync's key", siteID)
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
	pos.New += fresh
	b, err := json.Marshal(pos)
	if err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO lead_sync_positions (site_id, sync_key, position, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (site_id) DO UPDATE SET sync_key = excluded.sync_key, position = excluded.position, updated_at = excluded.updated_at`,
		siteID, syncKey, string(b), s.now().UTC()); err != nil {
		return 0, fmt.Errorf("store: recording the lead sync position of site %s: %w", siteID, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return fresh, nil
}

// LeadSyncPosition returns the position the sync named syncKey stored
// with its last page, or ErrNotFound when that sync stored none (the
// site's position, if any, is another sync's).
func (s *Store) LeadSyncPosition(ctx context.Context, siteID, syncKey string) (LeadSyncPosition, error) {
	var raw string
	err := s.db.QueryRowContext(ctx, `SELECT position FROM lead_sync_positions WHERE site_id = $1 AND sync_key = $2`, siteID, syncKey).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return LeadSyncPosition{}, fmt.Errorf("%w: no lead sync position of site %s for sync %s", ErrNotFound, siteID, syncKey)
	}
	if err != nil {
		return LeadSyncPosition{}, fmt.Errorf("store: reading the lead sync position of site %s: %w", siteID, err)
	}
	var pos LeadSyncPosition
	if err := json.Unmarshal([]byte(raw), &pos); err != nil {
		return LeadSyncPosition{}, fmt.Errorf("store: the lead sync position of site %s does not decode: %w", siteID, err)
	}
	return pos, nil
}
