package starter

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/workflows"
)

// opener opens the SQLite store at url with key, as
// wiring.InspectStoreFromEnv opens the environment's: a new *store.Store
// that the caller closes.
func opener(url string, key []byte) func(context.Context) (*store.Store, string, error) {
	return func(ctx context.Context) (*store.Store, string, error) {
		st, err := store.Open(ctx, url, store.Options{SecretKey: key})
		return st, url, err
	}
}

// seededStore opens a new SQLite store with the test key and calls seed
// on it; it returns the store's URL.
func seededStore(t *testing.T, key []byte, seed func(st *store.Store)) string {
	t.Helper()
	url := storetest.SQLiteURL(t)
	st, _, err := opener(url, key)(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	seed(st)
	return url
}

func putSecret(t *testing.T, st *store.Store, endpointID, receiver, secret string) string {
	t.Helper()
	sec := agentsite.NewSigningSecret(secret)
	if err := st.PutSecret(t.Context(), endpointID, receiver, sec); err != nil {
		t.Fatal(err)
	}
	return sec.Fingerprint()
}

type endpointList []agentsite.WebhookEndpoint

func (l endpointList) ListWebhookEndpoints(context.Context) ([]agentsite.WebhookEndpoint, error) {
	return l, nil
}

var otherKey = []byte("fedcba9876543210fedcba9876543210")

// TestListEndpoints lists endpoints beside what the store holds of their
// secrets: stored (with receiver and fingerprint), retired, unreadable
// (stored under another key) or not stored; and unknown for every one
// when the store cannot be opened or has no key to read with.
func TestListEndpoints(t *testing.T) {
	ctx := t.Context()
	var fps = map[string]string{}
	url := seededStore(t, storetest.TestKey, func(st *store.Store) {
		fps["we_stored"] = putSecret(t, st, "we_stored", "v2", "whsec_stored")
		fps["we_retired"] = putSecret(t, st, "we_retired", "", "whsec_retired")
		fps["we_unreadable"] = agentsite.NewSigningSecret("whsec_other").Fingerprint()
		if _, err := st.Retire(ctx, "we_retired", time.Now().Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		// A secret whose key id names another key does not decrypt.
		putSecret(t, st, "we_unreadable", "", "whsec_other")
		if _, err := st.DB().ExecContext(ctx, `UPDATE webhook_secrets SET key_id = 'k2-0123456789ab' WHERE endpoint_id = $1`, "we_unreadable"); err != nil {
			t.Fatal(err)
		}
	})

	api := endpointList{{ID: "we_stored"}, {ID: "we_retired"}, {ID: "we_unreadable"}, {ID: "we_env"}}
	got, err := ListEndpoints(ctx, api, opener(url, storetest.TestKey))
	if err != nil {
		t.Fatal(err)
	}
	want := []Endpoint{
		{WebhookEndpoint: api[0], Secret: SecretStored, Receiver: "v2", Fingerprint: fps["we_stored"]},
		{WebhookEndpoint: api[1], Secret: SecretRetired, Receiver: "default", Fingerprint: fps["we_retired"]},
		{WebhookEndpoint: api[2], Secret: SecretUnreadable, Receiver: "default", Fingerprint: fps["we_unreadable"]},
		{WebhookEndpoint: api[3], Secret: SecretNotStored},
	}
	if len(got) != len(want) {
		t.Fatalf("ListEndpoints = %+v, want %+v", got, want)
	}
	for i, g := range got {
		if g.ID != want[i].ID || g.Secret != want[i].Secret || g.Receiver != want[i].Receiver || g.Fingerprint != want[i].Fingerprint {
			t.Errorf("endpoint %d = %+v, want %+v", i, g, want[i])
		}
	}

	for name, open := range map[string]func(context.Context) (*store.Store, string, error){
		"no store":  func(context.Context) (*store.Store, string, error) { return nil, "", errors.New("no siteops database") },
		"no key":    opener(url, nil),
		"wrong url": opener("sqlite://"+t.TempDir()+"/missing/x.db", storetest.TestKey),
	} {
		got, err := ListEndpoints(ctx, api, open)
		if err != nil || len(got) != len(api) {
			t.Fatalf("%s: ListEndpoints = %+v, %v; want every endpoint", name, got, err)
		}
		for _, e := range got {
			if e.Secret != SecretUnknown || e.Fingerprint != "" {
				t.Errorf("%s: %s's secret is %q (%q), want unknown", name, e.ID, e.Secret, e.Fingerprint)
			}
		}
	}
}

// TestStoredSecretNow reads StoredSecret through an opener, and says
// unknown, with the reason, when the store cannot be opened.
func TestStoredSecretNow(t *testing.T) {
	var fp string
	url := seededStore(t, storetest.TestKey, func(st *store.Store) { fp = putSecret(t, st, "we_1", "", "whsec_one") })
	state, _, err := StoredSecretNow(t.Context(), opener(url, storetest.TestKey), "we_1", fp, time.Now())
	if err != nil || state != SecretStored || !state.Accepted() {
		t.Errorf("StoredSecretNow = %q, %v; want stored, accepted", state, err)
	}
	cause := errors.New("no siteops database")
	state, _, err = StoredSecretNow(t.Context(), func(context.Context) (*store.Store, string, error) { return nil, "", cause }, "we_1", fp, time.Now())
	if !errors.Is(err, cause) || state != SecretUnknown || !state.Accepted() {
		t.Errorf("StoredSecretNow without a store = %q, %v; want unknown (maybe accepted) because of %v", state, err, cause)
	}
	for _, s := range []SecretState{SecretRetired, SecretNotStored, SecretUnreadable} {
		if s.Accepted() {
			t.Errorf("%s is accepted", s)
		}
	}
}

// TestRetireSecret retires by endpoint and by fingerprint, keeps an
// earlier retirement, and refuses what it cannot name: a fingerprint of no
// or of several secrets, an endpoint without a stored secret, a store
// without its key.
func TestRetireSecret(t *testing.T) {
	ctx := t.Context()
	st := storetest.Open(t, store.SQLite)
	one := putSecret(t, st, "we_1", "v2", "whsec_one")
	putSecret(t, st, "we_2", "", "whsec_two")
	shared := putSecret(t, st, "we_3", "", "whsec_shared")
	putSecret(t, st, "we_4", "", "whsec_shared")
	now := time.Now().UTC().Truncate(time.Second)

	r, err := RetireSecret(ctx, st, "", one, now.Add(time.Hour))
	if err != nil || r.EndpointID != "we_1" || r.Receiver != "v2" || r.Fingerprint != one || !r.At.Equal(now.Add(time.Hour)) {
		t.Fatalf("retiring by fingerprint = %+v, %v; want we_1 at %v", r, err, now.Add(time.Hour))
	}
	if r, err := RetireSecret(ctx, st, "we_1", "", now.Add(2*time.Hour)); err != nil || !r.At.Equal(now.Add(time.Hour)) {
		t.Errorf("retiring later = %+v, %v; want the earlier retirement %v to stay", r, err, now.Add(time.Hour))
	}
	if err := st.RetireSecret(ctx, "we_2", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if r, err := RetireSecret(ctx, st, "we_2", "", now.Add(time.Hour)); err != nil || !r.At.Equal(now.Add(time.Minute)) {
		t.Errorf("retiring a rotation's secret = %+v, %v; want the end of its grace period %v", r, err, now.Add(time.Minute))
	}
	for name, tc := range map[string]struct {
		endpoint, fingerprint string
		want                  error
	}{
		"unknown fingerprint": {"", "000000000000", store.ErrNotFound},
		"shared fingerprint":  {"", shared, store.ErrAmbiguous},
		"unknown endpoint":    {"we_9", "", store.ErrNotFound},
	} {
		if _, err := RetireSecret(ctx, st, tc.endpoint, tc.fingerprint, now); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	noKey, _, err := opener(storetest.SQLiteURL(t), nil)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = noKey.Close() }()
	if _, err := RetireSecret(ctx, noKey, "we_1", "", now); !errors.Is(err, store.ErrNoSecretKey) {
		t.Errorf("retiring without a key = %v, want store.ErrNoSecretKey", err)
	}
}

// TestRekey re-encrypts the secrets stored under an old key and counts
// those that still do not decrypt; without the new key it refuses, as a
// setting to give.
func TestRekey(t *testing.T) {
	ctx := t.Context()
	url := seededStore(t, otherKey, func(st *store.Store) { putSecret(t, st, "we_1", "", "whsec_one") })
	st, _, err := opener(url, storetest.TestKey)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	if res, err := Rekey(ctx, st, nil); err != nil || res.Reencrypted != 0 || res.StillUnreadable != 1 {
		t.Errorf("Rekey without the old key = %+v, %v; want 0 re-encrypted, 1 still unreadable", res, err)
	}
	if res, err := Rekey(ctx, st, otherKey); err != nil || res.Reencrypted != 1 || res.StillUnreadable != 0 {
		t.Errorf("Rekey from the old key = %+v, %v; want 1 re-encrypted, none unreadable", res, err)
	}
	noKey, _, err := opener(url, nil)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = noKey.Close() }()
	if _, err := Rekey(ctx, noKey, otherKey); !errors.Is(err, store.ErrNoSecretKey) || err.Error() != "SITEOPS_SECRET_KEY is not set; set it to the new key" {
		t.Errorf("Rekey without SITEOPS_SECRET_KEY = %v, want ErrNewKeyUnset matching store.ErrNoSecretKey", err)
	}
}

// TestRotationOutcome checks the one line a finished rotation is told in,
// and that it says only what is true of the old secret.
func TestRotationOutcome(t *testing.T) {
	at := time.Date(2026, 11, 23, 18, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		st   workflows.SecretRotationStatus
		want string
	}{
		{"done, stored", workflows.SecretRotationStatus{Step: workflows.RotationDone, OldEndpointID: "we_1", NewEndpointID: "we_2", NewFingerprint: "fp2", OldSecretStored: true, OldRetiresAt: at},
			"secret-rotation/we_1 done: new endpoint we_2 (fingerprint fp2); old endpoint we_1 deleted, its secret retires at 2026-11-23T18:00:00Z"},
		{"done, from the environment, reused", workflows.SecretRotationStatus{Step: workflows.RotationDone, OldEndpointID: "we_1", NewEndpointID: "we_2", NewFingerprint: "fp2", NewEndpointReused: true},
			"secret-rotation/we_1 done: new endpoint we_2 (fingerprint fp2); old endpoint we_1 deleted (the new endpoint was created by an earlier run and reused); its secret is not stored here (it comes from SITEOPS_WEBHOOK_SECRETS) and stays accepted on /webhooks until you remove it there after the grace period"},
		{"aborted by nobody", workflows.SecretRotationStatus{Step: workflows.RotationAborted, OldEndpointID: "we_1", NewEndpointID: "we_2", DecidedBy: workflows.DecidedByTimeout},
			"secret-rotation/we_1 aborted by the decision timeout (nobody decided): new endpoint we_2 deleted and its secret retired; the old endpoint we_1 and its secret stay as they were: deliveries signed with it are accepted, and nothing retires it"},
		{"rolled back", workflows.SecretRotationStatus{Step: workflows.RotationRolledBack, OldEndpointID: "we_1", CleanUp: "deleted we_2"},
			"secret-rotation/we_1 rolled back (deleted we_2); the old endpoint we_1 and its secret stay as they were: deliveries signed with it are accepted, and nothing retires it"},
		{"still running", workflows.SecretRotationStatus{Step: "verifying", OldEndpointID: "we_1"}, "secret-rotation/we_1: verifying"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RotationOutcome(workflows.SecretRotationID("we_1"), tc.st); got != tc.want {
				t.Errorf("RotationOutcome =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
