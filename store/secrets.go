package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
)

// ReceiverName is webhook.ReceiverName, for the store's callers.
func ReceiverName(receiver string) string { return webhook.ReceiverName(receiver) }

// SecretInfo describes a stored signing secret without revealing it.
type SecretInfo struct {
	EndpointID  string
	Receiver    string
	Fingerprint string
	CreatedAt   time.Time
	// RetireAfter is when a rotation scheduled the secret to stop being
	// accepted (after its grace period); RetiredAt is when it was retired
	// (`siteops secret retire`, the reconciliation, an aborted rotation).
	// The earlier of the two ends it.
	RetireAfter *time.Time
	RetiredAt   *time.Time
	// Origin is the idempotency key of the call that created the endpoint
	// ('' when it was stored otherwise).
	Origin string
	// VerifiedEvent is the first event that verified with the secret.
	VerifiedEvent string
	// SealedBy is the id of the key that sealed the secret (SecretKeyID
	// of a store with that key; '' for the first format): it names the
	// key, never reveals it.
	SealedBy string
	// Damaged is set by UnreadableSecrets on a secret sealed under this
	// store's own key that still does not open: the key is right, and the
	// row itself was changed outside siteops (its endpoint, receiver or
	// retirement edited, its ciphertext damaged).
	Damaged bool
}

// Retired reports whether the secret is no longer accepted at now.
func (i SecretInfo) Retired(now time.Time) bool {
	return (i.RetireAfter != nil && !i.RetireAfter.After(now)) || (i.RetiredAt != nil && !i.RetiredAt.After(now))
}

// ErrKeyMismatch is returned when a signing secret would be stored under a
// SITEOPS_SECRET_KEY other than the one the stored secrets were encrypted
// with: the two could never be read by the same process.
var ErrKeyMismatch = errors.New("store: SITEOPS_SECRET_KEY is not the key the stored signing secrets were encrypted with")

// ErrAmbiguous is returned when a fingerprint names more than one secret.
var ErrAmbiguous = errors.New("store: more than one stored secret has this fingerprint; name the endpoint instead")

// secretRow is a stored secret as read from the table.
type secretRow struct {
	SecretInfo
	keyID  string
	sealed []byte
}

func (r secretRow) binding() binding {
	return binding{endpointID: r.EndpointID, receiver: r.Receiver, retireAfter: r.RetireAfter, retiredAt: r.RetiredAt}
}

//nolint:gosec // column names, not a credential
const secretColumns = `endpoint_id, receiver, ciphertext, fingerprint, created_at, retire_after, retired_at, key_id, origin, first_verified_event`

func scanSecret(sc interface{ Scan(...any) error }) (secretRow, error) {
	var r secretRow
	var retireAfter, retiredAt sql.NullTime
	if err := sc.Scan(&r.EndpointID, &r.Receiver, &r.sealed, &r.Fingerprint, &r.CreatedAt, &retireAfter, &retiredAt, &r.keyID, &r.Origin, &r.VerifiedEvent); err != nil {
		return r, err
	}
	r.SealedBy = r.keyID
	if retireAfter.Valid {
		t := retireAfter.Time
		r.RetireAfter = &t
	}
	if retiredAt.Valid {
		t := retiredAt.Time
		r.RetiredAt = &t
	}
	return r, nil
}

// open decrypts a row with the store's keys.
func (s *Store) open(r secretRow) (string, bool) {
	if s.keys == nil {
		return "", false
	}
	return s.keys.open(r.keyID, r.binding(), r.sealed)
}

// PutSecret encrypts and stores the signing secret of an endpoint that
// delivers to receiver (the path name of POST /webhooks/{receiver}). Storing
// the same endpoint again keeps the first secret: the API reveals a secret
// once, so the first write is the true one. It refuses (ErrKeyMismatch)
// when active secrets stored earlier do not decrypt with the store's key.
func (s *Store) PutSecret(ctx context.Context, endpointID, receiver string, secret agentsite.SigningSecret) error {
	return s.PutSecretFrom(ctx, endpointID, receiver, "", secret)
}

