package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
)

// KnowledgeHash is the content address of a knowledge text: the SHA-256 of
// its UTF-8 bytes in hex.
func KnowledgeHash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// PutKnowledgeText stores a text under its hash and returns the hash.
// Storing the same text again changes nothing.
func (s *Store) PutKnowledgeText(ctx context.Context, text string) (string, error) {
	hash := KnowledgeHash(text)
	_, err := s.db.ExecContext(ctx, `INSERT INTO knowledge_texts (hash, text, created_at) VALUES ($1, $2, $3) ON CONFLICT (hash) DO NOTHING`,
		hash, text, s.now().UTC())
	if err != nil {
		return "", fmt.Errorf("store: storing a knowledge text: %w", err)
	}
	return hash, nil
}

// KnowledgeText returns the text stored under hash.
func (s *Store) KnowledgeText(ctx context.Context, hash string) (string, error) {
	var text string
	err := s.db.QueryRowContext(ctx, `SELECT text FROM knowledge_texts WHERE hash = $1`, hash).Scan(&text)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%w: knowledge text %s; the starter stores texts before it starts the workflow", ErrNotFound, hash)
	}
	return text, err
}
