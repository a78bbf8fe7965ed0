package webhook

import (
	"errors"
	"testing"
	"time"
)

func FuzzParseHeader(f *testing.F) {
	f.Add("t=1700000000,v1=" + goodV1)
	f.Add("t=1700000000,v1=" + goodV1 + ",v1=" + goodV1)
	f.Add("v1=" + goodV1 + ",t=1")
	f.Add("t=,v1=")
	f.Add(",,,")
	f.Add("t=1,t=2")
	f.Fuzz(func(t *testing.T, header string) {
		h, err := ParseHeader(header)
		if err != nil {
			if !errors.Is(err, ErrMalformedHeader) {
				t.Fatalf("ParseHeader(%q) returned %v, which is not ErrMalformedHeader", header, err)
			}
			return
		}
		if len(h.Signatures) == 0 || h.Timestamp < 0 || len(header) > MaxHeaderLen {
			t.Fatalf("ParseHeader(%q) accepted %+v", header, h)
		}
	})
}

func FuzzVerify(f *testing.F) {
	f.Add([]byte(`{"id":"evt_1"}`), "whsec_a", int64(1700000000), int64(0), "")
	f.Add([]byte{}, "", int64(0), int64(301), "t=0,v1="+goodV1)
	f.Add([]byte("\x00\xff"), "whsec_b", int64(1<<40), int64(-300), "garbage")
	f.Fuzz(func(t *testing.T, body []byte, secret string, ts, skew int64, header string) {
		if ts < 0 || ts > 1<<40 {
			ts = 1700000000
		}
		signedAt := time.Unix(ts, 0)
		now := signedAt.Add(time.Duration(skew%100000) * time.Second)
		window := DefaultWindow
		inWindow := now.Sub(signedAt) <= window && now.Sub(signedAt) >= -window

		// A signature made by Sign verifies iff the clock is within the window.
		good := Sign(secret, signedAt, body)
		idx, err := Verify(body, good, []string{"whsec_other", secret}, now, window)
		switch {
		case inWindow && (err != nil || (idx != 1 && secret != "whsec_other")):
			t.Fatalf("own signature refused: %d, %v", idx, err)
		case !inWindow && !errors.Is(err, ErrTimestampOutsideWindow):
			t.Fatalf("out-of-window signature: %v", err)
		}

		// A flipped body byte never verifies.
		if len(body) > 0 && inWindow {
			changed := append([]byte(nil), body...)
			changed[0] ^= 0x01
			if _, err := Verify(changed, good, []string{secret}, now, window); !errors.Is(err, ErrNoValidSignature) {
				t.Fatalf("altered body: %v", err)
			}
		}

		// An arbitrary header never panics and fails only with a sentinel.
		if _, err := Verify(body, header, []string{secret}, now, window); err != nil &&
			!errors.Is(err, ErrMalformedHeader) && !errors.Is(err, ErrTimestampOutsideWindow) && !errors.Is(err, ErrNoValidSignature) {
			t.Fatalf("Verify(%q) returned a non-sentinel error %v", header, err)
		}
	})
}
