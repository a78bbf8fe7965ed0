package webhook

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestMACPoolsBounded checks that a stream of distinct secrets cannot grow
// the table of pooled states past maxPooledSecrets, and that secrets
// verify as before once it has been emptied.
func TestMACPoolsBounded(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"evt_bound"}`)
	const kept = "whsec_bound_kept"
	header := Sign(kept, now, body)
	for i := range 3 * maxPooledSecrets {
		secret := "whsec_bound_" + strconv.Itoa(i)
		if got, want := Sign(secret, now, body), "t=1800000000,v1="+macHex(secret, "1800000000", body); got != want {
			t.Fatalf("Sign with secret %d = %q, want %q", i, got, want)
		}
		macs.mu.Lock()
		n := macs.n
		macs.mu.Unlock()
		if n > maxPooledSecrets {
			t.Fatalf("after %d distinct secrets the table counts %d, want at most %d", i+1, n, maxPooledSecrets)
		}
	}
	entries := 0
	macs.pools.Range(func(any, any) bool { entries++; return true })
	if entries > maxPooledSecrets {
		t.Errorf("the table holds %d secrets, want at most %d", entries, maxPooledSecrets)
	}
	if idx, err := Verify(body, header, []string{"whsec_bound_1", kept}, now, DefaultWindow); idx != 1 || err != nil {
		t.Errorf("Verify after the table was emptied = %d, %v; want 1, nil", idx, err)
	}
}

// TestMACPoolsConcurrent verifies from many goroutines at once, with
// secrets shared between them and bodies of their own, so that a state
// used by two callers at once, or returned to the wrong secret's pool,
// shows as a wrong answer (and, under -race, as a race).
func TestMACPoolsConcurrent(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	secrets := []string{"whsec_conc_a", "whsec_conc_b", "whsec_conc_c"}
	const goroutines, rounds = 8, 200
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for r := range rounds {
				body := fmt.Appendf(nil, `{"id":"evt_%d_%d"}`, g, r)
				signer := (g + r) % len(secrets)
				header := Sign(secrets[signer], now, body)
				idx, err := Verify(body, header, secrets, now, DefaultWindow)
				if idx != signer || err != nil {
					errs <- fmt.Errorf("goroutine %d round %d: Verify = %d, %w; want %d, nil", g, r, idx, err, signer)
					return
				}
				body[len(body)-2] ^= 1
				if idx, err := Verify(body, header, secrets, now, DefaultWindow); err == nil {
					errs <- fmt.Errorf("goroutine %d round %d: an altered body verified with secret %d", g, r, idx)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestMACPoolKeepsAtMostMaxIdleStates checks that a burst of verifications
// with one secret leaves at most maxIdleStates states behind, and that the
// states kept are keyed with that secret.
func TestMACPoolKeepsAtMostMaxIdleStates(t *testing.T) {
	const secret = "whsec_idle"
	pool := newMACPool(secret)
	held := make([]*macState, 3*maxIdleStates)
	for i := range held {
		held[i] = pool.get()
	}
	for _, s := range held {
		pool.put(s)
	}
	if got := len(pool.idle); got != maxIdleStates {
		t.Errorf("idle states after %d were put back = %d, want %d", len(held), got, maxIdleStates)
	}
	body := []byte(`{"id":"evt_idle"}`)
	sum := pool.get().sum("1800000000", body)
	if got, want := hex.EncodeToString(sum[:]), macHex(secret, "1800000000", body); got != want {
		t.Errorf("a kept state's MAC = %s, want %s", got, want)
	}
}
