package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

func leadsOf(t *testing.T, site string, from, to int) []agentsite.Lead {
	t.Helper()
	var out []agentsite.Lead
	for i := from; i < to; i++ {
		var l agentsite.Lead
		raw := fmt.Sprintf(`{"id":"lead_%d","site_id":%q,"email":"p%d@example.com"}`, i, site, i)
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// TestUpsertLeadsLeavesUnchangedRecords checks that a page read again
// writes only the leads whose record changed: an unchanged lead keeps its
// row (last_seen stays), a changed one gets its new record.
func TestUpsertLeadsLeavesUnchangedRecords(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		if _, err := s.UpsertLeads(ctx, "site_1", leadsOf(t, "site_1", 0, 2)); err != nil {
			t.Fatal(err)
		}
		_, before, err := store.LeadRecord(ctx, s, "site_1", "lead_0")
		if err != nil {
			t.Fatal(err)
		}
		changed := leadsOf(t, "site_1", 0, 2)
		var l agentsite.Lead
		if err := json.Unmarshal([]byte(`{"id":"lead_1","site_id":"site_1","email":"new@example.com"}`), &l); err != nil {
			t.Fatal(err)
		}
		changed[1] = l
		if n, err := s.UpsertLeads(ctx, "site_1", changed); err != nil || n != 0 {
			t.Fatalf("the page again with lead_1 changed: %d new, %v; want 0", n, err)
		}
		if _, after, err := store.LeadRecord(ctx, s, "site_1", "lead_0"); err != nil || !after.Equal(before) {
			t.Errorf("unchanged lead_0: last_seen %v, was %v (%v); want it left as it was", after, before, err)
		}
		if raw, _, err := store.LeadRecord(ctx, s, "site_1", "lead_1"); err != nil || !strings.Contains(raw, "new@example.com") {
			t.Errorf("changed lead_1: record %s (%v); want the new one", raw, err)
		}
	})
}

func TestUpsertLeads(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		n, err := s.UpsertLeads(ctx, "site_1", leadsOf(t, "site_1", 0, 200))
		if err != nil || n != 200 {
			t.Fatalf("first page: %d, %v", n, err)
		}
		// An overlapping page (a retried page, a re-scan) adds only what is
		// new, and says how many were new.
		if n, err := s.UpsertLeads(ctx, "site_1", leadsOf(t, "site_1", 150, 250)); err != nil || n != 50 {
			t.Fatalf("overlapping page: %d new, %v; want 50", n, err)
		}
		if n, err := s.UpsertLeads(ctx, "site_1", leadsOf(t, "site_1", 0, 250)); err != nil || n != 0 {
			t.Fatalf("a page read again: %d new, %v; want 0", n, err)
		}
		// The same lead twice in one page is not an error, and new once.
		if n, err := s.UpsertLeads(ctx, "site_1", append(leadsOf(t, "site_1", 250, 251), leadsOf(t, "site_1", 250, 251)...)); err != nil || n != 1 {
			t.Fatalf("a page with a lead twice: %d new, %v; want 1", n, err)
		}
		if _, err := s.UpsertLeads(ctx, "site_2", leadsOf(t, "site_2", 0, 3)); err != nil {
			t.Fatal(err)
		}
		if c, _ := s.CountLeads(ctx, "site_1"); c != 251 {
			t.Errorf("site_1 has %d leads, want 251", c)
		}
		if c, _ := s.CountLeads(ctx, "site_2"); c != 3 {
			t.Errorf("site_2 has %d leads, want 3", c)
		}
		ids, err := s.LeadIDs(ctx, "site_2")
		if err != nil || strings.Join(ids, ",") != "lead_0,lead_1,lead_2" {
			t.Errorf("LeadIDs = %v, %v", ids, err)
		}
		if n, err := s.UpsertLeads(ctx, "site_1", nil); n != 0 || err != nil {
			t.Errorf("empty page: %d, %v", n, err)
		}
		if _, err := s.UpsertLeads(ctx, "site_1", []agentsite.Lead{{Raw: []byte(`{}`)}}); err == nil {
			t.Errorf("a lead without id was accepted")
		}
	})
}

func TestUpsertLeadsConcurrently(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Go(func() {
				// Overlapping ranges from eight writers.
				if _, err := s.UpsertLeads(context.Background(), "site_c", leadsOf(t, "site_c", w*50, w*50+100)); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if c, _ := s.CountLeads(t.Context(), "site_c"); c != 450 {
			t.Errorf("%d leads, want 450", c)
		}
	})
}

