package simulator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
)

// stepClock is a simulator clock that moves only when the test says.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestFixedRateLimitAnswers429WithRetryAfter(t *testing.T) {
	type step struct {
		advance    time.Duration
		status     int
		retryAfter string
	}
	for _, tc := range []struct {
		name  string
		rps   float64
		burst int
		steps []step
	}{
		{"1/s, burst 1", 1, 0, []step{
			{0, 200, ""},
			{0, 429, "1"},
			{500 * time.Millisecond, 429, "1"}, // 0.5 s rounds up to 1
			{500 * time.Millisecond, 200, ""},
		}},
		{"1 every 4 s, burst 2", 0.25, 2, []step{
			{0, 200, ""},
			{0, 200, ""},
			{0, 429, "4"},
			{time.Second, 429, "3"},
			{2500 * time.Millisecond, 429, "1"},
			{500 * time.Millisecond, 200, ""},
			{0, 429, "4"}, // a 429 spends no token
		}},
		{"10/s, burst 3", 10, 3, []step{
			{0, 200, ""},
			{0, 200, ""},
			{0, 200, ""},
			{0, 429, "1"},
			{100 * time.Millisecond, 200, ""},
			{0, 429, "1"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &stepClock{now: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)}
			cfg := testConfig()
			cfg.Now = clock.Now
			cfg.Faults = Faults{RateLimitRPS: tc.rps, RateLimitBurst: tc.burst}
			h := newHarness(t, cfg)
			for i, s := range tc.steps {
				clock.Advance(s.advance)
				r := h.do(t, "GET", "/api/v1/webhook-endpoints", keyAll, "", "")
				if r.Status != s.status || r.Header.Get("Retry-After") != s.retryAfter {
					t.Fatalf("step %d: %d Retry-After %q, want %d %q", i, r.Status, r.Header.Get("Retry-After"), s.status, s.retryAfter)
				}
				if code, _ := r.errorCode(); s.status == 429 && code != "rate_limited" {
					t.Errorf("step %d: code %q, want rate_limited", i, code)
				}
			}
		})
	}
}

func TestFixedRateLimitAppliesNothingAndIsPerKey(t *testing.T) {
	clock := &stepClock{now: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)}
	cfg := testConfig()
	cfg.Now = clock.Now
	cfg.Faults = Faults{RateLimitRPS: 1}
	h := newHarness(t, cfg)
	body := `{"title":"A","slug":"acme","type":"business","template":"minimal"}`

	if r := h.do(t, "GET", "/api/v1/webhook-endpoints", keyAll, "", ""); r.Status != 200 {
		t.Fatalf("first request = %d", r.Status)
	}
	r := h.do(t, "POST", "/api/v1/sites", keyAll, "site-1", body)
	if r.Status != 429 || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("over the limit: %d Retry-After %q, want 429 1", r.Status, r.Header.Get("Retry-After"))
	}
	if n := len(h.sim.Sites()); n != 0 {
		t.Errorf("a throttled create made %d sites", n)
	}
	// Another key has its own bucket.
	if r := h.do(t, "GET", "/api/v1/webhook-endpoints", keyOther, "", ""); r.Status != 200 {
		t.Errorf("another key = %d, want 200", r.Status)
	}
	// The 429 stored nothing under the idempotency key: the retry runs.
	clock.Advance(time.Second)
	r = h.do(t, "POST", "/api/v1/sites", keyAll, "site-1", body)
	if r.Status != 201 || r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry after Retry-After: %d replayed %q, want a fresh 201", r.Status, r.Header.Get("Idempotent-Replayed"))
	}

	var limited []RequestRecord
	for _, rec := range h.sim.Requests() {
		if rec.Fault == faultFixedRate {
			limited = append(limited, rec)
		}
	}
	if len(limited) != 1 || limited[0].KeyID != KeyID(keyAll) || limited[0].RetryAfter != "1" || limited[0].Status != 429 {
		t.Errorf("throttled requests in the log = %+v", limited)
	}
	st := h.sim.RequestStats()
	if st.Requests != 4 || st.ByStatus[429] != 1 || st.ByFault[faultFixedRate] != 1 || st.RateLimitedByKey[KeyID(keyAll)] != 1 {
		t.Errorf("stats = %+v", st)
	}
	got := h.admin(t, "GET", "/_sim/stats", "")
	var out struct{ Data RequestStats }
	mustDecode(t, got.Body, &out)
	if out.Data.ByStatus[429] != 1 || out.Data.Requests != 4 {
		t.Errorf("GET /_sim/stats = %s", got.Body)
	}
}

func TestFixedRateLimitAtRunTime(t *testing.T) {
	clock := &stepClock{now: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)}
	cfg := testConfig()
	cfg.Now = clock.Now
	h := newHarness(t, cfg)
	get := func() int { return h.do(t, "GET", "/api/v1/webhook-endpoints", keyAll, "", "").Status }
	for range 5 {
		if s := get(); s != 200 {
			t.Fatalf("without a limit: %d", s)
		}
	}

	if r := h.admin(t, "PUT", "/_sim/faults", `{"rate_limit_rps":0.5,"rate_limit_burst":2}`); r.Status != 200 {
		t.Fatalf("PUT faults = %d %s", r.Status, r.Body)
	}
	if f := h.sim.Faults(); f.RateLimitRPS != 0.5 || f.RateLimitBurst != 2 {
		t.Errorf("faults = %+v", f)
	}
	if a, b, c := get(), get(), h.do(t, "GET", "/api/v1/webhook-endpoints", keyAll, "", ""); a != 200 || b != 200 || c.Status != 429 || c.Header.Get("Retry-After") != "2" {
		t.Errorf("at 0.5/s burst 2: %d %d %d Retry-After %q, want 200 200 429 2", a, b, c.Status, c.Header.Get("Retry-After"))
	}

	if r := h.admin(t, "PUT", "/_sim/faults", `{"rate_limit_rps":0}`); r.Status != 200 {
		t.Fatalf("PUT faults = %d %s", r.Status, r.Body)
	}
	if s := get(); s != 200 {
		t.Errorf("after lifting the limit: %d", s)
	}

	for _, bad := range []string{`{"rate_limit_rps":-1}`, `{"rate_limit_rps":1,"rate_limit_burst":-2}`} {
		if r := h.admin(t, "PUT", "/_sim/faults", bad); r.Status != 422 {
			t.Errorf("PUT %s = %d, want 422", bad, r.Status)
		}
	}
}