// PutSecretFrom is PutSecret for an endpoint created by the API call whose
// idempotency key is origin, so that SecretsFrom finds it again.
func (s *Store) PutSecretFrom(ctx context.Context, endpointID, receiver, origin string, secret agentsite.SigningSecret) error {
	if err := s.CheckSecretKey(ctx); err != nil {
		return err
	}
	sealed, err := s.keys.seal(binding{endpointID: endpointID, receiver: receiver}, secret.Reveal())
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO webhook_secrets (endpoint_id, receiver, ciphertext, fingerprint, created_at, key_id, origin)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (endpoint_id) DO NOTHING`,
		endpointID, receiver, sealed, secret.Fingerprint(), s.now().UTC(), s.keys.id, origin)
	if err != nil {
		return fmt.Errorf("store: storing the secret of endpoint %s: %w", endpointID, err)
	}
	return nil
}

// CheckSecretKey says whether a signing secret can be stored now: the
// store has a key (ErrNoSecretKey) and every active stored secret decrypts
// with it (ErrKeyMismatch), so that one process can read them all.
func (s *Store) CheckSecretKey(ctx context.Context) error {
	if s.keys == nil {
		return s.NoKeyError(ctx)
	}
	unreadable, err := s.UnreadableSecrets(ctx)
	if err != nil {
		return err
	}
	if len(unreadable) > 0 {
		ids := make([]string, len(unreadable))
		for i, u := range unreadable {
			ids[i] = u.EndpointID
		}
		return fmt.Errorf("%w (endpoints %s); set the key they were stored with, or re-encrypt them with `siteops secret rekey` (SITEOPS_OLD_SECRET_KEY=the old key)",
			ErrKeyMismatch, strings.Join(ids, ", "))
	}
	return nil
}

// ActiveSet is what a receiver accepts: the secrets that are not retired
// and decrypt with the store's key, and the active ones that do not.
type ActiveSet struct {
	Infos   []SecretInfo
	Secrets []agentsite.SigningSecret
	// Unreadable are active secrets that do not decrypt with the store's
	// key (stored under another SITEOPS_SECRET_KEY, or edited in the
	// database: a secret is bound to its endpoint, receiver and
	// retirement). They are skipped: the others still verify.
	Unreadable []SecretInfo
}

// ActiveSecrets returns the secrets of a receiver that are not retired,
// oldest first.
func (s *Store) ActiveSecrets(ctx context.Context, receiver string) (ActiveSet, error) {
	if s.keys == nil {
		return ActiveSet{}, s.NoKeyError(ctx)
	}
	var set ActiveSet
	err := s.eachActive(ctx, `receiver = $2`, []any{receiver}, func(r secretRow) error {
		plain, ok := s.open(r)
		if !ok {
			set.Unreadable = append(set.Unreadable, r.SecretInfo)
			return nil
		}
		set.Infos = append(set.Infos, r.SecretInfo)
		set.Secrets = append(set.Secrets, agentsite.NewSigningSecret(plain))
		return nil
	})
	return set, err
}

// UnreadableSecrets returns every active secret that does not decrypt with
// the store's key.
func (s *Store) UnreadableSecrets(ctx context.Context) ([]SecretInfo, error) {
	if s.keys == nil {
		return nil, s.NoKeyError(ctx)
	}
	var out []SecretInfo
	err := s.eachActive(ctx, "", nil, func(r secretRow) error {
		if _, ok := s.open(r); !ok {
			info := r.SecretInfo
			info.Damaged = r.keyID != "" && r.keyID == s.keys.id
			out = append(out, info)
		}
		return nil
	})
	return out, err
}

// Secrets describes every active stored secret (never the secret itself).
func (s *Store) Secrets(ctx context.Context) ([]SecretInfo, error) {
	var out []SecretInfo
	err := s.eachActive(ctx, "", nil, func(r secretRow) error {
		out = append(out, r.SecretInfo)
		return nil
	})
	return out, err
}

// RetiredSecrets describes every stored secret that is no longer accepted.
func (s *Store) RetiredSecrets(ctx context.Context) ([]SecretInfo, error) {
	return s.secretInfos(ctx, `SELECT `+secretColumns+` FROM webhook_secrets
		WHERE retired_at <= $1 OR retire_after <= $1 ORDER BY created_at, endpoint_id`, s.now().UTC())
}

// SecretsFrom describes every stored secret, active or retired, whose
// endpoint was created by a call whose idempotency key starts with
// originPrefix, oldest first.
func (s *Store) SecretsFrom(ctx context.Context, originPrefix string) ([]SecretInfo, error) {
	if originPrefix == "" {
		return nil, errors.New("store: SecretsFrom needs an origin prefix")
	}
	// Compared with substr rather than LIKE: keys hold '_' and '%'-free
	// text, but a prefix compare needs no escaping at all.
	return s.secretInfos(ctx, `SELECT `+secretColumns+` FROM webhook_secrets
		WHERE substr(origin, 1, $1) = $2 ORDER BY created_at, endpoint_id`, len(originPrefix), originPrefix)
}

// SecretsByFingerprint describes the stored secrets, active or retired,
// with a fingerprint.
func (s *Store) SecretsByFingerprint(ctx context.Context, fingerprint string) ([]SecretInfo, error) {
	return s.secretInfos(ctx, `SELECT `+secretColumns+` FROM webhook_secrets WHERE fingerprint = $1 ORDER BY created_at, endpoint_id`, fingerprint)
}

// eachActive calls f for every active secret matching the extra condition
// (whose arguments start at $2), oldest first.
func (s *Store) eachActive(ctx context.Context, cond string, args []any, f func(secretRow) error) error {
	//nolint:gosec // fixed SQL and the caller's fixed condition; every value is a bound argument
	q := `SELECT ` + secretColumns + ` FROM webhook_secrets
		WHERE (retired_at IS NULL OR retired_at > $1) AND (retire_after IS NULL OR retire_after > $1)`
	if cond != "" {
		q += " AND " + cond //nolint:gosec // as above
	}
	q += " ORDER BY created_at, endpoint_id"
	rows, err := s.db.QueryContext(ctx, q, append([]any{s.now().UTC()}, args...)...)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		r, err := scanSecret(rows)
		if err != nil {
			return err
		}
		if err := f(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Rekey re-encrypts under the store's key, in the current format, every
// stored secret (active or retired) that decrypts with oldKey or is in the
// first format (the raw key, bound to the endpoint id only), in one
// transaction, and returns how many it re-encrypted. oldKey may be nil: then
// only the format of secrets under the current key is brought up to date.
// Secrets already in the current format under the store's key are left as
// they are, so running it twice changes nothing. A secret that opens with
// neither key is never written (writers of sealed data read first): it
// stays as it was, for a run with the key that sealed it.
func (s *Store) Rekey(ctx context.Context, oldKey []byte) (int, error) {
	if s.keys == nil {
		return 0, s.NoKeyError(ctx)
	}
	var old *secretKeys
	if oldKey != nil {
		k, err := newSecretKeys(oldKey)
		if err != nil {
			return 0, fmt.Errorf("store: the old key: %w", err)
		}
		old = k
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, `SELECT `+secretColumns+` FROM webhook_secrets WHERE key_id <> $1 ORDER BY endpoint_id`, s.keys.id)
	if err != nil {
		return 0, err
	}
	var all []secretRow
	for rows.Next() {
		r, err := scanSecret(rows)
		if err != nil {
			_ = rows.Close()
			return 0, err
		}
		all = append(all, r)
	}
	_ = rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	n := 0
	for _, r := range all {
		plain, ok := s.keys.open(r.keyID, r.binding(), r.sealed)
		if !ok && old != nil {
			plain, ok = old.open(r.keyID, r.binding(), r.sealed)
		}
		if !ok {
			continue
		}
		sealed, err := s.keys.seal(r.binding(), plain)
		if err != nil {
			return 0, err
		}
		// Only if the row is as read: a retirement written meanwhile (which
		// seals the secret again itself) is not overwritten.
		res, err := tx.ExecContext(ctx, `UPDATE webhook_secrets SET ciphertext = $1, key_id = $2 WHERE endpoint_id = $3 AND ciphertext = $4`, sealed, s.keys.id, r.EndpointID, r.sealed)
		if err != nil {
			return 0, err
		}
		if m, _ := res.RowsAffected(); m == 1 {
			n++
		}
	}
	return n, tx.Commit()
}

// RetireSecret stops accepting an endpoint's secret after at (now or
// later): a rotation's grace period. A retirement set earlier stays when it
// is sooner: retirement is never postponed. Like Retire, it refuses a
// secret that does not open with the store's key.
func (s *Store) RetireSecret(ctx context.Context, endpointID string, at time.Time) error {
	_, err := s.retire(ctx, endpointID, false, func(r *secretRow) { r.RetireAfter = earlier(r.RetireAfter, at) })
	return err
}

// Retire retires an endpoint's secret at at (writing retired_at): it is
// refused from then on. A retirement set earlier stays when it is sooner.
// It returns the secret as retired. The retirement is bound into the
// sealing, so the secret is sealed again: one that does not open with the
// store's key is refused (a *SecretUnreadableError, nothing written), and
// without a key it is NoKeyError.
func (s *Store) Retire(ctx context.Context, endpointID string, at time.Time) (SecretInfo, error) {
	return s.retire(ctx, endpointID, false, func(r *secretRow) { r.RetiredAt = earlier(r.RetiredAt, at) })
}

// RetireUnreadable is Retire that also retires a secret that does not open
// with the store's key, keeping its ciphertext under the new retirement:
// no key opens it again, the one that sealed it included. It is for a
// secret given up for good (its row damaged, or its key lost), on an
// operator's explicit word; a secret that opens is retired as Retire does.
func (s *Store) RetireUnreadable(ctx context.Context, endpointID string, at time.Time) (SecretInfo, error) {
	return s.retire(ctx, endpointID, true, func(r *secretRow) { r.RetiredAt = earlier(r.RetiredAt, at) })
}

func earlier(cur *time.Time, at time.Time) *time.Time {
	at = at.UTC().Truncate(time.Microsecond)
	if cur != nil && !cur.After(at) {
		return cur
	}
	return &at
}

// retire changes a secret's retirement and, since the retirement is bound
// into the sealing, seals the secret again (in the current format). It
// opens the secret first: one this store cannot read is refused with
// nothing written, since its ciphertext under a new binding would open
// with no key at all; only giveUp (RetireUnreadable) retires it anyway,
// keeping its ciphertext.
func (s *Store) retire(ctx context.Context, endpointID string, giveUp bool, change func(*secretRow)) (SecretInfo, error) {
	if s.keys == nil {
		return SecretInfo{}, s.NoKeyError(ctx)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return SecretInfo{}, err
	}
	defer func() { _ = tx.Rollback() }()
	q := `SELECT ` + secretColumns + ` FROM webhook_secrets WHERE endpoint_id = $1`
	if s.dialect == Postgres {
		q += " FOR UPDATE"
	}
	r, err := scanSecret(tx.QueryRowContext(ctx, q, endpointID))
	if errors.Is(err, sql.ErrNoRows) {
		return SecretInfo{}, fmt.Errorf("%w: no secret stored for endpoint %s", ErrNotFound, endpointID)
	}
	if err != nil {
		return SecretInfo{}, err
	}
	plain, readable := s.open(r)
	if !readable && !giveUp {
		return SecretInfo{}, s.unreadable(r) // the deferred rollback writes nothing
	}
	change(&r)
	if readable {
		if r.sealed, err = s.keys.seal(r.binding(), plain); err != nil {
			return SecretInfo{}, err
		}
		r.keyID, r.SealedBy = s.keys.id, s.keys.id
	}
	if _, err := tx.ExecContext(ctx, `UPDATE webhook_secrets SET retire_after = $1, retired_at = $2, ciphertext = $3, key_id = $4 WHERE endpoint_id = $5`,
		nullTime(r.RetireAfter), nullTime(r.RetiredAt), r.sealed, r.keyID, endpointID); err != nil {
		return SecretInfo{}, err
	}
	return r.SecretInfo, tx.Commit()
}

func nullTime(t *time.Time) sql.NullTime {
	if t == nil {
		return sql.NullTime{}
	}
	return sql.NullTime{Time: t.UTC(), Valid: true}
}

// ExpectSecret marks receiver as about to get a new secret from the
// endpoint creation op (its idempotency key) until until: the service may
// deliver with the new secret before the create answer is stored, and the
// ingress holds such deliveries briefly instead of refusing them. The mark
// ends at until, or when the op calls EndExpectation (its secret is stored,
// or it failed). Marks that ended an hour ago are forgotten.
func (s *Store) ExpectSecret(ctx context.Context, receiver, op string, until time.Time) error {
	now := s.now().UTC()
	if _, err := s.db.ExecContext(ctx, `DELETE FROM expected_secrets WHERE until < $1`, now.Add(-time.Hour)); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO expected_secrets (receiver, op, until) VALUES ($1, $2, $3)
		ON CONFLICT (receiver, op) DO UPDATE SET until = excluded.until, ended_at = NULL`, receiver, op, until.UTC())
	return err
}

