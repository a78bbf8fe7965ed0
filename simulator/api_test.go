package simulator

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
)

// TestOnboardingThroughTheClient drives every endpoint the client has.
func TestOnboardingThroughTheClient(t *testing.T) {
	h := newHarness(t, testConfig())
	ctx := t.Context()
	c := h.client

	cs, err := c.CreateSite(ctx, "k/create", agentsite.NewSite{
		Title: "Acme", Slug: "acme", Type: "business", Template: "minimal",
		Content: agentsite.SiteContent{Headline: "H", Subheadline: "S", About: "A"}, PersonaMode: "assistant", Languages: []string{"en"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if cs.Site.ID == "" || cs.Site.Status != agentsite.SiteDraft || cs.Location != "/api/v1/sites/"+cs.Site.ID || cs.Response.Status != 201 || cs.Response.RequestID == "" {
		t.Fatalf("created = %+v %+v", cs.Site, cs.Response)
	}
	id := cs.Site.ID

	off := false
	agent, err := c.UpdateAgent(ctx, "k/agent", id, agentsite.AgentUpdate{
		DisplayName: new("Ava"), Instructions: new("Answer from the sources."), EmbedEnabled: &off,
		AllowedOrigins: []string{"https://acme.example", "https://www.acme.example"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if agent.DisplayName != "Ava" || agent.EmbedEnabled == nil || *agent.EmbedEnabled || len(agent.AllowedOrigins) != 2 || agent.PersonaMode != "assistant" {
		t.Errorf("agent = %+v", agent)
	}
	kn, err := c.AddKnowledge(ctx, "k/kn", id, agentsite.KnowledgeSource{Name: "About", Text: "Acme has made anvils since 1949."})
	if err != nil || kn.ID == "" || kn.Status != "processing" {
		t.Fatalf("knowledge = %+v, %v", kn, err)
	}
	f, err := c.AddFAQ(ctx, "k/faq", id, agentsite.FAQ{Question: "Do you ship?", Answer: "Worldwide.", Approved: true})
	if err != nil || f.ID == "" || !f.Approved {
		t.Fatalf("faq = %+v, %v", f, err)
	}
	pub, err := c.Publish(ctx, "k/pub", id, true)
	if err != nil || pub.ID != id || pub.Status != agentsite.SitePublished {
		t.Fatalf("publish = %+v, %v", pub, err)
	}
	got := h.do(t, "GET", "/api/v1/sites/"+id, keyRead, "", "")
	if !bytes.Contains(got.Body, []byte(`"status":"published"`)) {
		t.Errorf("GET site = %s", got.Body)
	}
	unpub, err := c.Publish(ctx, "k/unpub", id, false)
	if err != nil || unpub.Status != agentsite.SiteDraft {
		t.Fatalf("unpublish = %+v, %v", unpub, err)
	}
}

func TestPublishEmitsOnlyOnChange(t *testing.T) {
	h := newHarness(t, testConfig())
	id := h.createSite(t, "acme")
	for i, published := range []bool{true, true, false, false, true} {
		if _, err := h.client.Publish(t.Context(), "pub/"+string(rune('a'+i)), id, published); err != nil {
			t.Fatal(err)
		}
	}
	var types []string
	for _, e := range h.sim.Events() {
		types = append(types, string(e.Type))
	}
	want := "site.published,site.unpublished,site.published"
	if strings.Join(types, ",") != want {
		t.Errorf("events = %v, want %s", types, want)
	}
}

func TestIdempotency(t *testing.T) {
	body := `{"title":"Acme","slug":"acme","type":"business","template":"minimal"}`

	t.Run("a retry replays the stored answer", func(t *testing.T) {
		h := newHarness(t, testConfig())
		first := h.do(t, "POST", "/api/v1/sites", keyAll, "key-1", body)
		// Same payload with other whitespace is the same request.
		again := h.do(t, "POST", "/api/v1/sites", keyAll, "key-1", "{ \"title\": \"Acme\", \"slug\": \"acme\", \"type\": \"business\", \"template\": \"minimal\" }")
		if first.Status != 201 || again.Status != 201 || !bytes.Equal(first.Body, again.Body) {
			t.Fatalf("first %d %s, replay %d %s", first.Status, first.Body, again.Status, again.Body)
		}
		if again.Header.Get("Idempotent-Replayed") != "true" || first.Header.Get("Idempotent-Replayed") != "" {
			t.Errorf("Idempotent-Replayed: first %q, replay %q", first.Header.Get("Idempotent-Replayed"), again.Header.Get("Idempotent-Replayed"))
		}
		if again.Header.Get("Location") != first.Header.Get("Location") {
			t.Errorf("replayed Location %q, want %q", again.Header.Get("Location"), first.Header.Get("Location"))
		}
		if n := len(h.sim.sites); n != 1 {
			t.Errorf("%d sites, want 1", n)
		}
	})

	t.Run("an error answer is replayed too", func(t *testing.T) {
		h := newHarness(t, testConfig())
		bad := `{"title":"x","slug":"NOPE","type":"business","template":"minimal"}`
		a := h.do(t, "POST", "/api/v1/sites", keyAll, "key-e", bad)
		b := h.do(t, "POST", "/api/v1/sites", keyAll, "key-e", bad)
		if a.Status != 422 || b.Status != 422 || b.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("statuses %d, %d replayed %q", a.Status, b.Status, b.Header.Get("Idempotent-Replayed"))
		}
	})

	t.Run("the same key with another payload is refused", func(t *testing.T) {
		h := newHarness(t, testConfig())
		h.do(t, "POST", "/api/v1/sites", keyAll, "key-2", body)
		other := h.do(t, "POST", "/api/v1/sites", keyAll, "key-2", strings.Replace(body, "acme", "acme-2", 1))
		if code, _ := other.errorCode(); other.Status != 422 || code != "idempotency_key_reused" {
			t.Errorf("reuse = %d %s", other.Status, other.Body)
		}
		path := h.do(t, "POST", "/api/v1/sites/site_1/publish", keyAll, "key-2", `{"published":true}`)
		if path.Status != 422 {
			t.Errorf("the same key on another route = %d, want 422", path.Status)
		}
	})

	t.Run("keys are scoped per API key", func(t *testing.T) {
		h := newHarness(t, testConfig())
		a := h.do(t, "POST", "/api/v1/sites", keyAll, "shared", body)
		b := h.do(t, "POST", "/api/v1/sites", keyOther, "shared", strings.Replace(body, "acme", "acme-b", 1))
		if a.Status != 201 || b.Status != 201 || b.Header.Get("Idempotent-Replayed") != "" {
			t.Errorf("another API key's request under the same key: %d then %d %s", a.Status, b.Status, b.Body)
		}
	})

	t.Run("keys expire after the retention", func(t *testing.T) {
		var mu sync.Mutex
		now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
		cfg := testConfig()
		cfg.IdempotencyRetention = time.Hour
		cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		h := newHarness(t, cfg)
		h.do(t, "POST", "/api/v1/sites/site_9/publish", keyAll, "old", `{"published":true}`) // 404, stored
		mu.Lock()
		now = now.Add(59 * time.Minute)
		mu.Unlock()
		if r := h.do(t, "POST", "/api/v1/sites", keyAll, "old", body); r.Status != 422 {
			t.Fatalf("within the retention another payload = %d, want 422", r.Status)
		}
		mu.Lock()
		now = now.Add(2 * time.Minute)
		mu.Unlock()
		if r := h.do(t, "POST", "/api/v1/sites", keyAll, "old", body); r.Status != 201 {
			t.Fatalf("after the retention = %d %s, want 201", r.Status, r.Body)
		}
	})

	t.Run("a create forgets the expired keys and keeps the rest", func(t *testing.T) {
		var mu sync.Mutex
		now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
		advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
		cfg := testConfig()
		cfg.IdempotencyRetention = time.Hour
		cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		h := newHarness(t, cfg)
		held := func() (int, int) {
			h.sim.mu.Lock()
			defer h.sim.mu.Unlock()
			return len(h.sim.idem), len(h.sim.idemOrder)
		}
		for i := range 3 {
			h.do(t, "POST", "/api/v1/sites/site_9/publish", keyAll, fmt.Sprintf("old-%d", i), `{"published":true}`) // 404, kept
		}
		advance(30 * time.Minute)
		h.do(t, "POST", "/api/v1/sites/site_9/publish", keyAll, "newer", `{"published":true}`)
		advance(31 * time.Minute) // the old keys' hour is up, not the newer one's
		// An expired key claimed again is a new claim, and is kept.
		h.do(t, "POST", "/api/v1/sites/site_9/publish", keyAll, "old-0", `{"published":true}`)
		if r := h.do(t, "POST", "/api/v1/sites", keyAll, "create", body); r.Status != 201 {
			t.Fatalf("create = %d %s", r.Status, r.Body)
		}
		if keys, claims := held(); keys != 3 || claims != 3 {
			t.Errorf("after the create: %d keys and %d claims held, want 3 and 3 (newer, old-0 again, create)", keys, claims)
		}
		if r := h.do(t, "POST", "/api/v1/sites/site_9/publish", keyAll, "newer", `{"published":false}`); r.Status != 422 {
			t.Errorf("the newer key with another payload = %d, want 422: it is within its retention", r.Status)
		}
		advance(2 * time.Hour)
		if r := h.do(t, "POST", "/api/v1/sites", keyAll, "create-2", strings.Replace(body, "acme", "acme-2", 1)); r.Status != 201 {
			t.Fatalf("second create = %d %s", r.Status, r.Body)
		}
		if keys, claims := held(); keys != 1 || claims != 1 {
			t.Errorf("two hours on: %d keys and %d claims held, want 1 and 1 (the create's own)", keys, claims)
		}
	})

	t.Run("a key in flight answers 409", func(t *testing.T) {
		cfg := testConfig()
		cfg.Faults.Latency = Duration(300 * time.Millisecond)
		h := newHarness(t, cfg)
		done := make(chan rawResponse)
		go func() { done <- h.do(t, "POST", "/api/v1/sites", keyAll, "slow", body) }()
		waitFor(t, "the first request to claim its key", func() bool {
			h.sim.mu.Lock()
			defer h.sim.mu.Unlock()
			return len(h.sim.idem) == 1
		})
		second := h.do(t, "POST", "/api/v1/sites", keyAll, "slow", body)
		if code, _ := second.errorCode(); second.Status != 409 || code != "idempotency_in_flight" || second.Header.Get("Retry-After") == "" {
			t.Errorf("second = %d %s", second.Status, second.Body)
		}
		if first := <-done; first.Status != 201 {
			t.Errorf("first = %d", first.Status)
		}
		if third := h.do(t, "POST", "/api/v1/sites", keyAll, "slow", body); third.Status != 201 || third.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("after completion = %d replayed %q", third.Status, third.Header.Get("Idempotent-Replayed"))
		}
	})

	t.Run("eight concurrent identical requests create one site", func(t *testing.T) {
		cfg := testConfig()
		cfg.Faults.Latency = Duration(20 * time.Millisecond)
		h := newHarness(t, cfg)
		var wg sync.WaitGroup
		statuses := make([]int, 8)
		for i := range 8 {
			wg.Go(func() { statuses[i] = h.do(t, "POST", "/api/v1/sites", keyAll, "burst", body).Status })
		}
		wg.Wait()
		created := 0
		for _, s := range statuses {
			switch s {
			case 201:
				created++
			case 409:
			default:
				t.Errorf("unexpected status %d", s)
			}
		}
		h.sim.mu.Lock()
		n := len(h.sim.sites)
		h.sim.mu.Unlock()
		if n != 1 || created < 1 {
			t.Errorf("%d sites and %d 201 answers (%v), want exactly one site", n, created, statuses)
		}
	})

	t.Run("the client's retry after a dropped connection finds one site", func(t *testing.T) {
		h := newHarness(t, testConfig())
		if err := h.sim.SetFaults(Faults{DropRate: 1}); err != nil {
			t.Fatal(err)
		}
		_, err := h.client.CreateSite(t.Context(), "dropped", agentsite.NewSite{Title: "A", Slug: "acme", Type: "business", Template: "minimal"})
		var te *agentsite.TransportError
		if !errors.As(err, &te) {
			t.Fatalf("first attempt: error = %v, want a TransportError", err)
		}
		if err := h.sim.SetFaults(Faults{}); err != nil {
			t.Fatal(err)
		}
		cs, err := h.client.CreateSite(t.Context(), "dropped", agentsite.NewSite{Title: "A", Slug: "acme", Type: "business", Template: "minimal"})
		if err != nil || cs.Site.ID != "site_1" || cs.Response.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry = %+v, %v", cs, err)
		}
		h.sim.mu.Lock()
		n := len(h.sim.sites)
		h.sim.mu.Unlock()
		if n != 1 {
			t.Errorf("%d sites, want 1", n)
		}
	})
}

func TestLeads(t *testing.T) {
	h := newHarness(t, testConfig())
	id := h.createSite(t, "acme")
	other := h.createSite(t, "other")
	resp := h.admin(t, "POST", "/_sim/sites/"+id+"/leads", `{"count":120}`)
	if resp.Status != 201 {
		t.Fatalf("creating leads: %d %s", resp.Status, resp.Body)
	}

	t.Run("pages follow the cursor, oldest first", func(t *testing.T) {
		var ids []string
		pages := 0
		for page, err := range h.client.LeadPages(t.Context(), id, agentsite.ListLeadsOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, l := range page.Leads {
				ids = append(ids, l.ID)
				if l.SiteID != id || !bytes.Contains(l.Raw, []byte(`"email":"`)) || !bytes.Contains(l.Raw, []byte(`"created_at":"`)) {
					t.Errorf("lead record %s", l.Raw)
				}
			}
		}
		if pages != 3 || len(ids) != 120 || ids[0] != "lead_1" || ids[119] != "lead_120" {
			t.Errorf("%d pages of default size, %d leads, first %v", pages, len(ids), ids[:1])
		}
		seen := map[string]bool{}
		for _, l := range ids {
			if seen[l] {
				t.Errorf("lead %s listed twice", l)
			}
			seen[l] = true
		}
	})

	t.Run("cursors carry characters that need URL encoding", func(t *testing.T) {
		special := 0
		total := 0
		var cur *agentsite.Cursor
		for {
			page, err := h.client.ListLeads(t.Context(), id, agentsite.ListLeadsOptions{Limit: 1, Cursor: cur})
			if err != nil {
				t.Fatal(err)
			}
			total += len(page.Leads)
			if page.Next == nil {
				break
			}
			b, _ := page.Next.MarshalJSON()
			if bytes.ContainsAny(b, "+/=") {
				special++
			}
			cur = page.Next
		}
		if total != 120 || special == 0 {
			t.Errorf("read %d leads one by one; %d cursors held + / or =", total, special)
		}
	})

	t.Run("a cursor stays valid as the collection grows", func(t *testing.T) {
		page, err := h.client.ListLeads(t.Context(), other, agentsite.ListLeadsOptions{})
		if err != nil || len(page.Leads) != 0 || page.Next != nil {
			t.Fatalf("empty collection = %+v, %v", page, err)
		}
		if _, err := h.sim.CreateLeads(other, 3); err != nil {
			t.Fatal(err)
		}
		first, err := h.client.ListLeads(t.Context(), other, agentsite.ListLeadsOptions{Limit: 3})
		if err != nil || first.Next != nil {
			t.Fatalf("first = %+v, %v", first, err)
		}
		two, _ := h.client.ListLeads(t.Context(), other, agentsite.ListLeadsOptions{Limit: 2})
		if _, err := h.sim.CreateLeads(other, 2); err != nil {
			t.Fatal(err)
		}
		rest, err := h.client.ListLeads(t.Context(), other, agentsite.ListLeadsOptions{Limit: 10, Cursor: two.Next})
		if err != nil || len(rest.Leads) != 3 || rest.Leads[0].ID != first.Leads[2].ID {
			t.Fatalf("rest = %+v, %v", rest, err)
		}
	})

	t.Run("lead.created per lead with site and lead ids", func(t *testing.T) {
		n := 0
		for _, e := range h.sim.Events() {
			if e.Type == webhook.LeadCreated && bytes.Contains(e.Data, []byte(`"site_id":"`+id+`"`)) && bytes.Contains(e.Data, []byte(`"lead_id":"lead_`)) {
				n++
			}
		}
		if n != 120 {
			t.Errorf("%d lead.created events for %s, want 120", n, id)
		}
	})

	t.Run("control routes need the admin token", func(t *testing.T) {
		if r := h.do(t, "POST", "/_sim/sites/"+id+"/leads", keyAll, "", `{"count":1}`); r.Status != 401 {
			t.Errorf("with an API key: %d", r.Status)
		}
		if r := h.admin(t, "POST", "/_sim/sites/site_404/leads", `{"count":1}`); r.Status != 422 {
			t.Errorf("unknown site: %d", r.Status)
		}
		cfg := testConfig()
		cfg.AdminToken = ""
		h2 := newHarness(t, cfg)
		if r := h2.admin(t, "GET", "/_sim/faults", ""); r.Status != 404 {
			t.Errorf("without an admin token the control routes answer %d, want 404", r.Status)
		}
	})
}

func TestAuthAnswersNameTheScope(t *testing.T) {
	h := newHarness(t, testConfig())
	r := h.do(t, "POST", "/api/v1/sites", keyRead, "k", `{"title":"x","slug":"x","type":"business","template":"minimal"}`)
	if r.Status != http.StatusForbidden || !bytes.Contains(r.Body, []byte("sites:write")) {
		t.Errorf("403 body %s does not name sites:write", r.Body)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no keys":         {},
		"unknown scope":   {Keys: map[string][]string{"k": {"sites:delete"}}},
		"negative scale":  {Keys: map[string][]string{"k": {"*"}}, TimeScale: -1},
		"rate over one":   {Keys: map[string][]string{"k": {"*"}}, Faults: Faults{ErrorRate: 1.5}},
		"negative delay":  {Keys: map[string][]string{"k": {"*"}}, KnowledgeDelay: -time.Second},
		"key with spaces": {Keys: map[string][]string{"a b": {"*"}}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	s, err := New(Config{Keys: map[string][]string{"k": {"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.cfg.DeliveryTimeout != 10*time.Second || s.cfg.IdempotencyRetention != 24*time.Hour || s.cfg.TimeScale != 1 {
		t.Errorf("defaults = %+v", s.cfg)
	}
}

func TestLogsAreCapped(t *testing.T) {
	var log []int
	for i := range maxLog + 10 {
		log = appendCapped(log, i)
	}
	if len(log) > maxLog || log[len(log)-1] != maxLog+9 {
		t.Errorf("capped log has %d entries ending in %d", len(log), log[len(log)-1])
	}
}

func TestSitesSummary(t *testing.T) {
	h := newHarness(t, testConfig())
	id := h.createSite(t, "acme")
	h.createSite(t, "beta")
	if _, err := h.sim.CreateLeads(id, 3); err != nil {
		t.Fatal(err)
	}
	h.do(t, "POST", "/api/v1/sites/"+id+"/faqs", keyAll, "f1", `{"question":"q","answer":"a"}`)
	h.do(t, "PATCH", "/api/v1/sites/"+id+"/agent", keyAll, "a1", `{"embed_enabled":true,"allowed_origins":["https://a.example"]}`)
	sites := h.sim.Sites()
	if len(sites) != 2 || sites[0].ID != id || sites[0].Leads != 3 || sites[0].FAQs != 1 || !sites[0].EmbedEnabled || sites[1].Slug != "beta" {
		t.Errorf("sites = %+v", sites)
	}
	if ids := h.sim.LeadIDs(id); len(ids) != 3 || ids[0] != "lead_1" {
		t.Errorf("lead ids = %v", ids)
	}
}
