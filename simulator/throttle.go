package simulator

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// throttle is the fixed-rate limit of Faults.RateLimitRPS: one token bucket
// per API key, all with the same rate and burst. Buckets start full and are
// made anew when the rate or the burst changes.
type throttle struct {
	mu      sync.Mutex
	rps     float64
	burst   int
	buckets map[string]*rate.Limiter
}

// take spends one of the key's tokens at now. When there is none it returns
// false and the wait until the next token.
func (t *throttle) take(key string, rps float64, burst int, now time.Time) (bool, time.Duration) {
	if rps <= 0 {
		return true, 0
	}
	burst = max(burst, 1)
	t.mu.Lock()
	defer t.mu.Unlock()
	if rps != t.rps || burst != t.burst || t.buckets == nil {
		t.rps, t.burst, t.buckets = rps, burst, map[string]*rate.Limiter{}
	}
	b := t.buckets[key]
	if b == nil {
		b = rate.NewLimiter(rate.Limit(rps), burst)
		t.buckets[key] = b
	}
	if b.AllowN(now, 1) {
		return true, 0
	}
	missing := 1 - b.TokensAt(now)
	return false, time.Duration(missing / rps * float64(time.Second))
}

// retryAfterCeil writes d as Retry-After seconds: rounded up, at least 1.
func retryAfterCeil(d time.Duration) string {
	secs := (d + time.Second - 1) / time.Second
	return strconv.FormatInt(int64(max(secs, 1)), 10)
}

// throttleKey answers 429 when the key is over the fixed-rate limit.
func (s *Simulator) throttleKey(w http.ResponseWriter, token string) (response, bool) {
	f := s.Faults()
	allowed, wait := s.throttle.take(token, f.RateLimitRPS, f.RateLimitBurst, s.now())
	if allowed {
		return response{}, false
	}
	w.Header().Set("Retry-After", retryAfterCeil(wait))
	return fail(http.StatusTooManyRequests, "rate_limited", "this API key is over its rate limit; wait for Retry-After", ""), true
}

// KeyID is the fingerprint of an API key that the request log and the
// statistics show in place of the key: "key_" and 12 hex digits of its
// SHA-256.
func KeyID(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "key_" + hex.EncodeToString(sum[:6])
}
