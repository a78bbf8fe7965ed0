package store_test

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// activeIDs lists the endpoints whose secrets a receiver accepts, and the
// unreadable ones.
func activeIDs(t *testing.T, s *store.Store, receiver string) (ok, unreadable []string) {
	t.Helper()
	set, err := s.ActiveSecrets(t.Context(), receiver)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range set.Infos {
		ok = append(ok, i.EndpointID)
	}
	for _, i := range set.Unreadable {
		unreadable = append(unreadable, i.EndpointID)
	}
	return ok, unreadable
}

// TestSecretBindingRefusesEditedRows edits a stored secret's receiver and
// retirement in the database: the secret no longer decrypts, so it is
// refused (and named unreadable) instead of accepted where it does not
// belong.
func TestSecretBindingRefusesEditedRows(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		for _, id := range []string{"we_1", "we_2"} {
			if err := s.PutSecret(ctx, id, "v1", agentsite.NewSigningSecret("whsec_"+id)); err != nil {
				t.Fatal(err)
			}
		}
		// Moving we_1 to the default receiver does not make it valid there.
		if _, err := s.DB().ExecContext(ctx, `UPDATE webhook_secrets SET receiver = '' WHERE endpoint_id = 'we_1'`); err != nil {
			t.Fatal(err)
		}
		if ok, bad := activeIDs(t, s, ""); len(ok) != 0 || len(bad) != 1 {
			t.Errorf("default receiver after editing we_1's receiver: accepted %v, unreadable %v; want none accepted", ok, bad)
		}
		// Un-retiring we_2 in the database does not bring it back.
		if _, err := s.Retire(ctx, "we_2", time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		if ok, _ := activeIDs(t, s, "v1"); len(ok) != 0 {
			t.Fatalf("v1 after retiring we_2: %v", ok)
		}
		if _, err := s.DB().ExecContext(ctx, `UPDATE webhook_secrets SET retired_at = NULL WHERE endpoint_id = 'we_2'`); err != nil {
			t.Fatal(err)
		}
		if ok, bad := activeIDs(t, s, "v1"); len(ok) != 0 || len(bad) != 1 || bad[0] != "we_2" {
			t.Errorf("v1 after clearing we_2's retired_at: accepted %v, unreadable %v; want we_2 unreadable", ok, bad)
		}
	})
}

// TestSecretRetireAtAndNow retires a secret later (it stays accepted until
// then, sealed again for its new retirement) and now; retirement is never
// postponed.
func TestSecretRetireAtAndNow(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		if err := s.PutSecret(ctx, "we_1", "v1", agentsite.NewSigningSecret("whsec_one")); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Hour)
		info, err := s.Retire(ctx, "we_1", later)
		if err != nil || info.RetiredAt == nil || !info.RetiredAt.Equal(later.Truncate(time.Microsecond)) {
			t.Fatalf("Retire later = %+v, %v", info, err)
		}
		if ok, bad := activeIDs(t, s, "v1"); len(ok) != 1 || len(bad) != 0 {
			t.Errorf("before its retirement: accepted %v, unreadable %v", ok, bad)
		}
		if err := s.RetireSecret(ctx, "we_1", time.Now().Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if ok, _ := activeIDs(t, s, "v1"); len(ok) != 1 {
			t.Errorf("a later grace period broke the secret: %v", ok)
		}
		info, err = s.Retire(ctx, "we_1", time.Now().Add(-time.Second))
		if err != nil || info.RetiredAt == nil || info.RetiredAt.After(time.Now()) {
			t.Fatalf("Retire now = %+v, %v", info, err)
		}
		if ok, _ := activeIDs(t, s, "v1"); len(ok) != 0 {
			t.Errorf("after retiring now: %v", ok)
		}
		if _, err := s.Retire(ctx, "we_1", later); err != nil {
			t.Fatal(err)
		}
		if ok, _ := activeIDs(t, s, "v1"); len(ok) != 0 {
			t.Errorf("a later retirement postponed an earlier one: %v", ok)
		}
		byFP, err := s.SecretsByFingerprint(ctx, agentsite.NewSigningSecret("whsec_one").Fingerprint())
		if err != nil || len(byFP) != 1 || byFP[0].EndpointID != "we_1" {
			t.Errorf("SecretsByFingerprint = %+v, %v", byFP, err)
		}
		if _, err := s.Retire(ctx, "we_9", time.Now()); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("retiring an unknown secret: %v", err)
		}
	})
}