func TestKnowledgeTexts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		text := strings.Repeat("Anvils since 1949. ", 10_000) + "é😀"
		h1, err := s.PutKnowledgeText(ctx, text)
		if err != nil {
			t.Fatal(err)
		}
		h2, err := s.PutKnowledgeText(ctx, text)
		if err != nil || h1 != h2 || h1 != store.KnowledgeHash(text) {
			t.Fatalf("hashes %s, %s, %v", h1, h2, err)
		}
		got, err := s.KnowledgeText(ctx, h1)
		if err != nil || got != text {
			t.Fatalf("round trip lost the text (%d vs %d bytes): %v", len(got), len(text), err)
		}
		if _, err := s.KnowledgeText(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown hash: %v", err)
		}
	})
}

func TestSiteWorkflows(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		if _, err := s.SiteWorkflow(ctx, "site_1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unknown site: %v", err)
		}
		if err := s.SetSiteWorkflow(ctx, "site_1", "onboarding/acme"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetSiteWorkflow(ctx, "site_1", "onboarding/acme"); err != nil {
			t.Fatal(err)
		}
		if id, err := s.SiteWorkflow(ctx, "site_1"); err != nil || id != "onboarding/acme" {
			t.Errorf("SiteWorkflow = %q, %v", id, err)
		}
	})
}

func TestSecrets(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		old := agentsite.NewSigningSecret("whsec_old_value")
		if err := s.PutSecret(ctx, "we_1", "main", old); err != nil {
			t.Fatal(err)
		}
		// The first secret of an endpoint wins: a replayed create cannot replace it.
		if err := s.PutSecret(ctx, "we_1", "main", agentsite.NewSigningSecret("whsec_other")); err != nil {
			t.Fatal(err)
		}
		if err := s.PutSecret(ctx, "we_2", "main", agentsite.NewSigningSecret("whsec_new_value")); err != nil {
			t.Fatal(err)
		}
		if err := s.PutSecret(ctx, "we_3", "other", agentsite.NewSigningSecret("whsec_elsewhere")); err != nil {
			t.Fatal(err)
		}
		set, err := s.ActiveSecrets(ctx, "main")
		secrets, infos := set.Secrets, set.Infos
		if err != nil || len(secrets) != 2 || secrets[0].Reveal() != "whsec_old_value" || secrets[1].Reveal() != "whsec_new_value" || len(set.Unreadable) != 0 {
			t.Fatalf("active = %v, %v", infos, err)
		}
		if infos[0].Fingerprint != old.Fingerprint() || infos[0].EndpointID != "we_1" {
			t.Errorf("info = %+v", infos[0])
		}
		// The secret is not stored in the clear.
		var raw []byte
		if err := s.DB().QueryRowContext(ctx, `SELECT ciphertext FROM webhook_secrets WHERE endpoint_id = $1`, "we_1").Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), "old_value") {
			t.Errorf("the secret is stored in the clear")
		}
		if err := s.RetireSecret(ctx, "we_1", time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		set, _ = s.ActiveSecrets(ctx, "main")
		secrets = set.Secrets
		if len(secrets) != 1 || secrets[0].Reveal() != "whsec_new_value" {
			t.Errorf("after retiring we_1: %d secrets", len(secrets))
		}
		if err := s.RetireSecret(ctx, "we_9", time.Now()); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("retiring an unknown secret: %v", err)
		}
	})
}

