package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DefaultWindow is the replay window the contract gives as the default: a
// timestamp further than this from the receiver's clock, in either direction,
// is refused.
const DefaultWindow = 300 * time.Second

// MaxHeaderLen bounds the svc-signature header a receiver will parse, so that
// a hostile header cannot make verification arbitrarily expensive
// (every secret is tried against every v1).
const MaxHeaderLen = 4096

// Sentinel errors of verification, checked with errors.Is.
var (
	// ErrMalformedHeader means the svc-signature header is not of the form
	// t=<unix seconds>,v1=<64 lowercase hex>[,v1=...].
	ErrMalformedHeader = errors.New("malformed svc-signature header")
	// ErrTimestampOutsideWindow means t is too old or too far in the future:
	// a replay, or a clock that needs fixing on one side.
	ErrTimestampOutsideWindow = errors.New("svc-signature timestamp outside the replay window")
	// ErrNoValidSignature means no v1 matched any of the secrets: a body
	// changed on the way, a wrong concatenation, or the wrong endpoint secret.
	ErrNoValidSignature = errors.New("no valid signature in svc-signature")
	// ErrMalformedBody means the signature was valid but the body is not an
	// event envelope.
	ErrMalformedBody = errors.New("verified body is not a valid event envelope")
)

// Header is a parsed svc-signature header.
type Header struct {
	// Timestamp is the t value in Unix seconds.
	Timestamp int64
	// TimestampText is t exactly as the header wrote it: the signed value
	// starts with this text, not with a re-formatting of Timestamp.
	TimestampText string
	// Signatures are the decoded v1 values, in header order.
	Signatures [][sha256.Size]byte
}

// Sign returns the svc-signature header value for body signed with secret at
// timestamp: t=<unix seconds>,v1=<64 lowercase hex>.
func Sign(secret string, timestamp time.Time, body []byte) string {
	t := strconv.FormatInt(timestamp.Unix(), 10)
	sum := mac(secret, t, body)
	return "t=" + t + ",v1=" + hex.EncodeToString(sum[:])
}

func mac(secret, t string, body []byte) [sha256.Size]byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(t))
	h.Write([]byte{'.'})
	h.Write(body)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// ParseHeader parses an svc-signature header. It refuses, with an error that
// wraps ErrMalformedHeader: an empty or oversized header, a part that is not
// key=value, a missing or repeated t, a t that is not decimal digits, no v1,
// and any v1 that is not exactly 64 lowercase hex characters. A t with a
// leading zero (t=0001700000000) is refused too: the contract's t is the
// decimal Unix time, which the sender writes without one, and the MAC is
// computed over the text of t as sent, so another spelling of the same
// number could never verify anyway. Parts with other
// keys (a future v2, say) are skipped so that the sender can add schemes.
func ParseHeader(header string) (Header, error) {
	var h Header
	if header == "" {
		return h, fmt.Errorf("%w: empty", ErrMalformedHeader)
	}
	if len(header) > MaxHeaderLen {
		return h, fmt.Errorf("%w: longer than %d bytes", ErrMalformedHeader, MaxHeaderLen)
	}
	seenT := false
	n := 0
	for part := range strings.SplitSeq(header, ",") {
		n++
		key, value, ok := strings.Cut(part, "=")
		if !ok || key == "" {
			return Header{}, fmt.Errorf("%w: part %d is not key=value", ErrMalformedHeader, n)
		}
		switch key {
		case "t":
			if seenT {
				return Header{}, fmt.Errorf("%w: t given more than once", ErrMalformedHeader)
			}
			seenT = true
			ts, err := parseUnixSeconds(value)
			if err != nil {
				return Header{}, err
			}
			h.Timestamp = ts
			h.TimestampText = value
		case "v1":
			sig, err := parseV1(value)
			if err != nil {
				return Header{}, err
			}
			h.Signatures = append(h.Signatures, sig)
		}
	}
	if !seenT {
		return Header{}, fmt.Errorf("%w: no t", ErrMalformedHeader)
	}
	if len(h.Signatures) == 0 {
		return Header{}, fmt.Errorf("%w: no v1", ErrMalformedHeader)
	}
	return h, nil
}

func parseUnixSeconds(s string) (int64, error) {
	if s == "" || len(s) > 18 {
		return 0, fmt.Errorf("%w: t is not a Unix time in seconds", ErrMalformedHeader)
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("%w: t has a leading zero; it is the decimal Unix time in seconds", ErrMalformedHeader)
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: t is not a Unix time in seconds", ErrMalformedHeader)
		}
		n = n*10 + int64(c-'0')
	}
	return n, nil
}

func parseV1(s string) ([sha256.Size]byte, error) {
	var sig [sha256.Size]byte
	if len(s) != 2*sha256.Size {
		return sig, fmt.Errorf("%w: v1 is not 64 lowercase hex characters", ErrMalformedHeader)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return sig, fmt.Errorf("%w: v1 is not 64 lowercase hex characters", ErrMalformedHeader)
		}
	}
	if _, err := hex.Decode(sig[:], []byte(s)); err != nil {
		return sig, fmt.Errorf("%w: v1 is not 64 lowercase hex characters", ErrMalformedHeader)
	}
	return sig, nil
}

// Check parses header and checks its timestamp against now: everything of
// a delivery that can be checked before its body is read. The timestamp
// must lie within window of now in either direction (a difference of
// exactly window is accepted). Errors wrap ErrMalformedHeader or
// ErrTimestampOutsideWindow.
func Check(header string, now time.Time, window time.Duration) (Header, error) {
	h, err := ParseHeader(header)
	if err != nil {
		return Header{}, err
	}
	age := now.Sub(time.Unix(h.Timestamp, 0))
	if age > window || age < -window {
		return Header{}, fmt.Errorf("%w: %s from the receiver's clock, window %s", ErrTimestampOutsideWindow, age.Truncate(time.Second), window)
	}
	return h, nil
}

// Match returns the index in secrets of the secret whose MAC over the
// header's timestamp text, a period and body equals one of its v1 values.
// Every secret is tried against every v1 with a constant-time comparison.
// The error wraps ErrNoValidSignature.
func (h Header) Match(body []byte, secrets []string) (int, error) {
	if len(secrets) == 0 {
		return -1, fmt.Errorf("%w: no signing secret is configured for this receiver", ErrNoValidSignature)
	}
	for i, secret := range secrets {
		want := mac(secret, h.TimestampText, body)
		for _, got := range h.Signatures {
			if hmac.Equal(want[:], got[:]) {
				return i, nil
			}
		}
	}
	return -1, ErrNoValidSignature
}

// Verify checks header against the raw body and returns the index in secrets
// of the secret that signed it: Check, then Match. Errors wrap
// ErrMalformedHeader, ErrTimestampOutsideWindow or ErrNoValidSignature.
func Verify(body []byte, header string, secrets []string, now time.Time, window time.Duration) (int, error) {
	h, err := Check(header, now, window)
	if err != nil {
		return -1, err
	}
	return h.Match(body, secrets)
}

// VerifyEnvelope verifies body and only then decodes it with
// DecodeEnvelope. It returns the envelope and the index of the matching
// secret; an ErrMalformedBody comes with that index, since the delivery
// did verify.
func VerifyEnvelope(body []byte, header string, secrets []string, now time.Time, window time.Duration) (Envelope, int, error) {
	idx, err := Verify(body, header, secrets, now, window)
	if err != nil {
		return Envelope{}, -1, err
	}
	env, err := DecodeEnvelope(body)
	if err != nil {
		return Envelope{}, idx, err
	}
	return env, idx, nil
}
