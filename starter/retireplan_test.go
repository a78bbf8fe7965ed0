package starter

import (
	"errors"
	"testing"
	"time"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// TestPlanRetireSaysWhatRetireWould plans retirements and checks them
// against what RetireSecret then does: the secret named by endpoint or by
// fingerprint, when it stops being accepted, an earlier retirement that
// stays (nothing changes), and the refusals RetireSecret makes; the plan
// itself changes nothing.
func TestPlanRetireSaysWhatRetireWould(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	var fpA, fpB string
	url := seededStore(t, storetest.TestKey, func(st *store.Store) {
		fpA = putSecret(t, st, "we_a", "main", "whsec_plan_a")
		fpB = putSecret(t, st, "we_b", "", "whsec_plan_b")
		if _, err := st.Retire(t.Context(), "we_b", now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	})
	st, _, err := opener(url, storetest.TestKey)(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()

	for _, tc := range []struct {
		name                  string
		endpoint, fingerprint string
		at                    time.Time
		want                  RetirePlan
		err                   error
	}{
		{"by endpoint, now", "we_a", "", now, RetirePlan{EndpointID: "we_a", Fingerprint: fpA, Receiver: "main", At: now}, nil},
		{"by fingerprint, later", "", fpA, now.Add(time.Minute), RetirePlan{EndpointID: "we_a", Fingerprint: fpA, Receiver: "main", At: now.Add(time.Minute)}, nil},
		{"an earlier retirement stays", "we_b", "", now.Add(2 * time.Hour), RetirePlan{EndpointID: "we_b", Fingerprint: fpB, At: now.Add(time.Hour), Unchanged: true}, nil},
		{"not stored", "we_none", "", now, RetirePlan{}, store.ErrNotFound},
		{"no such fingerprint", "", "0000", now, RetirePlan{}, store.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PlanRetire(t.Context(), st, tc.endpoint, tc.fingerprint, tc.at)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if tc.err != nil {
				return
			}
			if got != tc.want {
				t.Errorf("plan = %+v, want %+v", got, tc.want)
			}
		})
	}
	if retired, err := st.RetiredSecrets(t.Context()); err != nil || len(retired) != 0 {
		t.Errorf("planning retired %v (%v)", retired, err)
	}
	r, err := RetireSecret(t.Context(), st, "we_b", "", now.Add(2*time.Hour))
	if err != nil || !r.At.Equal(now.Add(time.Hour)) {
		t.Errorf("RetireSecret after the plan of an earlier retirement: %+v, %v; want it at %s, as planned", r, err, now.Add(time.Hour))
	}

	noKey, _, err := opener(url, nil)(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = noKey.Close() }()
	if _, err := PlanRetire(t.Context(), noKey, "we_a", "", now); !errors.Is(err, store.ErrNoSecretKey) {
		t.Errorf("without a key: %v, want store.ErrNoSecretKey", err)
	}
	other, _, err := opener(url, otherKey)(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()
	if p, err := PlanRetire(t.Context(), other, "we_a", "", now); err != nil || !p.Unreadable {
		t.Errorf("with another key: %+v, %v; want it Unreadable (RetireSecret refuses it)", p, err)
	}
}
