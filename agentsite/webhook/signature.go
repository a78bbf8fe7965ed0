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
	out := make([]byte, 0, len("t=")+len(t)+len(",v1=")+hex.EncodedLen(sha256.Size))
	out = append(out, "t="...)
	out = append(out, t...)
	out = append(out, ",v1="...)
	out = hex.AppendEncode(out, sum[:])
	return string(out)
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
	return parseHeader(header, nil)
}

// parseHeader is ParseHeader appending the v1 values to sigs[:0], so that
// Verify can lend it an array on its own stack. TimestampText is a
// substring of header, not a copy.
func parseHeader(header string, sigs [][sha256.Size]byte) (Header, error) {
	if header == "" {
		return Header{}, fmt.Errorf("%w: empty", ErrMalformedHeader)
	}
	if len(header) > MaxHeaderLen {
		return Header{}, fmt.Errorf("%w: longer than %d bytes", ErrMalformedHeader, MaxHeaderLen)
	}
	h := Header{Signatures: sigs[:0]}
	seenT := false
	rest := header
	for n := 1; ; n++ {
		part, tail, more := strings.Cut(rest, ",")
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
			sig, ok := decodeV1(value)
			if !ok {
				return Header{}, fmt.Errorf("%w: v1 is not 64 lowercase hex characters", ErrMalformedHeader)
			}
			h.Signatures = append(h.Signatures, sig)
		}
		if !more {
			break
		}
		rest = tail
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

// badHex marks a byte of lowerHex that is not a lowercase hex digit; it
// has a bit above the low four, which no digit's value has.
const badHex = 0xff

// lowerHex maps each byte to its value as a lowercase hex digit, or to
// badHex. Upper case is refused: the contract writes v1 in lower case.
var lowerHex = func() (t [256]byte) {
	for i := range t {
		t[i] = badHex
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		t[c] = c - 'a' + 10
	}
	return t
}()

// decodeV1 decodes a v1 value of exactly 64 lowercase hex characters
// straight from the header text, with neither a []byte copy of it nor a
// slice for the result. The header is public, so decoding it need not take
// constant time.
func decodeV1(s string) (sig [sha256.Size]byte, ok bool) {
	if len(s) != 2*sha256.Size {
		return sig, false
	}
	var bad byte
	for i := range sig {
		hi, lo := lowerHex[s[2*i]], lowerHex[s[2*i+1]]
		bad |= hi | lo
		sig[i] = hi<<4 | lo&0x0f
	}
	return sig, bad&^0x0f == 0
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
	if err := h.checkWindow(now, window); err != nil {
		return Header{}, err
	}
	return h, nil
}

// checkWindow is Check's test of the timestamp.
func (h *Header) checkWindow(now time.Time, window time.Duration) error {
	age := now.Sub(time.Unix(h.Timestamp, 0))
	if age > window || age < -window {
		return fmt.Errorf("%w: %s from the receiver's clock, window %s", ErrTimestampOutsideWindow, age.Truncate(time.Second), window)
	}
	return nil
}

// Match returns the index in secrets of the secret whose MAC over the
// header's timestamp text, a period and body equals one of its v1 values.
// Every secret is tried against every v1 with a constant-time comparison.
// The MAC is computed with a keyed HMAC state pooled per secret (see
// macPools), so a call allocates nothing. The error wraps
// ErrNoValidSignature.
func (h Header) Match(body []byte, secrets []string) (int, error) {
	if len(secrets) == 0 {
		return -1, fmt.Errorf("%w: no signing secret is configured for this receiver", ErrNoValidSignature)
	}
	if len(h.Signatures) == 0 {
		return -1, ErrNoValidSignature
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

// stackSignatures is how many v1 values Verify decodes into an array on its
// stack: the sender sends one, or two during a rotation of its secret. A
// header with more takes a slice on the heap instead.
const stackSignatures = 4

// Verify checks header against the raw body and returns the index in secrets
// of the secret that signed it: Check, then Match. Errors wrap
// ErrMalformedHeader, ErrTimestampOutsideWindow or ErrNoValidSignature.
func Verify(body []byte, header string, secrets []string, now time.Time, window time.Duration) (int, error) {
	var sigs [stackSignatures][sha256.Size]byte
	h, err := parseHeader(header, sigs[:0])
	if err != nil {
		return -1, err
	}
	if err := h.checkWindow(now, window); err != nil {
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
