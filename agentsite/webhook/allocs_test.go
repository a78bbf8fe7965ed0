package webhook

import (
	"bytes"
	"testing"
	"time"
)

// maxVerifyAllocs is issue 22's bound on the allocations of one
// verification of a 1 KiB body with two secrets and one v1.
const maxVerifyAllocs = 4

// TestVerifyAllocations checks that bound for both ways in: Verify, and
// Check then Header.Match as the ingress calls them (Check's Header keeps
// its v1 values in a slice, one allocation). Allocation counts do not
// depend on the machine's speed, so this is a test, not a benchmark; it
// holds under -race too (see macPool).
func TestVerifyAllocations(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := bytes.Repeat([]byte("a"), 1<<10)
	header := Sign("whsec_alloc_new", now, body)
	// The matching secret second: both are tried, as during a rotation.
	secrets := []string{"whsec_alloc_old", "whsec_alloc_new"}

	tests := []struct {
		name string
		max  float64
		run  func() error
	}{
		{"Verify", maxVerifyAllocs, func() error {
			_, err := Verify(body, header, secrets, now, DefaultWindow)
			return err
		}},
		{"Check then Match", maxVerifyAllocs, func() error {
			h, err := Check(header, now, DefaultWindow)
			if err != nil {
				return err
			}
			_, err = h.Match(body, secrets)
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(); err != nil {
				t.Fatalf("verification failed: %v", err)
			}
			got := testing.AllocsPerRun(100, func() {
				if err := tc.run(); err != nil {
					panic(err)
				}
			})
			if got > tc.max {
				t.Errorf("allocations per verification = %v, want at most %v", got, tc.max)
			}
			t.Logf("%v allocations per verification", got)
		})
	}
}
