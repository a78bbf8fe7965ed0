package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Writers of sealed data read first (DESIGN.md). A stored secret is bound
// to its endpoint, receiver and retirement, so rewriting any of them seals
// it again; a writer that cannot open it with the key it holds would keep
// the old ciphertext under a new binding, which no key opens any more, the
// right one included. So every writer of webhook_secrets opens each row it
// rewrites first and, when it cannot, refuses with an error of this file
// and writes nothing.

// ErrSecretUnreadable matches the refusal of a writer (a retirement, a
// re-sealing) to rewrite a stored secret that does not open with the key
// it holds: nothing was written. The error is a *SecretUnreadableError,
// which also matches ErrKeyMismatch when the secret was sealed under
// another key (the fix is that key), but not when it was sealed under this
// very key and still does not open (its row was changed outside siteops).
var ErrSecretUnreadable = errors.New("store: the stored secret does not decrypt with SITEOPS_SECRET_KEY, so it was not rewritten")

// SecretUnreadableError names the secret a writer refused to rewrite, and
// the keys: which one sealed it and which one the writer holds.
type SecretUnreadableError struct {
	EndpointID string
	Receiver   string
	// SealedBy is the id of the key that sealed the secret ("" for the
	// first format, sealed under the raw key with no id beside it).
	SealedBy string
	// KeyID is the id of SITEOPS_SECRET_KEY, the key the writer holds.
	KeyID string
}

// Damaged reports whether the secret was sealed under the writer's own key
// and still does not open: the row was edited or damaged, and no key fixes
// it.
func (e *SecretUnreadableError) Damaged() bool { return e.SealedBy != "" && e.SealedBy == e.KeyID }

func (e *SecretUnreadableError) Error() string {
	which := fmt.Sprintf("the secret of endpoint %s (receiver %s)", e.EndpointID, ReceiverName(e.Receiver))
	const kept = "nothing was changed: rewriting a secret that does not open would leave it readable by no key, the right one included"
	switch {
	case e.Damaged():
		return fmt.Sprintf("store: %s is sealed under this SITEOPS_SECRET_KEY (key %s) yet does not open: its row was changed outside siteops (endpoint, receiver or retirement edited, or the ciphertext damaged); %s; restore the row from a backup, or give the secret up for good with `siteops secret retire --endpoint %s --unreadable`",
			which, e.KeyID, kept, e.EndpointID)
	case e.SealedBy == "":
		return fmt.Sprintf("store: %s is sealed in the first format (no key id) under a key other than SITEOPS_SECRET_KEY (key %s), or damaged; %s; run this with SITEOPS_SECRET_KEY (or SITEOPS_SECRET_KEY_FILE) set to the key that sealed it, the worker's and the ingress's, or re-encrypt it first with `siteops secret rekey` (SITEOPS_OLD_SECRET_KEY=that key)",
			which, e.KeyID, kept)
	}
	return fmt.Sprintf("store: %s is sealed under key %s, and SITEOPS_SECRET_KEY is key %s; %s; run this with SITEOPS_SECRET_KEY (or SITEOPS_SECRET_KEY_FILE) set to the key that sealed it, the worker's and the ingress's, or re-encrypt it first with `siteops secret rekey` (SITEOPS_OLD_SECRET_KEY=that key)",
		which, e.SealedBy, e.KeyID, kept)
}

// Is matches ErrSecretUnreadable, and ErrKeyMismatch unless the secret is
// damaged.
func (e *SecretUnreadableError) Is(target error) bool {
	return target == ErrSecretUnreadable || (target == ErrKeyMismatch && !e.Damaged())
}

// unreadable is the refusal to rewrite r, which does not open.
func (s *Store) unreadable(r secretRow) error {
	return &SecretUnreadableError{EndpointID: r.EndpointID, Receiver: r.Receiver, SealedBy: r.keyID, KeyID: s.keys.id}
}

// SecretKeyID is the id of the key that seals signing secrets, as the store
// records it beside each secret it seals ("" without SITEOPS_SECRET_KEY):
// a one-way digest of the key that names it, never the key. An error about
// a secret sealed under another key names that key by its id.
func (s *Store) SecretKeyID() string {
	if s.keys == nil {
		return ""
	}
	return s.keys.id
}

// NoKeyError is the error of a store opened without SITEOPS_SECRET_KEY
// where a key is needed; it matches ErrNoSecretKey. While no secret is
// stored it says how to make a key. Once secrets are stored, a new key
// would open none of them: it says which key sealed them and that
// SITEOPS_SECRET_KEY must be that key.
func (s *Store) NoKeyError(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `SELECT key_id, count(*) FROM webhook_secrets GROUP BY key_id ORDER BY count(*) DESC, key_id`)
	if err != nil {
		return noKeyError{stored: -1}
	}
	defer func() { _ = rows.Close() }()
	e := noKeyError{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return noKeyError{stored: -1}
		}
		e.stored += n
		e.keys = append(e.keys, sealedBy{id, n})
	}
	if rows.Err() != nil {
		return noKeyError{stored: -1}
	}
	return e
}

// sealedBy counts the stored secrets sealed under one key.
type sealedBy struct {
	keyID string // "" for the first format
	n     int
}

// noKeyError is SITEOPS_SECRET_KEY unset (stored counts the stored
// secrets; -1: they could not be counted). It matches ErrNoSecretKey, and
// advises making a key only when nothing is stored.
type noKeyError struct {
	stored int
	keys   []sealedBy
}

func (e noKeyError) Error() string {
	const set = "set SITEOPS_SECRET_KEY (or SITEOPS_SECRET_KEY_FILE) to the key that sealed them, the one the worker and the ingress run with (`siteops doctor` names the id of the key it is given); a new key would open none of them"
	switch {
	case e.stored == 0:
		return "store: SITEOPS_SECRET_KEY is not set, so signing secrets cannot be stored; no secret is stored yet, so make a key with `openssl rand -base64 32` (or `head -c 32 /dev/urandom | base64`) and set it for the worker and the ingress"
	case e.stored < 0:
		return ErrNoSecretKey.Error()
	}
	var by []string
	for _, k := range e.keys {
		if k.keyID == "" {
			by = append(by, fmt.Sprintf("%d in the first format (no key id)", k.n))
			continue
		}
		by = append(by, fmt.Sprintf("%d by key %s", k.n, k.keyID))
	}
	return fmt.Sprintf("store: SITEOPS_SECRET_KEY is not set, and the store holds %d signing secret(s) sealed by a key (%s); %s",
		e.stored, strings.Join(by, ", "), set)
}

func (e noKeyError) Is(target error) bool { return target == ErrNoSecretKey }