func TestSecretsNeedAKey(t *testing.T) {
	s, err := store.Open(t.Context(), storetest.SQLiteURL(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	err = s.PutSecret(t.Context(), "we_1", "main", agentsite.NewSigningSecret("whsec_x"))
	if !errors.Is(err, store.ErrNoSecretKey) || !strings.Contains(err.Error(), "openssl rand -base64 32") {
		t.Errorf("error = %v, want ErrNoSecretKey saying how to make a key", err)
	}
	if _, err := store.Open(t.Context(), storetest.SQLiteURL(t), store.Options{SecretKey: []byte("short")}); err == nil {
		t.Errorf("a 5-byte key was accepted")
	}
}

// TestSecretsUnderAnotherKey covers a SITEOPS_SECRET_KEY that changed: the
// secrets it cannot read are skipped, not fatal; storing a new secret
// beside them is refused, naming the fix; and Rekey moves them to the new
// key, after which everything verifies and storing works again.
func TestSecretsUnderAnotherKey(t *testing.T) {
	oldKey, newKey := storetest.TestKey, []byte("ffffffffffffffffffffffffffffffff")
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			ctx := t.Context()
			u := storetest.SQLiteURL(t)
			if d == store.Postgres {
				u = storetest.PostgresSchemaURL(t)
			}
			a, err := store.Open(ctx, u, store.Options{SecretKey: oldKey})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.PutSecret(ctx, "we_1", "main", agentsite.NewSigningSecret("whsec_under_old_key")); err != nil {
				t.Fatal(err)
			}
			_ = a.Close()
			b, err := store.Open(ctx, u, store.Options{SecretKey: newKey})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = b.Close() }()

			set, err := b.ActiveSecrets(ctx, "main")
			if err != nil || len(set.Secrets) != 0 || len(set.Unreadable) != 1 || set.Unreadable[0].EndpointID != "we_1" {
				t.Fatalf("reading with another key = %+v, %v; want we_1 skipped as unreadable", set, err)
			}
			err = b.PutSecret(ctx, "we_2", "main", agentsite.NewSigningSecret("whsec_new"))
			if !errors.Is(err, store.ErrKeyMismatch) || !strings.Contains(err.Error(), "siteops secret rekey") || !strings.Contains(err.Error(), "we_1") {
				t.Fatalf("storing beside an unreadable secret: %v", err)
			}
			if strings.Contains(err.Error(), "whsec_") {
				t.Errorf("the error shows a secret: %v", err)
			}
			if n, err := b.Rekey(ctx, []byte("0000000000000000000000000000000x")); err != nil || n != 0 {
				t.Fatalf("Rekey with a wrong old key = %d, %v; want 0", n, err)
			}
			if n, err := b.Rekey(ctx, oldKey); err != nil || n != 1 {
				t.Fatalf("Rekey = %d, %v; want 1", n, err)
			}
			if n, err := b.Rekey(ctx, oldKey); err != nil || n != 0 {
				t.Fatalf("Rekey again = %d, %v; want 0 (nothing left under the old key)", n, err)
			}
			set, _ = b.ActiveSecrets(ctx, "main")
			if len(set.Secrets) != 1 || set.Secrets[0].Reveal() != "whsec_under_old_key" || len(set.Unreadable) != 0 {
				t.Fatalf("after Rekey = %+v", set)
			}
			if err := b.PutSecret(ctx, "we_2", "main", agentsite.NewSigningSecret("whsec_new")); err != nil {
				t.Fatalf("storing after Rekey: %v", err)
			}
		})
	}
}

func TestOpenRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"", "mysql://x", "sqlite://", "postgres://user:hunter2@127.0.0.1:1/x?connect_timeout=1"} {
		_, err := store.Open(t.Context(), u, store.Options{})
		if err == nil {
			t.Errorf("Open(%q) succeeded", u)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}

func TestMigrationsAreIdempotent(t *testing.T) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			u := storetest.SQLiteURL(t)
			if d == store.Postgres {
				u = storetest.PostgresSchemaURL(t)
			}
			for range 2 {
				s, err := store.Open(t.Context(), u, store.Options{})
				if err != nil {
					t.Fatal(err)
				}
				_ = s.Close()
			}
		})
	}
}

func TestSecretExpectations(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		if e, err := s.SecretExpectation(ctx, "v2"); e.Pending || !e.LastEnded.IsZero() || err != nil {
			t.Fatalf("before: %+v, %v", e, err)
		}
		if err := s.ExpectSecret(ctx, "v2", "op-a", time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := s.ExpectSecret(ctx, "v2", "op-b", time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if e, err := s.SecretExpectation(ctx, "v2"); !e.Pending || err != nil {
			t.Errorf("while expected: %+v, %v", e, err)
		}
		// One op's end leaves the other's mark.
		before := time.Now().Add(-time.Second)
		if err := s.EndExpectation(ctx, "v2", "op-a"); err != nil {
			t.Fatal(err)
		}
		if e, _ := s.SecretExpectation(ctx, "v2"); !e.Pending || !e.LastEnded.After(before) {
			t.Errorf("after op-a ended: %+v; want still pending, with the end time", e)
		}
		if err := s.EndExpectation(ctx, "v2", "op-b"); err != nil {
			t.Fatal(err)
		}
		if e, _ := s.SecretExpectation(ctx, "v2"); e.Pending {
			t.Errorf("after both ended: still pending")
		}
		// A mark that runs out ends by itself.
		if err := s.ExpectSecret(ctx, "v3", "op-c", time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		if e, _ := s.SecretExpectation(ctx, "v3"); e.Pending {
			t.Errorf("after it expired: still pending")
		}
	})
}

// TestConcurrentOpensMigrateOnce opens one new SQLite file from several
// goroutines at once, as a worker and an ingress started together do: each
// open succeeds and the schema is migrated once.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	u := storetest.SQLiteURL(t)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Go(func() {
			s, err := store.Open(context.Background(), u, store.Options{})
			if err != nil {
				errs <- err
				return
			}
			_ = s.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a concurrent open failed: %v", err)
	}
}

