package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// wrongKey is a SITEOPS_SECRET_KEY other than the one the tests' secrets
// are sealed under.
var wrongKey = []byte("ffffffffffffffffffffffffffffffff")

// sameStore opens, on both databases, one store under the test key and
// returns it with its URL, so that a test can open the same store with
// another key (or none).
func sameStore(t *testing.T, f func(t *testing.T, url string, right *store.Store)) {
	t.Helper()
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			url := storetest.SQLiteURL(t)
			if d == store.Postgres {
				url = storetest.PostgresSchemaURL(t)
			}
			f(t, url, openWith(t, url, storetest.TestKey))
		})
	}
}

// openWith opens the store at url with key (none when nil), closed at
// cleanup.
func openWith(t *testing.T, url string, key []byte) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), url, store.Options{SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// opens reports whether s decrypts the active secret of endpointID on
// receiver and gets plain.
func opens(t *testing.T, s *store.Store, receiver, endpointID, plain string) bool {
	t.Helper()
	set, err := s.ActiveSecrets(t.Context(), receiver)
	if err != nil {
		t.Fatal(err)
	}
	for i, info := range set.Infos {
		if info.EndpointID == endpointID {
			return set.Secrets[i].Reveal() == plain
		}
	}
	return false
}

// TestWritersOfSealedDataReadFirst is issue 33, item 1, in the store:
// every writer of webhook_secrets run with a SITEOPS_SECRET_KEY that does
// not open the secret it would rewrite refuses with an error that names
// the endpoint, the keys and the fix, and leaves every row byte for byte
// as it was; the right key still opens the secret afterwards and can
// retire it.
func TestWritersOfSealedDataReadFirst(t *testing.T) {
	sameStore(t, func(t *testing.T, url string, right *store.Store) {
		ctx := t.Context()
		for _, id := range []string{"we_1", "we_2"} {
			if err := right.PutSecret(ctx, id, "main", agentsite.NewSigningSecret("whsec_"+id)); err != nil {
				t.Fatal(err)
			}
		}
		wrong := openWith(t, url, wrongKey)
		later := time.Now().Add(30 * time.Minute)
		for _, w := range []struct {
			name  string
			write func() error
		}{
			{"Retire", func() error { _, err := wrong.Retire(ctx, "we_1", later); return err }},
			{"RetireSecret", func() error { return wrong.RetireSecret(ctx, "we_1", later) }},
			{"PutSecret of the same endpoint", func() error {
				return wrong.PutSecret(ctx, "we_1", "main", agentsite.NewSigningSecret("whsec_replaced"))
			}},
			{"PutSecret beside", func() error {
				return wrong.PutSecret(ctx, "we_3", "main", agentsite.NewSigningSecret("whsec_we_3"))
			}},
		} {
			t.Run(w.name, func(t *testing.T) {
				before := storetest.SecretRows(t, right.DB())
				err := w.write()
				storetest.SameSecretRows(t, w.name+" with another key", before, storetest.SecretRows(t, right.DB()))
				if !errors.Is(err, store.ErrKeyMismatch) || !strings.Contains(err.Error(), "we_1") || !strings.Contains(err.Error(), "siteops secret rekey") {
					t.Fatalf("%s with another key = %v; want ErrKeyMismatch naming we_1 and the fix", w.name, err)
				}
				if strings.Contains(err.Error(), "whsec_") {
					t.Errorf("the error shows a secret: %v", err)
				}
			})
		}
		// Retire's error says which key sealed the secret and which key
		// it was given, by their ids.
		_, err := wrong.Retire(ctx, "we_1", later)
		var ue *store.SecretUnreadableError
		if !errors.As(err, &ue) || ue.Damaged() || ue.EndpointID != "we_1" || ue.SealedBy != right.SecretKeyID() || ue.KeyID != wrong.SecretKeyID() ||
			!strings.Contains(err.Error(), right.SecretKeyID()) || !strings.Contains(err.Error(), "nothing was changed") {
			t.Errorf("Retire with another key = %v; want a SecretUnreadableError naming both keys and that nothing changed", err)
		}

		t.Run("Rekey from a wrong old key", func(t *testing.T) {
			before := storetest.SecretRows(t, right.DB())
			if n, err := wrong.Rekey(ctx, []byte("0000000000000000000000000000000x")); err != nil || n != 0 {
				t.Errorf("Rekey = %d, %v; want 0 re-encrypted", n, err)
			}
			if n, err := wrong.Rekey(ctx, nil); err != nil || n != 0 {
				t.Errorf("Rekey without an old key = %d, %v; want 0 re-encrypted", n, err)
			}
			storetest.SameSecretRows(t, "Rekey with keys that open nothing", before, storetest.SecretRows(t, right.DB()))
		})

		t.Run("no key", func(t *testing.T) {
			none := openWith(t, url, nil)
			before := storetest.SecretRows(t, right.DB())
			_, err := none.Retire(ctx, "we_1", later)
			storetest.SameSecretRows(t, "Retire without a key", before, storetest.SecretRows(t, right.DB()))
			if !errors.Is(err, store.ErrNoSecretKey) || strings.Contains(err.Error(), "openssl") || !strings.Contains(err.Error(), right.SecretKeyID()) ||
				!strings.Contains(err.Error(), "SITEOPS_SECRET_KEY_FILE") || !strings.Contains(err.Error(), "2 signing secret(s)") {
				t.Errorf("Retire without a key = %v; want ErrNoSecretKey naming the key that sealed the 2 stored secrets, never advising a new one", err)
			}
			if err := none.PutSecret(ctx, "we_3", "main", agentsite.NewSigningSecret("whsec_we_3")); !errors.Is(err, store.ErrNoSecretKey) || strings.Contains(err.Error(), "openssl") {
				t.Errorf("PutSecret without a key beside stored secrets = %v; want ErrNoSecretKey without advice to make a key", err)
			}
		})

		// The right key still opens the secret and retires it.
		if !opens(t, right, "main", "we_1", "whsec_we_1") {
			t.Fatal("after the refusals the right key does not open we_1")
		}
		if _, err := right.Retire(ctx, "we_1", later); err != nil {
			t.Fatalf("Retire with the right key: %v", err)
		}
		if !opens(t, right, "main", "we_1", "whsec_we_1") {
			t.Error("we_1, retiring in 30 minutes, does not open with the right key")
		}
	})
}

// TestRetireRefusesADamagedRowUnlessGivenUp edits a stored secret's
// receiver in the database: its own key no longer opens it, so Retire
// refuses it naming the row as changed (not the key), and RetireUnreadable
// gives it up on the operator's word.
func TestRetireRefusesADamagedRowUnlessGivenUp(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		if err := s.PutSecret(ctx, "we_1", "main", agentsite.NewSigningSecret("whsec_one")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DB().ExecContext(ctx, `UPDATE webhook_secrets SET receiver = 'moved' WHERE endpoint_id = 'we_1'`); err != nil {
			t.Fatal(err)
		}
		before := storetest.SecretRows(t, s.DB())
		err := s.RetireSecret(ctx, "we_1", time.Now())
		storetest.SameSecretRows(t, "RetireSecret of a damaged row", before, storetest.SecretRows(t, s.DB()))
		var ue *store.SecretUnreadableError
		if !errors.As(err, &ue) || !ue.Damaged() || errors.Is(err, store.ErrKeyMismatch) ||
			!strings.Contains(err.Error(), "changed outside siteops") || !strings.Contains(err.Error(), "--unreadable") {
			t.Errorf("retiring a damaged row = %v; want ErrSecretUnreadable, not the key's fault, naming the way out", err)
		}
		info, err := s.RetireUnreadable(ctx, "we_1", time.Now().Add(-time.Second))
		if err != nil || info.RetiredAt == nil {
			t.Fatalf("RetireUnreadable = %+v, %v", info, err)
		}
		if bad, err := s.UnreadableSecrets(ctx); err != nil || len(bad) != 0 {
			t.Errorf("after giving it up: unreadable %+v, %v; want none active", bad, err)
		}
	})
}

