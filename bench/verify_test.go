package bench

import (
	"bytes"
	"errors"
	"syscall"
	"testing"
	"time"

	stripewebhook "github.com/stripe/stripe-go/v85/webhook"

	"github.com/siteops/siteops/agentsite/webhook"
)

// The secrets of BenchmarkVerifyAgainstStripe: verifyNewSecret signs, and
// verifyOldSecret is tried first when two are configured (a rotation
// overlap, where the old secret no longer matches).
const (
	verifyOldSecret = "whsec_verify_bench_old_4f1c2a"
	verifyNewSecret = "whsec_verify_bench_new_9d3e7b"
)

// verifyPayload is a 1 KiB lead.created delivery: the envelope of the
// contract with its data padded to exactly 1,024 bytes.
func verifyPayload(b *testing.B) []byte {
	b.Helper()
	head := `{"id":"evt_01JD4R2W8Q5T3N7K9M1P6X2Y4Z","type":"lead.created","created_at":"2026-11-21T09:00:00.000Z","data":{"site_id":"site_01JD4R2","lead_id":"lead_01JD4R3","note":"`
	tail := `"}}`
	body := []byte(head + string(bytes.Repeat([]byte("x"), 1024-len(head)-len(tail))) + tail)
	if len(body) != 1024 {
		b.Fatalf("payload is %d bytes, want 1024", len(body))
	}
	return body
}

// BenchmarkVerifyAgainstStripe measures signature verification of the same
// 1 KiB payloads and the same header (stripe-go's Stripe-Signature and the
// svc-signature have one format: t=<unix seconds>,v1=<64 hex>) three ways:
//
//   - impl=stripe: stripe-go's webhook.ValidatePayload, the reference;
//   - impl=siteops: webhook.Verify;
//   - impl=ingress: webhook.Check, then Header.Match, as the ingress calls
//     them (the header is checked before the body is read).
//
// secrets=1 gives each the signing secret. secrets=2 is the rotation
// overlap: the old secret is tried first and fails, then the signing one;
// stripe-go takes one secret, so its case calls ValidatePayload twice, as
// a receiver built on it would. Every iteration reads the clock
// (ValidatePayload calls time.Since itself), so all three pay for it.
//
// Besides ns/op each case reports cpu-ns/op, the CPU time of the whole
// process (every thread: the garbage collector's work for the allocating
// cases included) per verification. On the shared 2-core machine other
// processes stretch the wall time of whichever case runs while they do;
// they take CPU time from this process only through caches and clocks.
//
// Run the cases in one process, each run of them right after the others,
// and compare the medians and the per-run ratios: see bench/README.md for
// the command.
func BenchmarkVerifyAgainstStripe(b *testing.B) {
	body := verifyPayload(b)
	for _, n := range []int{1, 2} {
		secrets := []string{verifyNewSecret}
		if n == 2 {
			secrets = []string{verifyOldSecret, verifyNewSecret}
		}
		prefix := "secrets=" + string(rune('0'+n))
		b.Run(prefix+"/impl=stripe", func(b *testing.B) {
			benchVerify(b, body, func(header string) error {
				return stripeVerify(body, header, secrets)
			})
		})
		b.Run(prefix+"/impl=siteops", func(b *testing.B) {
			benchVerify(b, body, func(header string) error {
				_, err := webhook.Verify(body, header, secrets, time.Now(), webhook.DefaultWindow)
				return err
			})
		})
		b.Run(prefix+"/impl=ingress", func(b *testing.B) {
			benchVerify(b, body, func(header string) error {
				h, err := webhook.Check(header, time.Now(), webhook.DefaultWindow)
				if err != nil {
					return err
				}
				_, err = h.Match(body, secrets)
				return err
			})
		})
	}
}

// benchVerify runs verify on a header of body signed now with
// verifyNewSecret for b.N iterations, and reports the bytes, allocations
// and CPU time per verification.
func benchVerify(b *testing.B, body []byte, verify func(header string) error) {
	b.Helper()
	header := webhook.Sign(verifyNewSecret, time.Now(), body)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	start := processCPU(b)
	for b.Loop() {
		if err := verify(header); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op")
}

// processCPU is the user and system CPU time this process has used, on
// all its threads.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// stripeVerify tries each secret in turn with stripe-go's ValidatePayload,
// as a receiver with two secrets during a rotation would.
func stripeVerify(body []byte, header string, secrets []string) error {
	err := stripewebhook.ErrNoValidSignature
	for _, s := range secrets {
		if err = stripewebhook.ValidatePayload(body, header, s); err == nil {
			return nil
		}
		if !errors.Is(err, stripewebhook.ErrNoValidSignature) {
			return err
		}
	}
	return err
}

// TestStripeAcceptsTheSameHeaders checks that the benchmark compares like
// with like: stripe-go accepts what webhook.Sign makes, and both refuse
// the same wrong secret and altered body.
func TestStripeAcceptsTheSameHeaders(t *testing.T) {
	body := make([]byte, 1024)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	header := webhook.Sign(verifyNewSecret, time.Now(), body)
	if err := stripewebhook.ValidatePayload(body, header, verifyNewSecret); err != nil {
		t.Fatalf("stripe-go refused webhook.Sign's header: %v", err)
	}
	if err := stripeVerify(body, header, []string{verifyOldSecret, verifyNewSecret}); err != nil {
		t.Fatalf("stripe-go with the old secret first: %v, want nil", err)
	}
	if err := stripewebhook.ValidatePayload(body, header, verifyOldSecret); !errors.Is(err, stripewebhook.ErrNoValidSignature) {
		t.Errorf("stripe-go with the wrong secret: %v, want ErrNoValidSignature", err)
	}
	if _, err := webhook.Verify(body, header, []string{verifyOldSecret}, time.Now(), webhook.DefaultWindow); !errors.Is(err, webhook.ErrNoValidSignature) {
		t.Errorf("siteops with the wrong secret: %v, want ErrNoValidSignature", err)
	}
	body[0] ^= 1
	if err := stripewebhook.ValidatePayload(body, header, verifyNewSecret); !errors.Is(err, stripewebhook.ErrNoValidSignature) {
		t.Errorf("stripe-go with an altered body: %v, want ErrNoValidSignature", err)
	}
	if _, err := webhook.Verify(body, header, []string{verifyNewSecret}, time.Now(), webhook.DefaultWindow); !errors.Is(err, webhook.ErrNoValidSignature) {
		t.Errorf("siteops with an altered body: %v, want ErrNoValidSignature", err)
	}
}