// TestRedactHidesEveryPassword keeps passwords out of logs, errors and
// output, wherever and however a database URL carries one: the forms a
// URL parser reads, and those it refuses or reads differently (a raw '%',
// a ';', a key=value DSN, a password split by '@', '/' or '?').
func TestRedactHidesEveryPassword(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://siteops:s3cret@db:5432/siteops", "postgres://siteops:xxxxx@db:5432/siteops"},
		{"postgres://siteops@db:5432/siteops?password=s3cret&sslmode=require", "postgres://siteops@db:5432/siteops?password=xxxxx&sslmode=require"},
		{"postgres://db/siteops?user=siteops&PassWord=s3cret", "postgres://db/siteops?user=siteops&PassWord=xxxxx"},
		{"postgres://db/siteops?sslpassword=s3cret", "postgres://db/siteops?sslpassword=xxxxx"},
		{"postgres://db/siteops?sslmode=disable", "postgres://db/siteops?sslmode=disable"},
		{"postgresql://u:s3cret@h1:5432,h2:5432/x?target_session_attrs=read-write", "postgresql://u:xxxxx@h1:5432,h2:5432/x?target_session_attrs=read-write"},
		{"sqlite:///var/lib/siteops/siteops.db", "sqlite:///var/lib/siteops/siteops.db"},
		{"sqlite:///var/lib/siteops/siteops.db?_pragma=busy_timeout(5000)", "sqlite:///var/lib/siteops/siteops.db?_pragma=busy_timeout(5000)"},
		// A URL that does not parse.
		{"postgres://u:s3cret@db:5432/x y%zz", "postgres://xxxxx"},
		{"postgres://u:s3%cret@db/x", "postgres://xxxxx"},
		// A raw '%' in the query: Go's parser drops the pair, and the
		// password stayed in clear.
		{"postgres://u@db/x?password=s3%cret", "postgres://u@db/x?password=xxxxx"},
		{"postgres://u@db/x?password=s3cret%", "postgres://u@db/x?password=xxxxx"},
		{"postgres://u:s3cret@db/x?sslmode=%zz", "postgres://u:xxxxx@db/x?sslmode=xxxxx"},
		{"postgres://u@db/x?password=s3cret&x=%zz", "postgres://u@db/x?password=xxxxx&x=xxxxx"},
		// A ';' in the query: one piece to Go's parser, two to a reader.
		{"postgres://u@db/x?sslmode=disable;password=s3cret", "postgres://u@db/x?sslmode=xxxxx"},
		{"postgres://u@db/x?password=s3cret;sslmode=disable", "postgres://u@db/x?password=xxxxx"},
		{"postgres://u@db/x?sslmode=disable&a;password=s3cret", "postgres://u@db/x?sslmode=disable&xxxxx"},
		// Escaped names, no '=', a password in another parameter's value.
		{"postgres://db/x?%70assword=s3cret", "postgres://db/x?%70assword=xxxxx"},
		{"postgres://db/x?pass%77ord=s3cret", "postgres://db/x?pass%77ord=xxxxx"},
		{"postgres://db/x?password==s3cret", "postgres://db/x?password=xxxxx"},
		{"postgres://db/x?password=s3&cret", "postgres://db/x?password=xxxxx&xxxxx"},
		{"postgres://db/x?options=-c%20password%3Ds3cret", "postgres://db/x?options=xxxxx"},
		// Key=value DSNs, opaque and other forms a URL parser reads as
		// something else.
		{"host=db user=u password=s3cret dbname=x", "xxxxx"},
		{"password=s3cret postgres://u@db/x", "xxxxx"},
		{"postgres:u:s3cret@db/x", "xxxxx"},
		{"postgres://u:12/s3cret@db/x", "postgres://xxxxx"},
		{"postgres://u:1234?s3cret@db/x", "postgres://xxxxx"},
		{"postgres://u:p@s3cret@db/x", "postgres://xxxxx"},
		{"postgres://password=s3cret@db/x", "postgres://xxxxx"},
		{"postgres://db/password=s3cret", "postgres://xxxxx"},
		{"postgres://u:s3cret@db/x#password=s3cret", "postgres://u:xxxxx@db/x#xxxxx"},
		{" postgres://u:s3cret@db/x", "xxxxx"},
		{"postgres://u:s3cret@db/x\n", "postgres://xxxxx"},
	} {
		got := store.Redact(tc.in)
		if got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, "s3") || strings.Contains(got, "cret") {
			t.Errorf("Redact(%q) = %q still shows the password", tc.in, got)
		}
	}
}
