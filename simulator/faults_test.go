package simulator

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
)

func TestErrorAndRateLimitFaults(t *testing.T) {
	h := newHarness(t, testConfig())
	body := `{"title":"A","slug":"acme","type":"business","template":"minimal"}`

	if err := h.sim.SetFaults(Faults{ErrorRate: 1, RetryAfter: Duration(3 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for i := range 20 {
		r := h.do(t, "POST", "/api/v1/sites", keyAll, "e"+strconv.Itoa(i), body)
		seen[r.Status] = true
		if r.Status == 503 && r.Header.Get("Retry-After") != "3" {
			t.Errorf("503 Retry-After = %q, want 3", r.Header.Get("Retry-After"))
		}
		if r.Status != 500 && r.Status != 503 {
			t.Fatalf("status %d with error rate 1", r.Status)
		}
	}
	if !seen[500] || !seen[503] {
		t.Errorf("statuses seen %v, want both 500 and 503", seen)
	}
	if n := len(h.sim.sites); n != 0 {
		t.Errorf("%d sites created through injected errors", n)
	}

	if err := h.sim.SetFaults(Faults{RateLimitRate: 1, RetryAfter: Duration(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	_, err := h.client.CreateSite(t.Context(), "rl", agentsite.NewSite{Title: "A", Slug: "acme", Type: "business", Template: "minimal"})
	var apiErr *agentsite.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 429 || apiErr.RetryAfter != 2*time.Second || apiErr.Code != "rate_limited" {
		t.Fatalf("rate limited: %v", err)
	}
	// The 429 was not stored: the same key succeeds once the limit lifts.
	if err := h.sim.SetFaults(Faults{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.CreateSite(t.Context(), "rl", agentsite.NewSite{Title: "A", Slug: "acme", Type: "business", Template: "minimal"}); err != nil {
		t.Fatalf("after the limit lifted: %v", err)
	}
}

func TestLatencyFault(t *testing.T) {
	cfg := testConfig()
	cfg.Faults.Latency = Duration(80 * time.Millisecond)
	h := newHarness(t, cfg)
	start := time.Now()
	h.do(t, "GET", "/api/v1/webhook-endpoints", keyAll, "", "")
	if took := time.Since(start); took < 80*time.Millisecond {
		t.Errorf("request took %s with 80 ms latency", took)
	}
}

func TestFaultsAreSeeded(t *testing.T) {
	run := func(seed uint64) string {
		cfg := testConfig()
		cfg.Seed = seed
		cfg.Faults = Faults{ErrorRate: 0.3, RateLimitRate: 0.2}
		h := newHarness(t, cfg)
		out := ""
		for range 40 {
			out += fmt.Sprint(h.do(t, "GET", "/api/v1/webhook-endpoints", keyAll, "", "").Status, " ")
		}
		return out
	}
	a, b, c := run(11), run(11), run(12)
	if a != b {
		t.Errorf("the same seed gave different faults:\n%s\n%s", a, b)
	}
	if a == c {
		t.Errorf("different seeds gave the same faults: %s", a)
	}
}

func TestFaultsAtRunTime(t *testing.T) {
	h := newHarness(t, testConfig())
	r := h.admin(t, "PUT", "/_sim/faults", `{"error_rate":0.5,"retry_after":"4s","reorder_window":"1s"}`)
	if r.Status != 200 {
		t.Fatalf("PUT faults = %d %s", r.Status, r.Body)
	}
	if f := h.sim.Faults(); f.ErrorRate != 0.5 || f.RetryAfter != Duration(4*time.Second) || f.ReorderWindow != Duration(time.Second) {
		t.Errorf("faults = %+v", f)
	}
	got := h.admin(t, "GET", "/_sim/faults", "")
	var out struct{ Data Faults }
	mustDecode(t, got.Body, &out)
	if out.Data != h.sim.Faults() {
		t.Errorf("GET faults = %+v", out.Data)
	}
	if r := h.admin(t, "PUT", "/_sim/faults", `{"error_rate":2}`); r.Status != 422 {
		t.Errorf("an invalid rate = %d", r.Status)
	}
	if r := h.admin(t, "PUT", "/_sim/faults", `{"eror_rate":0.1}`); r.Status != 400 {
		t.Errorf("a misspelled fault = %d", r.Status)
	}
}

func TestDuplicateDeliveries(t *testing.T) {
	cfg := testConfig()
	cfg.Faults.DuplicateRate = 1
	h := newHarness(t, cfg)
	rc := newReceiver(t)
	h.register(t, rc, "/hook", "lead.created")
	id := h.createSite(t, "acme")
	if _, err := h.sim.CreateLeads(id, 5); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ten deliveries", func() bool { return len(rc.deliveries()) == 10 })
	perID := map[string]int{}
	for _, d := range rc.deliveries() {
		perID[d.Envelope.ID]++
	}
	if len(perID) != 5 {
		t.Errorf("%d distinct event ids, want 5", len(perID))
	}
	for id, n := range perID {
		if n != 2 {
			t.Errorf("%s delivered %d times, want 2", id, n)
		}
	}
}

func TestReorderedDeliveries(t *testing.T) {
	cfg := testConfig()
	cfg.TimeScale = 1
	cfg.Faults.ReorderWindow = Duration(200 * time.Millisecond)
	h := newHarness(t, cfg)
	rc := newReceiver(t)
	h.register(t, rc, "/hook", "lead.created")
	id := h.createSite(t, "acme")
	if _, err := h.sim.CreateLeads(id, 20); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "twenty deliveries", func() bool { return len(rc.deliveries()) == 20 })
	emitted := map[string]int{}
	for i, e := range h.sim.Events() {
		emitted[e.ID] = i
	}
	inversions := 0
	got := rc.deliveries()
	for i := 1; i < len(got); i++ {
		if emitted[got[i].Envelope.ID] < emitted[got[i-1].Envelope.ID] {
			inversions++
		}
	}
	if inversions == 0 {
		t.Errorf("twenty events arrived in emission order despite a reorder window")
	}
}

func TestDelayedDeliveries(t *testing.T) {
	cfg := testConfig()
	cfg.TimeScale = 1
	cfg.Faults.DelayRate = 1
	cfg.Faults.Delay = Duration(150 * time.Millisecond)
	h := newHarness(t, cfg)
	rc := newReceiver(t)
	h.register(t, rc, "/hook", "lead.created")
	id := h.createSite(t, "acme")
	start := time.Now()
	if _, err := h.sim.CreateLeads(id, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the delayed delivery", func() bool { return len(rc.deliveries()) == 1 })
	if took := rc.deliveries()[0].At.Sub(start); took < 150*time.Millisecond {
		t.Errorf("delivery came after %s, want at least 150 ms", took)
	}
	if got := rc.deliveries()[0].Envelope.Type; got != webhook.LeadCreated {
		t.Errorf("type = %s", got)
	}
}

func TestDropAfterApplyIsAmbiguous(t *testing.T) {
	h := newHarness(t, testConfig())
	if err := h.sim.SetFaults(Faults{DropRate: 1}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "POST", h.srv.URL+"/api/v1/sites", nil)
	req.Header.Set("Authorization", "Bearer "+keyAll)
	req.Header.Set("Idempotency-Key", "amb")
	req.Body = http.NoBody
	// An empty body is refused (400) and stored; the connection still drops.
	if _, err := h.srv.Client().Do(req); err == nil {
		t.Fatalf("the connection was not dropped")
	}
	recs := h.sim.Requests()
	if len(recs) != 1 || recs[0].Fault != faultDrop {
		t.Errorf("requests = %+v", recs)
	}
}

// TestBrokenAnswerFault answers a 2xx that breaks the contract before
// anything is applied: the client reports it as a *ContractError, nothing
// is created, and the record names the fault.
func TestBrokenAnswerFault(t *testing.T) {
	h := newHarness(t, testConfig())
	if err := h.sim.SetFaults(Faults{BrokenAnswerRate: 1}); err != nil {
		t.Fatal(err)
	}
	r := h.do(t, "POST", "/api/v1/sites", keyAll, "broken", `{"title":"A","slug":"acme","type":"business","template":"minimal"}`)
	if r.Status != http.StatusOK || string(r.Body) != `{"data":{}}` {
		t.Fatalf("answer = %d %s, want 200 {\"data\":{}}", r.Status, r.Body)
	}
	_, err := h.client.CreateSite(t.Context(), "broken-2", agentsite.NewSite{Title: "A", Slug: "acme", Type: "business", Template: "minimal"})
	var ce *agentsite.ContractError
	if !errors.As(err, &ce) {
		t.Fatalf("CreateSite error = %v (%T), want a *agentsite.ContractError", err, err)
	}
	if n := len(h.sim.sites); n != 0 {
		t.Errorf("%d sites created through broken answers, want 0", n)
	}
	for _, rec := range h.sim.Requests() {
		if rec.Fault != faultBroken {
			t.Errorf("request %s %s recorded fault %q, want %q", rec.Method, rec.Path, rec.Fault, faultBroken)
		}
	}
	if err := h.sim.SetFaults(Faults{BrokenAnswerRate: 1.5}); err == nil {
		t.Error("SetFaults accepted broken_answer_rate 1.5")
	}
	// Nothing was stored under the key: the same key succeeds once the
	// fault lifts.
	if err := h.sim.SetFaults(Faults{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.CreateSite(t.Context(), "broken-2", agentsite.NewSite{Title: "A", Slug: "acme", Type: "business", Template: "minimal"}); err != nil {
		t.Fatalf("after the fault lifted: %v", err)
	}
}
