package store_test

import (
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// TestReceiversReadsEveryReceiverAtOnce checks the ingress's one read of
// the whole list: each receiver's readable and unreadable active secrets,
// no retired ones, and each receiver's expectation as SecretExpectation
// reads it.
func TestReceiversReadsEveryReceiverAtOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		for _, p := range []struct{ id, receiver string }{{"we_1", "v1"}, {"we_2", "v1"}, {"we_3", ""}, {"we_4", "gone"}, {"we_5", "damaged"}} {
			if err := s.PutSecret(ctx, p.id, p.receiver, agentsite.NewSigningSecret("whsec_"+p.id)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Retire(ctx, "we_4", time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		// A damaged row: its retirement edited in the database, so it no
		// longer decrypts.
		if _, err := s.DB().ExecContext(ctx, `UPDATE webhook_secrets SET retire_after = $1 WHERE endpoint_id = 'we_5'`, time.Now().Add(time.Hour).UTC()); err != nil {
			t.Fatal(err)
		}
		if err := s.ExpectSecret(ctx, "new", "create-new", time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := s.ExpectSecret(ctx, "v1", "create-v1", time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := s.EndExpectation(ctx, "v1", "create-v1"); err != nil {
			t.Fatal(err)
		}

		got, err := s.Receivers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		readable := func(r string) (ids []string, secrets []string, bad []string) {
			set := got.Secrets[r]
			for i, info := range set.Infos {
				ids = append(ids, info.EndpointID)
				secrets = append(secrets, set.Secrets[i].Reveal())
			}
			for _, info := range set.Unreadable {
				bad = append(bad, info.EndpointID)
			}
			return ids, secrets, bad
		}
		if ids, secrets, bad := readable("v1"); len(ids) != 2 || ids[0] != "we_1" || ids[1] != "we_2" || secrets[0] != "whsec_we_1" || len(bad) != 0 {
			t.Errorf("v1 = %v %d secrets, unreadable %v; want we_1 and we_2 readable", ids, len(secrets), bad)
		}
		if ids, _, _ := readable(""); len(ids) != 1 || ids[0] != "we_3" {
			t.Errorf("default receiver = %v, want we_3", ids)
		}
		if _, ok := got.Secrets["gone"]; ok {
			t.Errorf("a receiver whose only secret is retired is listed: %+v", got.Secrets["gone"])
		}
		if ids, _, bad := readable("damaged"); len(ids) != 0 || len(bad) != 1 || bad[0] != "we_5" {
			t.Errorf("damaged = readable %v, unreadable %v; want we_5 unreadable", ids, bad)
		}
		for _, r := range []string{"new", "v1"} {
			want, err := s.SecretExpectation(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if g := got.Expectations[r]; g.Pending != want.Pending || !g.LastEnded.Equal(want.LastEnded) {
				t.Errorf("expectation of %s = %+v, want %+v (SecretExpectation)", r, g, want)
			}
		}
		if !got.Expectations["new"].Pending || got.Expectations["v1"].Pending || got.Expectations["v1"].LastEnded.IsZero() {
			t.Errorf("expectations = %+v; want new pending, v1 ended", got.Expectations)
		}
		if len(got.Secrets) != 3 || len(got.Expectations) != 2 {
			t.Errorf("%d receivers with secrets, %d with expectations; want 3 and 2", len(got.Secrets), len(got.Expectations))
		}
	})
}
