package simulator

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/internal/siteopstest"
)

func TestDeliveryIsSignedAndShaped(t *testing.T) {
	h := newHarness(t, testConfig())
	rc := newReceiver(t)
	h.register(t, rc, "/hook", "lead.created", "site.published")
	id := h.createSite(t, "acme")
	if _, err := h.sim.CreateLeads(id, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "one delivery", func() bool { return len(rc.deliveries()) == 1 })
	if errs := rc.errors(); len(errs) > 0 {
		t.Fatalf("verification failed: %v", errs)
	}
	d := rc.deliveries()[0]
	for header, want := range map[string]string{
		"Content-Type":   "application/json",
		"User-Agent":     "Service-Webhooks/1.0",
		"Svc-Event-Type": "lead.created",
		"Svc-Event-Id":   d.Envelope.ID,
	} {
		if got := d.Header.Get(header); got != want {
			t.Errorf("%s = %q, want %q", header, got, want)
		}
	}
	if !regexp.MustCompile(`^t=\d+,v1=[0-9a-f]{64}$`).MatchString(d.Header.Get("svc-signature")) {
		t.Errorf("svc-signature = %q", d.Header.Get("svc-signature"))
	}
	if !strings.HasPrefix(d.Envelope.ID, "evt_") || d.Envelope.Type != webhook.LeadCreated {
		t.Errorf("envelope = %+v", d.Envelope)
	}
	var raw map[string]json.RawMessage
	mustDecode(t, d.Body, &raw)
	var created string
	mustDecode(t, raw["created_at"], &created)
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(created) {
		t.Errorf("created_at = %q, want ISO 8601 UTC with milliseconds", created)
	}
	var data webhook.LeadCreatedData
	mustDecode(t, d.Envelope.Data, &data)
	if data.SiteID != id || data.LeadID != "lead_1" {
		t.Errorf("data = %+v", data)
	}
	// Only subscribed types are delivered: knowledge.ready is not.
	if _, err := h.client.Publish(t.Context(), "p", id, true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the site.published delivery", func() bool { return len(rc.deliveries()) == 2 })
	h.do(t, "POST", "/api/v1/sites/"+id+"/knowledge", keyAll, "kn", `{"name":"n","text":"hello world"}`)
	waitFor(t, "knowledge.ready to be emitted", func() bool { return countType(h.sim.Events(), webhook.KnowledgeReady) == 1 })
	h.sim.Close() // waits for any delivery in flight
	if n := len(rc.deliveries()); n != 2 {
		t.Errorf("receiver got %d deliveries, want 2 (knowledge.ready is not subscribed)", n)
	}
}

func countType(events []webhook.Envelope, t webhook.EventType) int {
	n := 0
	for _, e := range events {
		if e.Type == t {
			n++
		}
	}
	return n
}

func TestDeliveryRetriesWithBackoff(t *testing.T) {
	cfg := testConfig()
	cfg.TimeScale = 100 // backoffs of 20 ms, 40 ms, ...
	h := newHarness(t, cfg)
	rc := newReceiver(t)
	rc.setStatus(func(n int) int {
		if n < 4 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	ep := h.register(t, rc, "/hook", "lead.created")
	id := h.createSite(t, "acme")
	if _, err := h.sim.CreateLeads(id, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "four attempts", func() bool { return len(rc.deliveries()) == 4 })
	got := rc.deliveries()
	for i := 1; i < len(got); i++ {
		if got[i].Envelope.ID != got[0].Envelope.ID || !bytes.Equal(got[i].Body, got[0].Body) {
			t.Errorf("attempt %d carried another event or body", i+1)
		}
		gap := got[i].At.Sub(got[i-1].At)
		// 2 s × 2^(i-1) ± 25 %, divided by 100.
		nominal := time.Duration(float64(2*time.Second<<(i-1)) / 100)
		if gap < nominal*3/4-5*time.Millisecond || gap > nominal*5/4+siteopstest.Bound(200*time.Millisecond) {
			t.Errorf("gap before attempt %d = %s, want about %s", i+1, gap, nominal)
		}
	}
	waitFor(t, "the success to be recorded", func() bool {
		ds := h.sim.Deliveries()
		return len(ds) == 4 && ds[3].Outcome == "succeeded"
	})
	list := h.do(t, "GET", "/api/v1/webhook-endpoints", keyAll, "", "")
	if !bytes.Contains(list.Body, []byte(`"id":"`+ep+`"`)) || !bytes.Contains(list.Body, []byte(`"outcome":"succeeded"`)) ||
		!bytes.Contains(list.Body, []byte(`"last_error":"receiver answered 500"`)) {
		t.Errorf("endpoint list = %s", list.Body)
	}
	if bytes.Contains(list.Body, []byte("whsec_")) || bytes.Contains(list.Body, []byte(`"secret"`)) {
		t.Errorf("the endpoint list shows a secret: %s", list.Body)
	}
}

func TestDeliveryGivesUpAfterEightAttempts(t *testing.T) {
	cfg := testConfig()
	cfg.TimeScale = 10_000
	h := newHarness(t, cfg)
	rc := newReceiver(t)
	rc.setStatus(func(int) int { return http.StatusServiceUnavailable })
	h.register(t, rc, "/hook", "lead.created")
	id := h.createSite(t, "acme")
	if _, err := h.sim.CreateLeads(id, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the delivery to be abandoned", func() bool {
		ds := h.sim.Deliveries()
		return len(ds) > 0 && ds[len(ds)-1].Outcome == "abandoned"
	})
	h.sim.Close()
	if n := len(rc.deliveries()); n != MaxAttempts {
		t.Errorf("%d attempts, want %d", n, MaxAttempts)
	}
}

func TestBackoffIsCappedAndJittered(t *testing.T) {
	s, err := New(Config{Keys: map[string][]string{"k": {"*"}}, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for n := 1; n <= 40; n++ {
		d := s.backoff(n)
		nominal := min(FirstBackoff<<(n-1), MaxBackoff)
		if n > 20 {
			nominal = MaxBackoff
		}
		if d < nominal*3/4 || d > min(nominal*5/4, MaxBackoff) {
			t.Errorf("backoff(%d) = %s, nominal %s", n, d, nominal)
		}
	}
	distinct := map[time.Duration]bool{}
	for range 10 {
		distinct[s.backoff(1)] = true
	}
	if len(distinct) < 2 {
		t.Errorf("ten draws of backoff(1) gave %d distinct values: no jitter", len(distinct))
	}
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	var followed atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		followed.Add(1)
	}))
	defer elsewhere.Close()
	cfg := testConfig()
	cfg.TimeScale = 10_000
	h := newHarness(t, cfg)
	redirector := newReceiver(t)
	redirector.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL, http.StatusTemporaryRedirect)
	})
	h.register(t, redirector, "/old", "lead.created")
	id := h.createSite(t, "acme")
	if _, err := h.sim.CreateLeads(id, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a failed attempt", func() bool { return len(h.sim.Deliveries()) >= 2 })
	d := h.sim.Deliveries()[0]
	if d.Outcome != "failed" || d.StatusCode != http.StatusTemporaryRedirect || !strings.Contains(d.Error, "redirect") {
		t.Errorf("delivery = %+v", d)
	}
	h.sim.Close()
	if n := followed.Load(); n != 0 {
		t.Errorf("the redirect target got %d requests", n)
	}
}