// TestSecretsFirstFormatStillReadAndRekeyed stores a secret as the first
// format did (the raw key, bound to the endpoint id only): it still
// decrypts; Rekey without an old key brings it to the current format, after
// which it is bound to its receiver.
func TestSecretsFirstFormatStillReadAndRekeyed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		block, _ := aes.NewCipher(storetest.TestKey)
		gcm, _ := cipher.NewGCM(block)
		nonce := make([]byte, gcm.NonceSize())
		_, _ = rand.Read(nonce)
		sealed := gcm.Seal(nonce, nonce, []byte("whsec_legacy"), []byte("we_old"))
		if _, err := s.DB().ExecContext(ctx, `INSERT INTO webhook_secrets (endpoint_id, receiver, ciphertext, fingerprint, created_at) VALUES ($1, $2, $3, $4, $5)`,
			"we_old", "v1", sealed, "fp", time.Now().UTC()); err != nil {
			t.Fatal(err)
		}
		set, err := s.ActiveSecrets(ctx, "v1")
		if err != nil || len(set.Secrets) != 1 || set.Secrets[0].Reveal() != "whsec_legacy" {
			t.Fatalf("a first-format secret does not decrypt: %d secrets, %v", len(set.Secrets), err)
		}
		if n, err := s.Rekey(ctx, nil); err != nil || n != 1 {
			t.Fatalf("Rekey(nil) = %d, %v; want 1", n, err)
		}
		if n, err := s.Rekey(ctx, nil); err != nil || n != 0 {
			t.Fatalf("Rekey(nil) again = %d, %v; want 0", n, err)
		}
		var keyID string
		if err := s.DB().QueryRowContext(ctx, `SELECT key_id FROM webhook_secrets WHERE endpoint_id = 'we_old'`).Scan(&keyID); err != nil || keyID == "" {
			t.Fatalf("key id after Rekey = %q, %v", keyID, err)
		}
		if set, _ := s.ActiveSecrets(ctx, "v1"); len(set.Secrets) != 1 || set.Secrets[0].Reveal() != "whsec_legacy" {
			t.Fatalf("after Rekey the secret does not decrypt")
		}
		if _, err := s.DB().ExecContext(ctx, `UPDATE webhook_secrets SET receiver = '' WHERE endpoint_id = 'we_old'`); err != nil {
			t.Fatal(err)
		}
		if ok, _ := activeIDs(t, s, ""); len(ok) != 0 {
			t.Errorf("the rekeyed secret is accepted on a receiver edited in the database")
		}
	})
}

// TestSecretKeyIsDerived checks that a stored secret is not sealed with the
// raw SITEOPS_SECRET_KEY (the payload codec's key could be the same value)
// and that the stored key id reveals nothing of the key.
func TestSecretKeyIsDerived(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	ctx := t.Context()
	if err := s.PutSecret(ctx, "we_1", "v1", agentsite.NewSigningSecret("whsec_one")); err != nil {
		t.Fatal(err)
	}
	var sealed []byte
	var keyID string
	if err := s.DB().QueryRowContext(ctx, `SELECT ciphertext, key_id FROM webhook_secrets WHERE endpoint_id = 'we_1'`).Scan(&sealed, &keyID); err != nil {
		t.Fatal(err)
	}
	block, _ := aes.NewCipher(storetest.TestKey)
	gcm, _ := cipher.NewGCM(block)
	n := gcm.NonceSize()
	for _, aad := range [][]byte{nil, []byte("we_1")} {
		if _, err := gcm.Open(nil, sealed[:n], sealed[n:], aad); err == nil {
			t.Errorf("the raw key opens the stored secret (additional data %q)", aad)
		}
	}
	if keyID == "" || strings.Contains(keyID, string(storetest.TestKey[:8])) {
		t.Errorf("key id = %q", keyID)
	}
	// Another key gets another id.
	other, err := store.Open(ctx, storetest.SQLiteURL(t), store.Options{SecretKey: []byte("ffffffffffffffffffffffffffffffff")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()
	if err := other.PutSecret(ctx, "we_1", "v1", agentsite.NewSigningSecret("whsec_one")); err != nil {
		t.Fatal(err)
	}
	var otherID string
	if err := other.DB().QueryRowContext(ctx, `SELECT key_id FROM webhook_secrets`).Scan(&otherID); err != nil || otherID == keyID {
		t.Errorf("two keys share the id %q (%v)", otherID, err)
	}
}

// TestSecretsFrom finds the secrets of endpoints created under an
// idempotency key prefix, retired ones included.
func TestSecretsFrom(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		for i, origin := range []string{"secret-rotation/we_1/create-endpoint/abc", "secret-rotation/we_1/create-endpoint/abc#2", "secret-rotation/we_10/create-endpoint/abc", ""} {
			id := "we_n" + string(rune('a'+i))
			if err := s.PutSecretFrom(ctx, id, "v2", origin, agentsite.NewSigningSecret("whsec_"+id)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Retire(ctx, "we_na", time.Now()); err != nil {
			t.Fatal(err)
		}
		got, err := s.SecretsFrom(ctx, "secret-rotation/we_1/create-endpoint/")
		if err != nil || len(got) != 2 || got[0].EndpointID != "we_na" || got[1].EndpointID != "we_nb" || got[0].RetiredAt == nil || got[1].Origin != "secret-rotation/we_1/create-endpoint/abc#2" {
			t.Errorf("SecretsFrom = %+v, %v", got, err)
		}
	})
}