// TestFinalizeWithAnotherKeyWritesNothing finalizes a store whose secrets
// in the first format were sealed under another key than the one it is
// given: the contract steps would re-seal them, so it refuses before
// writing anything, and the right key finalizes afterwards.
func TestFinalizeWithAnotherKeyWritesNothing(t *testing.T) {
	sameStore(t, func(t *testing.T, url string, right *store.Store) {
		ctx := t.Context()
		putFirstFormat(t, right, storetest.TestKey, "we_old", "v1", "whsec_old", nil)
		if err := right.PutSecret(ctx, "we_new", "v1", agentsite.NewSigningSecret("whsec_new")); err != nil {
			t.Fatal(err)
		}
		wrong := openWith(t, url, wrongKey)
		before := storetest.SecretRows(t, right.DB())
		_, err := wrong.Finalize(ctx, "tester")
		storetest.SameSecretRows(t, "Finalize with another key", before, storetest.SecretRows(t, right.DB()))
		if !errors.Is(err, store.ErrLegacyUnreadable) || !strings.Contains(err.Error(), "we_old") || !strings.Contains(err.Error(), "nothing was changed") {
			t.Errorf("Finalize with another key = %v; want ErrLegacyUnreadable naming we_old, nothing changed", err)
		}
		if f, _ := wrong.FinalizedRelease(ctx); f != 0 {
			t.Errorf("a refused finalize recorded release %d", f)
		}
		none := openWith(t, url, nil)
		if _, err := none.Finalize(ctx, "tester"); !errors.Is(err, store.ErrNoSecretKey) || strings.Contains(err.Error(), "openssl") || !strings.Contains(err.Error(), "first format") {
			t.Errorf("Finalize without a key = %v; want ErrNoSecretKey naming the stored secrets, never advising a new key", err)
		}
		storetest.SameSecretRows(t, "Finalize without a key", before, storetest.SecretRows(t, right.DB()))
		if res, err := right.Finalize(ctx, "tester"); err != nil || res.Resealed != 1 {
			t.Errorf("Finalize with the right key = %+v, %v; want we_old re-sealed", res, err)
		}
		if !opens(t, right, "v1", "we_old", "whsec_old") {
			t.Error("we_old does not open after the right key finalized")
		}
	})
}
