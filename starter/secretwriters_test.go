package starter

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// TestRetireAndRekeyWithAnotherKeyChangeNothing is issue 33, item 1, as
// `siteops secret retire` and `siteops secret rekey` call the store:
// retiring with a SITEOPS_SECRET_KEY that did not seal the secret is
// refused with ErrKeyMismatch naming the endpoint, by endpoint and by
// fingerprint; without any key the error names the key that sealed what
// is stored and never advises making a new one; a rekey whose keys open
// nothing names what it left; every row stays byte for byte as it was,
// and the right key still retires the secret.
func TestRetireAndRekeyWithAnotherKeyChangeNothing(t *testing.T) {
	ctx := t.Context()
	var fp string
	url := seededStore(t, storetest.TestKey, func(st *store.Store) { fp = putSecret(t, st, "we_1", "main", "whsec_one") })
	wrong, _, err := opener(url, otherKey)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = wrong.Close() }()
	before := storetest.SecretRows(t, wrong.DB())
	later := time.Now().Add(30 * time.Minute)
	for _, tc := range []struct{ endpoint, fingerprint string }{{"we_1", ""}, {"", fp}} {
		_, err := RetireSecret(ctx, wrong, tc.endpoint, tc.fingerprint, later)
		if !errors.Is(err, store.ErrKeyMismatch) || !errors.Is(err, store.ErrSecretUnreadable) || !strings.Contains(err.Error(), "we_1") || !strings.Contains(err.Error(), "nothing was changed") {
			t.Errorf("retiring %+v with another key = %v; want a refusal naming we_1", tc, err)
		}
	}
	res, err := Rekey(ctx, wrong, []byte("0000000000000000000000000000000x"))
	if err != nil || res.Reencrypted != 0 || res.StillUnreadable != 1 || !slices.Equal(res.Unreadable, []string{"we_1"}) {
		t.Errorf("Rekey with keys that open nothing = %+v, %v; want we_1 named, left as it was", res, err)
	}
	noKey, _, err := opener(url, nil)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = noKey.Close() }()
	right, _, err := opener(url, storetest.TestKey)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = right.Close() }()
	if _, err := RetireSecret(ctx, noKey, "we_1", "", later); !errors.Is(err, store.ErrNoSecretKey) || strings.Contains(err.Error(), "openssl") ||
		!strings.Contains(err.Error(), right.SecretKeyID()) || !strings.Contains(err.Error(), "SITEOPS_SECRET_KEY_FILE") {
		t.Errorf("retiring without a key = %v; want ErrNoSecretKey naming the key that sealed the stored secret, never advising a new one", err)
	}
	storetest.SameSecretRows(t, "retire and rekey with another key, and retire without one", before, storetest.SecretRows(t, wrong.DB()))

	r, err := RetireSecret(ctx, right, "we_1", "", later)
	if err != nil || !r.At.Equal(later.UTC().Truncate(time.Microsecond)) {
		t.Fatalf("retiring with the right key = %+v, %v", r, err)
	}
	if set, err := right.ActiveSecrets(ctx, "main"); err != nil || len(set.Secrets) != 1 || set.Secrets[0].Reveal() != "whsec_one" {
		t.Errorf("we_1 does not open with the right key after its retirement was set: %+v, %v", set.Infos, err)
	}
}