// EndExpectation ends op's mark on receiver.
func (s *Store) EndExpectation(ctx context.Context, receiver, op string) error {
	_, err := s.db.ExecContext(ctx, `UPDATE expected_secrets SET ended_at = $1 WHERE receiver = $2 AND op = $3 AND ended_at IS NULL`,
		s.now().UTC(), receiver, op)
	return err
}

// Expectation is whether a receiver expects a new secret now, and when a
// mark on it last ended (the moment a new secret may have been stored).
type Expectation struct {
	Pending   bool
	LastEnded time.Time // zero when none ended
}

// SecretExpectation reads receiver's marks.
func (s *Store) SecretExpectation(ctx context.Context, receiver string) (Expectation, error) {
	var e Expectation
	rows, err := s.db.QueryContext(ctx, `SELECT until, ended_at FROM expected_secrets WHERE receiver = $1`, receiver)
	if err != nil {
		return e, err
	}
	defer func() { _ = rows.Close() }()
	now := s.now().UTC()
	for rows.Next() {
		var until time.Time
		var ended sql.NullTime
		if err := rows.Scan(&until, &ended); err != nil {
			return e, err
		}
		switch {
		case ended.Valid && ended.Time.After(e.LastEnded):
			e.LastEnded = ended.Time
		case !ended.Valid && until.After(now):
			e.Pending = true
		}
	}
	return e, rows.Err()
}

// secretInfos runs a query of secretColumns and describes every row.
func (s *Store) secretInfos(ctx context.Context, query string, args ...any) ([]SecretInfo, error) {
	return s.secretInfosKept(ctx, nil, query, args...)
}

// secretInfosKept runs a query of secretColumns and describes every row
// that keep keeps (every row when keep is nil).
func (s *Store) secretInfosKept(ctx context.Context, keep func(secretRow) bool, query string, args ...any) ([]SecretInfo, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []SecretInfo
	for rows.Next() {
		r, err := scanSecret(rows)
		if err != nil {
			return nil, err
		}
		if keep == nil || keep(r) {
			out = append(out, r.SecretInfo)
		}
	}
	return out, rows.Err()
}
