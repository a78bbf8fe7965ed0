package activities

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// listed is an API whose endpoint list names only its endpoints.
type listed struct {
	API
	ids []string
}

func (l listed) ListWebhookEndpoints(context.Context) ([]agentsite.WebhookEndpoint, error) {
	var out []agentsite.WebhookEndpoint
	for _, id := range l.ids {
		out = append(out, agentsite.WebhookEndpoint{ID: id})
	}
	return out, nil
}

// runActivity runs one activity of acts as a worker would, and returns its
// error.
func runActivity(t *testing.T, acts *Activities, activity any, args ...any) error {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	_, err := env.ExecuteActivity(activity, args...)
	return err
}

// secretUnreadable checks that err is the activity failure of a secret
// left as it was, retryable or not, naming the endpoints.
func secretUnreadable(t *testing.T, what string, err error, retryable bool, names ...string) {
	t.Helper()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrTypeSecretUnreadable || app.NonRetryable() == retryable {
		t.Fatalf("%s = %v; want a %s failure (retryable %v)", what, err, ErrTypeSecretUnreadable, retryable)
	}
	for _, n := range names {
		if !strings.Contains(app.Error(), n) {
			t.Errorf("%s = %q; want it to name %s", what, app.Error(), n)
		}
	}
	if strings.Contains(app.Error(), "whsec_") {
		t.Errorf("%s shows a secret: %v", what, app)
	}
}

// TestSecretWritersRefuseWithAnotherKey runs the activities that rewrite
// stored secrets — a rotation's RetireSecret (later and now) and the
// reconciliation — on a worker whose SITEOPS_SECRET_KEY is not the key
// the secrets were sealed with, on both databases: each fails retryably
// (another worker, or this one with the right key, may do it), naming the
// endpoint, and leaves every row byte for byte as it was; the right key
// then does the same work.
func TestSecretWritersRefuseWithAnotherKey(t *testing.T) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			ctx := t.Context()
			url := storetest.SQLiteURL(t)
			if d == store.Postgres {
				url = storetest.PostgresSchemaURL(t)
			}
			open := func(key []byte) *store.Store {
				s, err := store.Open(ctx, url, store.Options{SecretKey: key})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				return s
			}
			right, wrong := open(storetest.TestKey), open([]byte("ffffffffffffffffffffffffffffffff"))
			for _, id := range []string{"we_live", "we_gone"} {
				if err := right.PutSecret(ctx, id, "main", agentsite.NewSigningSecret("whsec_"+id)); err != nil {
					t.Fatal(err)
				}
			}
			api := listed{ids: []string{"we_live"}}
			worker := New(Options{API: api, Store: wrong, Now: time.Now})
			for _, tc := range []struct {
				name string
				run  func() error
			}{
				{"RetireSecret after a grace period", func() error {
					return runActivity(t, worker, worker.RetireSecret, RetireSecretInput{EndpointID: "we_live", At: time.Now().Add(time.Hour)})
				}},
				{"RetireSecret now", func() error {
					return runActivity(t, worker, worker.RetireSecret, RetireSecretInput{EndpointID: "we_live", Now: true})
				}},
				{"ReconcileSecrets", func() error { return runActivity(t, worker, worker.ReconcileSecrets) }},
			} {
				t.Run(tc.name, func(t *testing.T) {
					before := storetest.SecretRows(t, right.DB())
					err := tc.run()
					storetest.SameSecretRows(t, tc.name+" with another key", before, storetest.SecretRows(t, right.DB()))
					want := "we_live"
					if tc.name == "ReconcileSecrets" {
						want = "we_gone"
					}
					secretUnreadable(t, tc.name, err, true, want, "SITEOPS_SECRET_KEY")
				})
			}

			// The right key does it.
			fixed := New(Options{API: api, Store: right, Now: time.Now})
			if err := runActivity(t, fixed, fixed.ReconcileSecrets); err != nil {
				t.Fatalf("ReconcileSecrets with the right key: %v", err)
			}
			if err := runActivity(t, fixed, fixed.RetireSecret, RetireSecretInput{EndpointID: "we_live", At: time.Now().Add(time.Hour)}); err != nil {
				t.Fatalf("RetireSecret with the right key: %v", err)
			}
			set, err := right.ActiveSecrets(ctx, "main")
			if err != nil || len(set.Infos) != 1 || set.Infos[0].EndpointID != "we_live" || set.Secrets[0].Reveal() != "whsec_we_live" {
				t.Errorf("after the right key's work: %+v, %v; want we_gone retired and we_live, retiring in an hour, opening", set.Infos, err)
			}
		})
	}
}

// TestReconcileRetiresTheOthersBesideADamagedSecret gives the
// reconciliation two secrets whose endpoints are gone, one of whose rows
// was edited in the database: the readable one is retired, the damaged
// one left byte for byte as it was, and the activity fails for good
// naming it (no key opens it, so no retry helps).
func TestReconcileRetiresTheOthersBesideADamagedSecret(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	ctx := t.Context()
	for _, id := range []string{"we_live", "we_gone", "we_damaged"} {
		if err := st.PutSecret(ctx, id, "main", agentsite.NewSigningSecret("whsec_"+id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.DB().ExecContext(ctx, `UPDATE webhook_secrets SET receiver = 'moved' WHERE endpoint_id = 'we_damaged'`); err != nil {
		t.Fatal(err)
	}
	damagedRow := func() string {
		all := storetest.SecretRows(t, st.DB())
		for r := range strings.SplitSeq(all, "\n") {
			if strings.Contains(r, `"we_damaged"`) {
				return r
			}
		}
		t.Fatal("the damaged row is gone")
		return ""
	}
	before := damagedRow()
	acts := New(Options{API: listed{ids: []string{"we_live"}}, Store: st})
	err := runActivity(t, acts, acts.ReconcileSecrets)
	secretUnreadable(t, "ReconcileSecrets beside a damaged secret", err, false, "we_damaged", "changed outside siteops")
	if damagedRow() != before {
		t.Error("the reconciliation rewrote the damaged row")
	}
	retired, err := st.RetiredSecrets(ctx)
	if err != nil || len(retired) != 1 || retired[0].EndpointID != "we_gone" {
		t.Errorf("retired = %+v, %v; want we_gone retired beside the damaged one", retired, err)
	}
	var ids []string
	active, _ := st.Secrets(ctx)
	for _, s := range active {
		ids = append(ids, s.EndpointID)
	}
	if !slices.Equal(ids, []string{"we_live", "we_damaged"}) {
		t.Errorf("active = %v; want we_live and the damaged we_damaged left as it was", ids)
	}
}
