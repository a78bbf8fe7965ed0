package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// KnowledgeHash is the content address of a knowledge text: the SHA-256 of
// its UTF-8 bytes in hex.
func KnowledgeHash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// ErrQuotaExceeded matches errors.Is for a text refused because its owner,
// or every owner together, keeps as many bytes as the quota allows.
var ErrQuotaExceeded = errors.New("store: knowledge text quota exceeded")

// TextQuota bounds the knowledge texts that owners other than the
// operators keep in the store (the Nexus service's callers), so that they
// cannot fill the database the inbox shares. Zero is no limit.
type TextQuota struct {
	PerOwner int64 // bytes one owner keeps
	Total    int64 // bytes every owner together keeps
}

// usedEvery is how stale a text's used_at may get before a read writes it
// again: reads stay reads, and the retention is counted to within it.
const usedEvery = time.Hour

// PutKnowledgeText stores a text under its hash and returns the hash.
// Storing the same text again changes nothing but a stale used_at. The
// texts it stores have no owner and count against no quota: the starter
// stores the operators' texts with it.
//
// A text stored and used within usedEvery is only read: every onboarding
// of a spec stores its texts again, and an upsert that rewrote used_at each
// time made concurrent starts of specs sharing a text wait on that row's
// lock, one commit after another (41–56 ms of a start's 44–64 ms with 12
// in flight, BenchmarkOnboardingInFlight).
func (s *Store) PutKnowledgeText(ctx context.Context, text string) (string, error) {
	hash := KnowledgeHash(text)
	now := s.now().UTC()
	var usedAt sql.NullTime
	err := s.db.QueryRowContext(ctx, `SELECT used_at FROM knowledge_texts WHERE hash = $1`, hash).Scan(&usedAt)
	switch {
	case err == nil && usedAt.Valid && !usedAt.Time.Before(now.Add(-usedEvery)):
		return hash, nil
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return "", fmt.Errorf("store: storing a knowledge text: %w", err)
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO knowledge_texts (hash, text, created_at, bytes, used_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (hash) DO UPDATE SET used_at = excluded.used_at`,
		hash, text, now, len(text), now)
	if err != nil {
		return "", fmt.Errorf("store: storing a knowledge text: %w", err)
	}
	return hash, nil
}

// PutKnowledgeTextAs stores a text for owner, within q: a new text that
// would take owner's stored bytes, or every owner's, past the quota is
// refused with ErrQuotaExceeded. A text already stored (by anyone) is
// only marked used. Two owners' concurrent calls may pass a quota by at
// most one text each.
func (s *Store) PutKnowledgeTextAs(ctx context.Context, owner, text string, q TextQuota) (string, error) {
	hash := KnowledgeHash(text)
	now := s.now().UTC()
	res, err := s.db.ExecContext(ctx, `UPDATE knowledge_texts SET used_at = $2 WHERE hash = $1`, hash, now)
	if err != nil {
		return "", fmt.Errorf("store: storing a knowledge text: %w", err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return hash, nil
	}
	size := int64(len(text))
	var mine, all int64
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(CASE WHEN owner = $1 THEN bytes ELSE 0 END), 0), COALESCE(SUM(bytes), 0)
		FROM knowledge_texts WHERE owner IS NOT NULL`, owner).Scan(&mine, &all); err != nil {
		return "", fmt.Errorf("store: reading the knowledge text quota: %w", err)
	}
	switch {
	case q.PerOwner > 0 && mine+size > q.PerOwner:
		return "", fmt.Errorf("%w: %s keeps %d of its %d bytes of texts, and this one is %d", ErrQuotaExceeded, owner, mine, q.PerOwner, size)
	case q.Total > 0 && all+size > q.Total:
		return "", fmt.Errorf("%w: the service's callers keep %d of their %d bytes of texts together, and this one is %d", ErrQuotaExceeded, all, q.Total, size)
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO knowledge_texts (hash, text, created_at, owner, bytes, used_at) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (hash) DO UPDATE SET used_at = excluded.used_at`,
		hash, text, now, owner, size, now)
	if err != nil {
		return "", fmt.Errorf("store: storing a knowledge text: %w", err)
	}
	return hash, nil
}

// KnowledgeText returns the text stored under hash and marks it used, so
// that the purge keeps a text that onboardings still read.
func (s *Store) KnowledgeText(ctx context.Context, hash string) (string, error) {
	now := s.now().UTC()
	if _, err := s.db.ExecContext(ctx, `UPDATE knowledge_texts SET used_at = $2 WHERE hash = $1 AND (used_at IS NULL OR used_at < $3)`,
		hash, now, now.Add(-usedEvery)); err != nil {
		return "", fmt.Errorf("store: reading knowledge text %s: %w", hash, err)
	}
	var text string
	err := s.db.QueryRowContext(ctx, `SELECT text FROM knowledge_texts WHERE hash = $1`, hash).Scan(&text)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%w: knowledge text %s; the starter stores texts before it starts the workflow, and texts unused for the retention period (SITEOPS_KNOWLEDGE_RETENTION) are purged: store it again", ErrNotFound, hash)
	}
	return text, err
}

// PurgeKnowledgeTexts deletes the texts that nothing stored, referenced or
// read since before: an onboarding reads its texts as it adds them, and a
// start references them, so only texts no onboarding needs any more go.
// A text without used_at is left alone: the release before this one
// stores and reads texts without marking them, so while it may still run
// beside this one, its texts' age says nothing of their use.
func (s *Store) PurgeKnowledgeTexts(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM knowledge_texts WHERE used_at < $1`, before.UTC())
	if err != nil {
		return 0, fmt.Errorf("store: purging knowledge texts: %w", err)
	}
	return res.RowsAffected()
}
