package webhook

import (
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// referenceParse is a second parser of the svc-signature header, written
// with the standard library's splitting, integer parsing and hex decoding
// instead of parseHeader's hand-rolled loops, which FuzzParseHeader holds
// to it. It reports whether the header is well formed.
func referenceParse(header string) (Header, bool) {
	if header == "" || len(header) > MaxHeaderLen {
		return Header{}, false
	}
	var h Header
	seenT := false
	for _, part := range strings.Split(header, ",") {
		key, value, ok := strings.Cut(part, "=")
		if !ok || key == "" {
			return Header{}, false
		}
		switch key {
		case "t":
			if seenT || value == "" || len(value) > 18 || (len(value) > 1 && value[0] == '0') ||
				strings.Trim(value, "0123456789") != "" {
				return Header{}, false
			}
			seenT = true
			ts, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return Header{}, false
			}
			h.Timestamp, h.TimestampText = ts, value
		case "v1":
			b, err := hex.DecodeString(value)
			if err != nil || len(b) != 32 || strings.ToLower(value) != value {
				return Header{}, false
			}
			h.Signatures = append(h.Signatures, [32]byte(b))
		}
	}
	if !seenT || len(h.Signatures) == 0 {
		return Header{}, false
	}
	return h, true
}

func FuzzParseHeader(f *testing.F) {
	f.Add("t=1700000000,v1=" + goodV1)
	f.Add("t=1700000000,v1=" + goodV1 + ",v1=" + goodV1)
	f.Add("v1=" + goodV1 + ",t=1")
	f.Add("t=,v1=")
	f.Add(",,,")
	f.Add("t=1,t=2")
	f.Add("t=1,v1=" + strings.ToUpper(goodV1))
	f.Add("t=1,v1=" + goodV1[:62] + "g0")
	f.Add("t=1,v2=x,v1=" + goodV1 + ",")
	f.Fuzz(func(t *testing.T, header string) {
		h, err := ParseHeader(header)
		want, wantOK := referenceParse(header)
		if (err == nil) != wantOK {
			t.Fatalf("ParseHeader(%q) error = %v, the reference parser accepts it: %v", header, err, wantOK)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformedHeader) {
				t.Fatalf("ParseHeader(%q) returned %v, which is not ErrMalformedHeader", header, err)
			}
			return
		}
		if h.Timestamp != want.Timestamp || h.TimestampText != want.TimestampText || !slices.Equal(h.Signatures, want.Signatures) {
			t.Fatalf("ParseHeader(%q) = %+v, want %+v", header, h, want)
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
	f.Add([]byte(`{}`), "whsec_other", int64(1700000000), int64(5), "t=1700000000,v1="+goodV1+",v1="+goodV1)
	// HMAC pads a short key with zero bytes, so this secret signs as
	// whsec_other does (found by make test's short fuzz run).
	f.Add([]byte("0"), "whsec_other\x00", int64(1700000000), int64(5), "0")
	f.Fuzz(func(t *testing.T, body []byte, secret string, ts, skew int64, header string) {
		if ts < 0 || ts > 1<<40 {
			ts = 1700000000
		}
		signedAt := time.Unix(ts, 0)
		now := signedAt.Add(time.Duration(skew%100000) * time.Second)
		window := DefaultWindow
		inWindow := now.Sub(signedAt) <= window && now.Sub(signedAt) >= -window

		// Sign agrees with a MAC computed with crypto/hmac directly, not
		// through the pooled states that Sign and Verify share.
		good := Sign(secret, signedAt, body)
		if want := "t=" + itoa(ts) + ",v1=" + macHex(secret, itoa(ts), body); good != want {
			t.Fatalf("Sign = %q, want %q (crypto/hmac)", good, want)
		}

		// A signature made by Sign verifies iff the clock is within the
		// window, after another secret's MAC was computed with a pooled
		// state. It verifies with the first of the two only when both are
		// the same HMAC key: HMAC pads a key of up to a block with zero
		// bytes, so whsec_other and whsec_other followed by NULs sign alike.
		idx, err := Verify(body, good, []string{"whsec_other", secret}, now, window)
		switch {
		case inWindow && (err != nil || (idx != 1 && !sameHMACKey(secret, "whsec_other"))):
			t.Fatalf("own signature refused: %d, %v", idx, err)
		case !inWindow && !errors.Is(err, ErrTimestampOutsideWindow):
			t.Fatalf("out-of-window signature: %v", err)
		}

		// A flipped body byte never verifies, though a state keyed with
		// the same secret has just verified the original.
		if len(body) > 0 && inWindow {
			changed := append([]byte(nil), body...)
			changed[0] ^= 0x01
			if _, err := Verify(changed, good, []string{secret}, now, window); !errors.Is(err, ErrNoValidSignature) {
				t.Fatalf("altered body: %v", err)
			}
		}

		// An arbitrary header never panics, fails only with a sentinel,
		// and Check then Match (the ingress's way) agrees with Verify.
		idx, err = Verify(body, header, []string{secret}, now, window)
		if err != nil &&
			!errors.Is(err, ErrMalformedHeader) && !errors.Is(err, ErrTimestampOutsideWindow) && !errors.Is(err, ErrNoValidSignature) {
			t.Fatalf("Verify(%q) returned a non-sentinel error %v", header, err)
		}
		h, cerr := Check(header, now, window)
		cidx := -1
		if cerr == nil {
			cidx, cerr = h.Match(body, []string{secret})
		}
		if cidx != idx || (cerr == nil) != (err == nil) {
			t.Fatalf("header %q: Check then Match = %d, %v; Verify = %d, %v", header, cidx, cerr, idx, err)
		}
	})
}

// sameHMACKey reports whether HMAC-SHA256 treats secrets a and b, both at
// most a block (64 bytes) long, as one key: equal once trailing zero bytes,
// which HMAC's padding adds anyway, are removed.
func sameHMACKey(a, b string) bool {
	const block = 64
	return len(a) <= block && len(b) <= block && strings.TrimRight(a, "\x00") == strings.TrimRight(b, "\x00")
}
