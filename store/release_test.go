package store_test

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/release"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// putFirstFormat stores a secret as release 1 did: sealed with the raw
// key, bound to the endpoint id only, with no key id.
func putFirstFormat(t *testing.T, s *store.Store, key []byte, endpointID, receiver, plain string, retiredAt *time.Time) {
	t.Helper()
	block, _ := aes.NewCipher(key)
	gcm, _ := cipher.NewGCM(block)
	nonce := make([]byte, gcm.NonceSize())
	_, _ = rand.Read(nonce)
	sealed := gcm.Seal(nonce, nonce, []byte(plain), []byte(endpointID))
	var retired any
	if retiredAt != nil {
		retired = retiredAt.UTC()
	}
	if _, err := s.DB().ExecContext(t.Context(), `INSERT INTO webhook_secrets (endpoint_id, receiver, ciphertext, fingerprint, created_at, retired_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		endpointID, receiver, sealed, "fp-"+endpointID, time.Now().UTC(), retired); err != nil {
		t.Fatal(err)
	}
}

func TestRegistryHeartbeatsAndForgets(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		start := time.Now().Add(-time.Minute)
		old := store.Process{ID: "p-old", Role: "worker", Release: 3, BuildID: "build-a", Host: "h1", StartedAt: start}
		cur := store.Process{ID: "p-new", Role: "ingress", Release: 4, BuildID: "build-b", Host: "h2", StartedAt: start}
		for _, p := range []store.Process{old, cur, cur} {
			if err := s.Heartbeat(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Processes(ctx, time.Now().Add(-time.Minute))
		if err != nil || len(got) != 2 || got[0].ID != "p-old" || got[0].Release != 3 || got[0].BuildID != "build-a" || got[1].Role != "ingress" {
			t.Fatalf("Processes = %+v, %v; want p-old (release 3) then p-new", got, err)
		}
		if got, _ := s.Processes(ctx, time.Now().Add(time.Minute)); len(got) != 0 {
			t.Errorf("processes seen in the future: %+v", got)
		}
		if err := s.Deregister(ctx, "p-old"); err != nil {
			t.Fatal(err)
		}
		if n, err := s.ForgetProcesses(ctx, time.Now().Add(time.Minute)); err != nil || n != 1 {
			t.Errorf("ForgetProcesses = %d, %v; want the one left", n, err)
		}
		if got, _ := s.Processes(ctx, time.Time{}); len(got) != 0 {
			t.Errorf("after Deregister and ForgetProcesses: %+v", got)
		}
	})
}

// TestFinalizeRunsTheContractSteps stores what the previous releases left
// (secrets in the first format, active and retired, one under another
// key; knowledge texts without used_at) and finalizes: the readable
// secrets are re-sealed, an active one that does not decrypt stops it
// before anything is recorded, the texts are dated, and the release is
// recorded once.
func TestFinalizeRunsTheContractSteps(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		past := time.Now().Add(-time.Hour)
		putFirstFormat(t, s, storetest.TestKey, "we_active", "v1", "whsec_active", nil)
		putFirstFormat(t, s, storetest.TestKey, "we_retired", "v1", "whsec_retired", &past)
		other := make([]byte, 32)
		putFirstFormat(t, s, other, "we_elsewhere", "v2", "whsec_elsewhere", &past)
		if _, err := s.DB().ExecContext(ctx, `INSERT INTO knowledge_texts (hash, text, created_at) VALUES ('h1', 'some text', $1)`, past.UTC()); err != nil {
			t.Fatal(err)
		}
		plan, err := s.Plan(ctx)
		if err != nil || plan.LegacySecrets != 3 || plan.LegacyActive != 1 || plan.UnusedTexts != 1 {
			t.Fatalf("Plan = %+v, %v; want 3 first-format secrets (1 active) and 1 undated text", plan, err)
		}

		// An active one under another key: nothing is written (not even
		// the readable ones re-sealed), nothing recorded.
		putFirstFormat(t, s, other, "we_lost", "v3", "whsec_lost", nil)
		before := storetest.SecretRows(t, s.DB())
		if _, err := s.Finalize(ctx, "tester"); !errors.Is(err, store.ErrLegacyUnreadable) || !strings.Contains(err.Error(), "we_lost") || !strings.Contains(err.Error(), "SITEOPS_OLD_SECRET_KEY") {
			t.Fatalf("Finalize with an unreadable active first-format secret: %v; want ErrLegacyUnreadable naming we_lost and the fix", err)
		}
		storetest.SameSecretRows(t, "a refused Finalize", before, storetest.SecretRows(t, s.DB()))
		if f, _ := s.FinalizedRelease(ctx); f != 0 {
			t.Fatalf("a failed finalize recorded release %d", f)
		}
		// Its key lost, the operator gives it up (retire --unreadable).
		if _, err := s.Retire(ctx, "we_lost", time.Now()); !errors.Is(err, store.ErrKeyMismatch) {
			t.Fatalf("retiring a secret this key cannot open = %v; want a refusal", err)
		}
		if _, err := s.RetireUnreadable(ctx, "we_lost", time.Now()); err != nil {
			t.Fatal(err)
		}

		res, err := s.Finalize(ctx, "tester")
		if err != nil || res.Release != release.Number || res.UnreadableRetired != 2 || res.TextsDated != 1 || res.AlreadyFinalized {
			t.Fatalf("Finalize = %+v, %v; want release %d, 2 unreadable retired, 1 text dated", res, err, release.Number)
		}
		if after, _ := s.Plan(ctx); after.LegacySecrets != 2 || after.LegacyActive != 0 || after.UnusedTexts != 0 {
			t.Errorf("after Finalize: %+v; want only the two unreadable retired secrets left in the first format", after)
		}
		set, err := s.ActiveSecrets(ctx, "v1")
		if err != nil || len(set.Secrets) != 1 || set.Secrets[0].Reveal() != "whsec_active" {
			t.Errorf("the re-sealed secret: %d secrets, %v", len(set.Secrets), err)
		}
		if f, err := s.FinalizedRelease(ctx); err != nil || f != release.Number {
			t.Errorf("FinalizedRelease = %d, %v; want %d", f, err, release.Number)
		}
		again, err := s.Finalize(ctx, "tester")
		if err != nil || !again.AlreadyFinalized {
			t.Errorf("Finalize again = %+v, %v; want already finalized", again, err)
		}
		// The purge now counts the text's retention from the finalize.
		if n, err := s.PurgeKnowledgeTexts(ctx, time.Now().Add(-time.Minute)); err != nil || n != 0 {
			t.Errorf("purge right after finalize = %d, %v; want 0", n, err)
		}
	})
}

// TestOpenRefusesAStoreFinalizedLater records a later release as
// finalized: this binary refuses the store, migrating or not, naming both
// releases and the fix.
func TestOpenRefusesAStoreFinalizedLater(t *testing.T) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			u := storetest.SQLiteURL(t)
			if d == store.Postgres {
				u = storetest.PostgresSchemaURL(t)
			}
			s, err := store.Open(t.Context(), u, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			later := release.Number + 1
			_, err = s.DB().ExecContext(t.Context(), `INSERT INTO siteops_releases (release_number, finalized_at, finalized_by) VALUES ($1, $2, 'next')`, later, time.Now().UTC())
			_ = s.Close()
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range []store.Options{{}, {NoMigration: true}} {
				s, err := store.Open(t.Context(), u, o)
				if err == nil {
					_ = s.Close()
				}
				if !errors.Is(err, store.ErrFinalizedLater) || !strings.Contains(err.Error(), "finalized for release "+strconv.Itoa(later)) || !strings.Contains(err.Error(), "deploy release "+strconv.Itoa(later)+" or later") {
					t.Errorf("Open of a store finalized for release %d: %v; want ErrFinalizedLater naming it and the fix", later, err)
				}
			}
		})
	}
}

// TestAheadMigrations marks a migration this build does not know as
// applied, as a later release would: the store still opens, and
// AheadMigrations names it.
func TestAheadMigrations(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.WithoutCancel(t.Context())
		if ahead, err := s.AheadMigrations(ctx); err != nil || len(ahead) != 0 {
			t.Fatalf("AheadMigrations of this build's schema = %v, %v", ahead, err)
		}
		if _, err := s.DB().ExecContext(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, true)`); err != nil {
			t.Fatal(err)
		}
		ahead, err := s.AheadMigrations(ctx)
		if err != nil || len(ahead) != 1 || ahead[0] != 99999 {
			t.Errorf("AheadMigrations = %v, %v; want [99999]", ahead, err)
		}
		if _, pending, err := s.PendingMigrations(ctx); err != nil || pending != 0 {
			t.Errorf("PendingMigrations = %d, %v; want none pending", pending, err)
		}
	})
}