func TestDeliveryTimeout(t *testing.T) {
	cfg := testConfig()
	cfg.DeliveryTimeout = 50 * time.Millisecond
	cfg.TimeScale = 10_000
	h := newHarness(t, cfg)
	release := make(chan struct{})
	slow := newReceiver(t)
	slow.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	h.register(t, slow, "/slow", "lead.created")
	id := h.createSite(t, "acme")
	if _, err := h.sim.CreateLeads(id, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a timed-out attempt", func() bool { return len(h.sim.Deliveries()) >= 1 })
	if d := h.sim.Deliveries()[0]; d.Outcome != "failed" || !strings.Contains(d.Error, "Timeout") && !strings.Contains(d.Error, "deadline") {
		t.Errorf("delivery = %+v, want a timeout failure", d)
	}
}

func TestDNSRebindingFailsTheDelivery(t *testing.T) {
	cfg := testConfig()
	cfg.AllowLoopbackReceivers = false
	cfg.TimeScale = 10_000
	h := newHarness(t, cfg)
	h.resolver.set("rebind.example.org", "93.184.215.14")
	body := `{"url":"https://rebind.example.org/hook","events":["lead.created"]}`
	if r := h.do(t, "POST", "/api/v1/webhook-endpoints", keyAll, "rebind", body); r.Status != 201 {
		t.Fatalf("registration = %d %s", r.Status, r.Body)
	}
	h.resolver.set("rebind.example.org", "127.0.0.1")
	id := h.createSite(t, "acme")
	if _, err := h.sim.CreateLeads(id, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a refused attempt", func() bool { return len(h.sim.Deliveries()) >= 1 })
	if d := h.sim.Deliveries()[0]; d.Outcome != "failed" || !strings.Contains(d.Error, "not a public address") {
		t.Errorf("delivery = %+v", d)
	}
	// Without test mode, loopback receivers are refused at registration.
	if r := h.do(t, "POST", "/api/v1/webhook-endpoints", keyAll, "lo", `{"url":"http://127.0.0.1:9/x","events":["lead.created"]}`); r.Status != 422 {
		t.Errorf("loopback registration without test mode = %d", r.Status)
	}
}

func TestDeletingAnEndpointStopsItsDeliveries(t *testing.T) {
	cfg := testConfig()
	cfg.TimeScale = 20 // backoffs of 100 ms, 200 ms, ...
	h := newHarness(t, cfg)
	rc := newReceiver(t)
	rc.setStatus(func(int) int { return http.StatusInternalServerError })
	ep := h.register(t, rc, "/hook", "lead.created")
	id := h.createSite(t, "acme")
	if _, err := h.sim.CreateLeads(id, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first attempt", func() bool { return len(rc.deliveries()) >= 1 })
	if err := h.client.DeleteWebhookEndpoint(t.Context(), "del", ep); err != nil {
		t.Fatal(err)
	}
	h.sim.Close()
	if n := len(rc.deliveries()); n > 2 {
		t.Errorf("%d attempts after deletion", n)
	}
}

func TestKnowledgeConversationsAndBroadcastsEmit(t *testing.T) {
	h := newHarness(t, testConfig())
	rc := newReceiver(t)
	var all []string
	for _, et := range webhook.EventTypes() {
		all = append(all, string(et))
	}
	h.register(t, rc, "/all", all...)
	id := h.createSite(t, "acme")
	if r := h.do(t, "POST", "/api/v1/sites/"+id+"/knowledge", keyAll, "kn", `{"name":"n","text":"hello world"}`); r.Status != 201 {
		t.Fatal(r.Status)
	}
	if r := h.admin(t, "POST", "/_sim/sites/"+id+"/conversations", `{"messages":2}`); r.Status != 201 {
		t.Fatalf("conversation: %d %s", r.Status, r.Body)
	}
	if r := h.admin(t, "POST", "/_sim/sites/"+id+"/broadcasts", ``); r.Status != 201 {
		t.Fatalf("broadcast: %d %s", r.Status, r.Body)
	}
	if _, err := h.client.Publish(t.Context(), "p1", id, true); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.Publish(t.Context(), "p2", id, false); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sim.CreateLeads(id, 1); err != nil {
		t.Fatal(err)
	}
	want := map[webhook.EventType]int{
		webhook.KnowledgeReady: 1, webhook.ConversationStarted: 1, webhook.ConversationMessageCreated: 2,
		webhook.BroadcastSent: 1, webhook.SitePublished: 1, webhook.SiteUnpublished: 1, webhook.LeadCreated: 1,
	}
	waitFor(t, "eight deliveries", func() bool { return len(rc.deliveries()) == 8 })
	got := map[webhook.EventType]int{}
	for _, d := range rc.deliveries() {
		got[d.Envelope.Type]++
	}
	for et, n := range want {
		if got[et] != n {
			t.Errorf("%s delivered %d times, want %d", et, got[et], n)
		}
	}
	if countType(h.sim.Events(), webhook.DomainActivated) != 0 || got[webhook.DomainActivated] != 0 {
		t.Errorf("domain.activated was emitted")
	}
	if errs := rc.errors(); len(errs) > 0 {
		t.Errorf("verification failed: %v", errs)
	}
	h.sim.mu.Lock()
	status := h.sim.sites[id].knowledge[0].Status
	h.sim.mu.Unlock()
	if status != "ready" {
		t.Errorf("knowledge status = %q after knowledge.ready", status)
	}
}

// TestDeliveriesInFlightAreBounded sends a burst of 40 events to a receiver
// that holds every request: at most MaxConcurrentDeliveries are in flight,
// the rest wait their turn untimed and all succeed once it answers.
func TestDeliveriesInFlightAreBounded(t *testing.T) {
	cfg := testConfig()
	cfg.MaxConcurrentDeliveries = 4
	cfg.DeliveryTimeout = 5 * time.Second
	h := newHarness(t, cfg)
	var mu sync.Mutex
	inFlight, most := 0, 0
	release := make(chan struct{})
	slow := newReceiver(t)
	slow.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
	})
	h.register(t, slow, "/slow", "lead.created")
	id := h.createSite(t, "acme")
	if _, err := h.sim.CreateLeads(id, 40); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "four requests in flight", func() bool { mu.Lock(); defer mu.Unlock(); return inFlight == 4 })
	time.Sleep(100 * time.Millisecond) // room for a fifth to arrive, were it sent
	close(release)
	waitFor(t, "every delivery to succeed", func() bool {
		ok := 0
		for _, d := range h.sim.Deliveries() {
			if d.Outcome == "succeeded" {
				ok++
			}
		}
		return ok == 40
	})
	if most != 4 {
		t.Errorf("%d deliveries were in flight at once, want at most 4", most)
	}
	for _, d := range h.sim.Deliveries() {
		if d.Outcome != "succeeded" {
			t.Errorf("delivery %+v: every queued delivery should succeed on its first attempt", d)
		}
	}
}