// callUntilDone makes calls of ListWebhookEndpoints from callers goroutines
// until each has had perCaller successes. A caller that gets a 429 waits for
// its Retry-After, as a Temporal activity does with NextRetryDelay; with a
// Limiter the wait for the pause happens inside the client anyway.
func callUntilDone(t *testing.T, c *agentsite.Client, callers, perCaller int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			for done := 0; done < perCaller; {
				_, err := c.ListWebhookEndpoints(ctx)
				var apiErr *agentsite.APIError
				switch {
				case err == nil:
					done++
				case errors.As(err, &apiErr) && apiErr.Status == 429:
					timer := time.NewTimer(apiErr.RetryAfter)
					select {
					case <-timer.C:
					case <-ctx.Done():
						timer.Stop()
						errc <- ctx.Err()
						return
					}
				default:
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("a caller gave up: %v", err)
	}
}

// Against a service that throttles at a fixed rate, callers that share a
// Limiter stop sending while told to wait and get far fewer 429s than the
// same callers without one.
func TestLimiterAgainstFixedRateLimit(t *testing.T) {
	const (
		rps       = 20
		burst     = 10
		callers   = 20
		perCaller = 2
	)
	run := func(t *testing.T, opts ...agentsite.Option) (*harness, int) {
		cfg := testConfig()
		cfg.Faults = Faults{RateLimitRPS: rps, RateLimitBurst: burst}
		h := newHarness(t, cfg)
		c, err := agentsite.NewClient(h.srv.URL, keyAll, opts...)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		callUntilDone(t, c, callers, perCaller)
		st := h.sim.RequestStats()
		if got := st.ByStatus[200]; got != callers*perCaller {
			t.Errorf("%d successful calls, want %d", got, callers*perCaller)
		}
		t.Logf("%d calls in %s: %d answers, %d of them 429", callers*perCaller, time.Since(start).Round(time.Millisecond), st.Requests, st.ByStatus[429])
		return h, st.ByStatus[429]
	}

	var mu sync.Mutex
	results := map[string]int{}
	t.Run("load", func(t *testing.T) {
		t.Run("without limiter", func(t *testing.T) {
			t.Parallel()
			_, n := run(t)
			mu.Lock()
			results["without"] = n
			mu.Unlock()
		})
		t.Run("with limiter", func(t *testing.T) {
			t.Parallel()
			// Well above the service's rate, so that the limiter has to learn.
			lim, err := agentsite.NewLimiter(agentsite.WithMaxRate(100), agentsite.WithBurst(burst))
			if err != nil {
				t.Fatal(err)
			}
			h, n := run(t, agentsite.WithLimiter(lim))
			mu.Lock()
			results["with"] = n
			mu.Unlock()
			if n == 0 {
				t.Fatal("no 429 at all; the test's load does not reach the service's limit")
			}
			if lim.Rate() >= 100 {
				t.Errorf("rate %g after 429s, want it decreased", lim.Rate())
			}
			assertQuietAfterFirst429(t, h.sim.Requests(), KeyID(keyAll))
		})
	})
	if t.Failed() {
		return
	}
	// Typically 5 to 7 against 42 to 46; on a loaded machine (make test's
	// other packages beside this one) 12 against 33 was seen, the retries
	// without the limiter slowed and so fewer: half leaves room for that
	// and still fails a limiter that does not learn.
	with, without := results["with"], results["without"]
	if with*2 > without {
		t.Errorf("429s with the limiter %d, without %d; want at most half", with, without)
	}
}

// assertQuietAfterFirst429 checks that after the first 429 to key no request
// of that key reached the simulator before its Retry-After elapsed. Requests
// already in flight when the 429 was answered may still arrive just after
// it; inFlight bounds how long they may take.
func assertQuietAfterFirst429(t *testing.T, recs []RequestRecord, key string) {
	t.Helper()
	const inFlight = 250 * time.Millisecond
	first := -1 // the log is in order of answers; find the earliest request
	for i, r := range recs {
		if r.KeyID == key && r.Status == 429 && (first < 0 || r.At.Before(recs[first].At)) {
			first = i
		}
	}
	if first < 0 {
		t.Fatal("no 429 in the request log")
	}
	secs, err := strconv.Atoi(recs[first].RetryAfter)
	if err != nil || secs < 1 {
		t.Fatalf("first 429 has Retry-After %q", recs[first].RetryAfter)
	}
	from, until := recs[first].At.Add(inFlight), recs[first].At.Add(time.Duration(secs)*time.Second)
	var inside []string
	for _, r := range recs {
		if r.KeyID == key && r.At.After(from) && r.At.Before(until) {
			inside = append(inside, fmt.Sprintf("%d at +%s", r.Status, r.At.Sub(recs[first].At).Round(time.Millisecond)))
		}
	}
	if len(inside) > 0 {
		t.Errorf("requests during the %d s Retry-After of the first 429: %v", secs, inside)
	}
}
