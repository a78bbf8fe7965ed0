package store

import (
	"context"
	"time"
)

// MigrateTo moves the schema of s up or down to version, for tests of a
// migration.
func MigrateTo(ctx context.Context, s *Store, version int64) error {
	p, err := s.migrations()
	if err != nil {
		return err
	}
	cur, err := p.GetDBVersion(ctx)
	if err != nil {
		return err
	}
	if version < cur {
		_, err = p.DownTo(ctx, version)
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}

// LeadRecord reads what the store holds of one lead: its record and when
// it was last written.
func LeadRecord(ctx context.Context, s *Store, siteID, leadID string) (raw string, lastSeen time.Time, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT raw, last_seen FROM leads WHERE site_id = $1 AND lead_id = $2`, siteID, leadID).Scan(&raw, &lastSeen)
	return raw, lastSeen, err
}

// ClaimQuery is ClaimEvents' statement, and BacklogQueries InboxBacklog's,
// for tests of their plans.
func ClaimQuery(s *Store) string { return s.claimQuery() }

// BacklogQueries are InboxBacklog's statements.
var BacklogQueries = map[string]string{"pending": pendingCount, "dead": deadCount, "oldest": oldestPending}

// TextUsedAt reads when a knowledge text was last marked used.
func TextUsedAt(ctx context.Context, s *Store, hash string) (time.Time, error) {
	var at time.Time
	err := s.db.QueryRowContext(ctx, `SELECT used_at FROM knowledge_texts WHERE hash = $1`, hash).Scan(&at)
	return at, err
}
