package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
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

// PutKnowledgeText stores a text under its hash and returns the hash, as
// PutKnowledgeTexts does for one text.
func (s *Store) PutKnowledgeText(ctx context.Context, text string) (string, error) {
	hashes, err := s.PutKnowledgeTexts(ctx, []string{text})
	if err != nil {
		return "", err
	}
	return hashes[0], nil
}

// textsPerRead is how many hashes one read of PutKnowledgeTexts looks up,
// well under SQLite's and PostgreSQL's limits on bound arguments.
const textsPerRead = 500

// PutKnowledgeTexts stores texts under their hashes and returns the hashes
// in the order of texts. Storing a text again changes nothing but a stale
// used_at. The texts it stores have no owner and count against no quota:
// the starter stores the operators' texts with it.
//
// A text stored and used within usedEvery is only read, and one read looks
// up every text (up to textsPerRead): every onboarding of a spec stores its
// texts again, an upsert that rewrote used_at each time made concurrent
// starts of specs sharing a text wait on that row's lock, one commit after
// another (41–56 ms of a start's 44–64 ms with 12 in flight,
// BenchmarkOnboardingInFlight), and a read per text made a spec of 500
// sources 500 round trips before its start.
func (s *Store) PutKnowledgeTexts(ctx context.Context, texts []string) ([]string, error) {
	hashes := make([]string, len(texts))
	byHash := make(map[string]string, len(texts))
	for i, text := range texts {
		hashes[i] = KnowledgeHash(text)
		byHash[hashes[i]] = text
	}
	now := s.now().UTC()
	unique := slices.Sorted(maps.Keys(byHash)) // the upserts below lock rows in one order
	fresh := make(map[string]bool, len(unique))
	for chunk := range slices.Chunk(unique, textsPerRead) {
		if err := s.freshTexts(ctx, chunk, now.Add(-usedEvery), fresh); err != nil {
			return nil, fmt.Errorf("store: storing knowledge texts: %w", err)
		}
	}
	for _, hash := range unique {
		if fresh[hash] {
			continue
		}
		text := byHash[hash]
		if _, err := s.db.ExecContext(ctx, `INSERT INTO knowledge_texts (hash, text, created_at, bytes, used_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (hash) DO UPDATE SET used_at = excluded.used_at`,
			hash, text, now, len(text), now); err != nil {
			return nil, fmt.Errorf("store: storing a knowledge text: %w", err)
		}
	}
	return hashes, nil
}

// freshTexts adds to fresh the hashes of those stored whose used_at is
// since, in one read.
func (s *Store) freshTexts(ctx context.Context, hashes []string, since time.Time, fresh map[string]bool) error {
	args := []any{since}
	for _, h := range hashes {
		args = append(args, h)
	}
	// Only placeholders are concatenated; every value is a bound argument.
	q := `SELECT hash FROM knowledge_texts WHERE used_at >= $1 AND hash IN (` + placeholdersFrom(2, len(hashes)) + `)` //nolint:gosec // see above
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			return err
		}
		fresh[h] = true
	}
	return rows.Err()
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
// that the purge keeps a text that onboardings still read. As
// PutKnowledgeText, it reads first and writes only a used_at staler than
// usedEvery: an onboarding's read of a text is one round trip, not an
// update that found nothing to change and then the read (two statements
// of the seven an onboarding made, BenchmarkOnboardingInFlight).
func (s *Store) KnowledgeText(ctx context.Context, hash string) (string, error) {
	now := s.now().UTC()
	var (
		text   string
		usedAt sql.NullTime
	)
	err := s.db.QueryRowContext(ctx, `SELECT text, used_at FROM knowledge_texts WHERE hash = $1`, hash).Scan(&text, &usedAt)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", fmt.Errorf("%w: knowledge text %s; the starter stores texts before it starts the workflow, and texts unused for the retention period (SITEOPS_KNOWLEDGE_RETENTION) are purged: store it again", ErrNotFound, hash)
	case err != nil:
		return "", fmt.Errorf("store: reading knowledge text %s: %w", hash, err)
	case usedAt.Valid && !usedAt.Time.Before(now.Add(-usedEvery)):
		return text, nil
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE knowledge_texts SET used_at = $2 WHERE hash = $1 AND (used_at IS NULL OR used_at < $3)`,
		hash, now, now.Add(-usedEvery)); err != nil {
		return "", fmt.Errorf("store: marking knowledge text %s used: %w", hash, err)
	}
	return text, nil
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
