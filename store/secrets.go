package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"time"

	"github.com/siteops/siteops/agentsite"
)

// SecretInfo describes a stored signing secret without revealing it.
type SecretInfo struct {
	EndpointID  string
	Receiver    string
	Fingerprint string
	CreatedAt   time.Time
	RetireAfter *time.Time
	RetiredAt   *time.Time
}

// PutSecret encrypts and stores the signing secret of an endpoint that
// delivers to receiver (the path name of POST /webhooks/{receiver}). Storing
// the same endpoint again keeps the first secret: the API reveals a secret
// once, so the first write is the true one.
func (s *Store) PutSecret(ctx context.Context, endpointID, receiver string, secret agentsite.SigningSecret) error {
	if s.aead == nil {
		return ErrNoSecretKey
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	sealed := s.aead.Seal(nonce, nonce, []byte(secret.Reveal()), []byte(endpointID))
	_, err := s.db.ExecContext(ctx, `INSERT INTO webhook_secrets (endpoint_id, receiver, ciphertext, fingerprint, created_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (endpoint_id) DO NOTHING`,
		endpointID, receiver, sealed, secret.Fingerprint(), s.now().UTC())
	if err != nil {
		return fmt.Errorf("store: storing the secret of endpoint %s: %w", endpointID, err)
	}
	return nil
}

// ActiveSecrets returns the secrets of a receiver that are not retired, and
// the endpoint each belongs to, oldest first.
func (s *Store) ActiveSecrets(ctx context.Context, receiver string) ([]SecretInfo, []agentsite.SigningSecret, error) {
	if s.aead == nil {
		return nil, nil, ErrNoSecretKey
	}
	now := s.now().UTC()
	rows, err := s.db.QueryContext(ctx, `SELECT endpoint_id, receiver, ciphertext, fingerprint, created_at, retire_after, retired_at
		FROM webhook_secrets WHERE receiver = $1 AND retired_at IS NULL AND (retire_after IS NULL OR retire_after > $2)
		ORDER BY created_at, endpoint_id`, receiver, now)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = rows.Close() }()
	var infos []SecretInfo
	var secrets []agentsite.SigningSecret
	for rows.Next() {
		var info SecretInfo
		var sealed []byte
		var retireAfter, retiredAt sql.NullTime
		if err := rows.Scan(&info.EndpointID, &info.Receiver, &sealed, &info.Fingerprint, &info.CreatedAt, &retireAfter, &retiredAt); err != nil {
			return nil, nil, err
		}
		plain, err := s.open(info.EndpointID, sealed)
		if err != nil {
			return nil, nil, err
		}
		if retireAfter.Valid {
			info.RetireAfter = &retireAfter.Time
		}
		infos = append(infos, info)
		secrets = append(secrets, agentsite.NewSigningSecret(plain))
	}
	return infos, secrets, rows.Err()
}

func (s *Store) open(endpointID string, sealed []byte) (string, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return "", fmt.Errorf("store: the secret of endpoint %s is corrupt", endpointID)
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(endpointID))
	if err != nil {
		return "", fmt.Errorf("store: the secret of endpoint %s does not decrypt: SITEOPS_SECRET_KEY differs from the key it was stored with", endpointID)
	}
	return string(plain), nil
}

// RetireSecret stops accepting an endpoint's secret after at (now or later).
func (s *Store) RetireSecret(ctx context.Context, endpointID string, at time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE webhook_secrets SET retire_after = $1 WHERE endpoint_id = $2`, at.UTC(), endpointID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: no secret stored for endpoint %s", ErrNotFound, endpointID)
	}
	return nil
}

// ExpectSecret marks receiver as about to get a new secret until until: an
// endpoint is being created for it, and the service may deliver with the
// new secret before the create answer is stored. The ingress holds such
// deliveries briefly instead of refusing them.
func (s *Store) ExpectSecret(ctx context.Context, receiver string, until time.Time) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO pending_receivers (receiver, until) VALUES ($1, $2)
		ON CONFLICT (receiver) DO UPDATE SET until = excluded.until`, receiver, until.UTC())
	return err
}

// ReceiverPending reports whether receiver expects a new secret now.
func (s *Store) ReceiverPending(ctx context.Context, receiver string) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pending_receivers WHERE receiver = $1 AND until > $2`, receiver, s.now().UTC()).Scan(&n)
	return n > 0, err
}
