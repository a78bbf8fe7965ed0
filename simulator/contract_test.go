package simulator

import (
	"net/url"
	"strings"
	"testing"
)

// TestContract holds one case per rule of the Agent-Site contract (and per
// choice the simulator documents where the contract is silent): the
// request, and the answer the rule demands. Each case runs on a fresh
// simulator holding site_1 (slug acme, 3 leads), site_2 (slug other, 2
// leads) and endpoint we_1.
func TestContract(t *testing.T) {
	long := strings.Repeat("a", 200_000)
	tests := []struct {
		rule       string
		method     string
		path       string
		token      string // keyAll when empty; "-" sends no Authorization
		idem       string // "-" sends none; defaults to a fresh key for mutations
		body       string
		wantStatus int
		wantCode   string
		wantField  string
	}{
		// Authentication and scopes.
		{rule: "every request carries a bearer key", method: "GET", path: "/api/v1/sites/site_1", token: "-", wantStatus: 401, wantCode: "missing_api_key"},
		{rule: "an unknown key is refused", method: "GET", path: "/api/v1/sites/site_1", token: "svc_live_nope", wantStatus: 401, wantCode: "invalid_api_key"},
		{rule: "a basic-auth header is not a bearer", method: "GET", path: "/api/v1/sites/site_1", token: "-basic", wantStatus: 401, wantCode: "missing_api_key"},
		{rule: "creating a site needs sites:write", method: "POST", path: "/api/v1/sites", token: keyRead, body: `{"title":"T","slug":"t","type":"business","template":"minimal"}`, wantStatus: 403, wantCode: "insufficient_scope"},
		{rule: "creating a site with sites:write", method: "POST", path: "/api/v1/sites", token: "svc_live_only_sites:write", body: `{"title":"T","slug":"t","type":"business","template":"minimal"}`, wantStatus: 201},
		{rule: "updating the agent needs agents:write", method: "PATCH", path: "/api/v1/sites/site_1/agent", token: "svc_live_only_sites:write", body: `{"embed_enabled":true}`, wantStatus: 403, wantCode: "insufficient_scope"},
		{rule: "updating the agent with agents:write", method: "PATCH", path: "/api/v1/sites/site_1/agent", token: "svc_live_only_agents:write", body: `{"embed_enabled":true}`, wantStatus: 200},
		{rule: "adding knowledge needs knowledge:write", method: "POST", path: "/api/v1/sites/site_1/knowledge", token: "svc_live_only_agents:write", body: `{"name":"n","text":"hello"}`, wantStatus: 403, wantCode: "insufficient_scope"},
		{rule: "adding knowledge with knowledge:write", method: "POST", path: "/api/v1/sites/site_1/knowledge", token: "svc_live_only_knowledge:write", body: `{"name":"n","text":"hello"}`, wantStatus: 201},
		{rule: "FAQ create needs knowledge:write (documented choice)", method: "POST", path: "/api/v1/sites/site_1/faqs", token: "svc_live_only_sites:write", body: `{"question":"q","answer":"a","approved":true}`, wantStatus: 403, wantCode: "insufficient_scope"},
		{rule: "FAQ create with knowledge:write", method: "POST", path: "/api/v1/sites/site_1/faqs", token: "svc_live_only_knowledge:write", body: `{"question":"q","answer":"a","approved":true}`, wantStatus: 201},
		{rule: "publish needs sites:write (documented choice)", method: "POST", path: "/api/v1/sites/site_1/publish", token: "svc_live_only_knowledge:write", body: `{"published":true}`, wantStatus: 403, wantCode: "insufficient_scope"},
		{rule: "reading leads needs leads:read", method: "GET", path: "/api/v1/sites/site_1/leads", token: keyRead, wantStatus: 403, wantCode: "insufficient_scope"},
		{rule: "reading leads with leads:read", method: "GET", path: "/api/v1/sites/site_1/leads", token: "svc_live_only_leads:read", wantStatus: 200},
		{rule: "registering an endpoint needs webhooks:write", method: "POST", path: "/api/v1/webhook-endpoints", token: "svc_live_only_sites:write", body: `{"url":"https://hooks.example.org/x","events":["lead.created"]}`, wantStatus: 403, wantCode: "insufficient_scope"},
		{rule: "listing endpoints needs webhooks:write (documented choice)", method: "GET", path: "/api/v1/webhook-endpoints", token: keyRead, wantStatus: 403, wantCode: "insufficient_scope"},
		{rule: "deleting an endpoint needs webhooks:write (documented choice)", method: "DELETE", path: "/api/v1/webhook-endpoints/we_1", token: "svc_live_only_sites:write", wantStatus: 403, wantCode: "insufficient_scope"},
		{rule: "verifying a site needs sites:read", method: "GET", path: "/api/v1/sites/site_1", token: "svc_live_only_leads:read", wantStatus: 403, wantCode: "insufficient_scope"},
		{rule: "verifying a site with sites:read", method: "GET", path: "/api/v1/sites/site_1", token: keyRead, wantStatus: 200},

		// Idempotency.
		{rule: "a mutation without Idempotency-Key is refused", method: "POST", path: "/api/v1/sites/site_1/publish", idem: "-", body: `{"published":true}`, wantStatus: 400, wantCode: "idempotency_key_missing"},
		{rule: "a PATCH without Idempotency-Key is refused", method: "PATCH", path: "/api/v1/sites/site_1/agent", idem: "-", body: `{"embed_enabled":false}`, wantStatus: 400, wantCode: "idempotency_key_missing"},
		{rule: "a DELETE without Idempotency-Key is refused", method: "DELETE", path: "/api/v1/webhook-endpoints/we_1", idem: "-", wantStatus: 400, wantCode: "idempotency_key_missing"},
		{rule: "a GET needs no Idempotency-Key", method: "GET", path: "/api/v1/webhook-endpoints", idem: "-", wantStatus: 200},

		// Sites.
		{rule: "create site answers 201", method: "POST", path: "/api/v1/sites", body: `{"title":"New","slug":"new-site","type":"business","template":"minimal","content":{"headline":"h","subheadline":"s","about":"a"},"persona_mode":"assistant","languages":["en"]}`, wantStatus: 201},
		{rule: "a slug is unique", method: "POST", path: "/api/v1/sites", body: `{"title":"Dup","slug":"acme","type":"business","template":"minimal"}`, wantStatus: 409, wantCode: "slug_taken", wantField: "slug"},
		{rule: "title is required", method: "POST", path: "/api/v1/sites", body: `{"slug":"x","type":"business","template":"minimal"}`, wantStatus: 422, wantCode: "required", wantField: "title"},
		{rule: "slug is required", method: "POST", path: "/api/v1/sites", body: `{"title":"x","type":"business","template":"minimal"}`, wantStatus: 422, wantCode: "required", wantField: "slug"},
		{rule: "type is required", method: "POST", path: "/api/v1/sites", body: `{"title":"x","slug":"x","template":"minimal"}`, wantStatus: 422, wantCode: "required", wantField: "type"},
		{rule: "template is required", method: "POST", path: "/api/v1/sites", body: `{"title":"x","slug":"x","type":"business"}`, wantStatus: 422, wantCode: "required", wantField: "template"},
		{rule: "a slug is lowercase letters, digits and hyphens", method: "POST", path: "/api/v1/sites", body: `{"title":"x","slug":"Not A Slug","type":"business","template":"minimal"}`, wantStatus: 422, wantCode: "invalid_slug", wantField: "slug"},
		{rule: "languages cannot be empty", method: "POST", path: "/api/v1/sites", body: `{"title":"x","slug":"x","type":"business","template":"minimal","languages":[]}`, wantStatus: 422, wantCode: "invalid_languages", wantField: "languages"},
		{rule: "a body that is not JSON is refused", method: "POST", path: "/api/v1/sites", body: `{"title":`, wantStatus: 400, wantCode: "invalid_json"},
		{rule: "unknown fields are refused", method: "POST", path: "/api/v1/sites", body: `{"title":"x","slug":"x","type":"business","template":"minimal","colour":"red"}`, wantStatus: 400, wantCode: "invalid_json", wantField: "colour"},
		{rule: "a field of the wrong type is refused", method: "POST", path: "/api/v1/sites", body: `{"title":1,"slug":"x","type":"business","template":"minimal"}`, wantStatus: 400, wantCode: "invalid_json", wantField: "title"},
		{rule: "an unknown site is 404", method: "GET", path: "/api/v1/sites/site_404", wantStatus: 404, wantCode: "site_not_found", wantField: "site_id"},

		// Agent.
		{rule: "a body of only embed_enabled is valid", method: "PATCH", path: "/api/v1/sites/site_1/agent", body: `{"embed_enabled":false}`, wantStatus: 200},
		{rule: "an empty agent update is refused", method: "PATCH", path: "/api/v1/sites/site_1/agent", body: `{}`, wantStatus: 422, wantCode: "empty_update"},
		{rule: "allowed_origins entries are exact origins", method: "PATCH", path: "/api/v1/sites/site_1/agent", body: `{"allowed_origins":["https://acme.example","http://localhost:3000"]}`, wantStatus: 200},
		{rule: "an origin has no path", method: "PATCH", path: "/api/v1/sites/site_1/agent", body: `{"allowed_origins":["https://acme.example/shop"]}`, wantStatus: 422, wantCode: "invalid_origin", wantField: "allowed_origins[0]"},
		{rule: "an origin has no trailing slash", method: "PATCH", path: "/api/v1/sites/site_1/agent", body: `{"allowed_origins":["https://ok.example","https://acme.example/"]}`, wantStatus: 422, wantCode: "invalid_origin", wantField: "allowed_origins[1]"},
		{rule: "an origin has no trailing wildcard", method: "PATCH", path: "/api/v1/sites/site_1/agent", body: `{"allowed_origins":["https://acme.example*"]}`, wantStatus: 422, wantCode: "invalid_origin", wantField: "allowed_origins[0]"},
		{rule: "an origin has no wildcard host", method: "PATCH", path: "/api/v1/sites/site_1/agent", body: `{"allowed_origins":["https://*.acme.example"]}`, wantStatus: 422, wantCode: "invalid_origin", wantField: "allowed_origins[0]"},
		{rule: "an explicit default port is an optional port", method: "PATCH", path: "/api/v1/sites/site_1/agent", body: `{"allowed_origins":["https://x.example:443","http://y.example:80"]}`, wantStatus: 200},
		{rule: "scheme and hostname are case-insensitive", method: "PATCH", path: "/api/v1/sites/site_1/agent", body: `{"allowed_origins":["HTTPS://Gen.Example"]}`, wantStatus: 200},
		{rule: "one origin listed twice is refused (documented choice)", method: "PATCH", path: "/api/v1/sites/site_1/agent", body: `{"allowed_origins":["https://gen.example","HTTPS://Gen.Example:443"]}`, wantStatus: 422, wantCode: "invalid_origin", wantField: "allowed_origins[1]"},
		{rule: "an origin's host is a hostname (documented choice)", method: "PATCH", path: "/api/v1/sites/site_1/agent", body: `{"allowed_origins":["https://bücher.example"]}`, wantStatus: 422, wantCode: "invalid_origin", wantField: "allowed_origins[0]"},
		{rule: "embed_enabled is a boolean", method: "PATCH", path: "/api/v1/sites/site_1/agent", body: `{"embed_enabled":"no"}`, wantStatus: 400, wantCode: "invalid_json", wantField: "embed_enabled"},
		{rule: "the agent of an unknown site is 404", method: "PATCH", path: "/api/v1/sites/site_404/agent", body: `{"embed_enabled":true}`, wantStatus: 404, wantCode: "site_not_found", wantField: "site_id"},

		// Knowledge.
		{rule: "knowledge text of 5 characters", method: "POST", path: "/api/v1/sites/site_1/knowledge", body: `{"name":"n","text":"abcde"}`, wantStatus: 201},
		{rule: "knowledge text under 5 characters", method: "POST", path: "/api/v1/sites/site_1/knowledge", body: `{"name":"n","text":"abcd"}`, wantStatus: 422, wantCode: "invalid_text", wantField: "text"},
		{rule: "knowledge text counts code points, not bytes", method: "POST", path: "/api/v1/sites/site_1/knowledge", body: `{"name":"n","text":"日本語日本"}`, wantStatus: 201},
		{rule: "knowledge text of 4 multi-byte characters", method: "POST", path: "/api/v1/sites/site_1/knowledge", body: `{"name":"n","text":"日本語字"}`, wantStatus: 422, wantCode: "invalid_text", wantField: "text"},
		{rule: "a body that is not UTF-8 is refused (documented choice)", method: "POST", path: "/api/v1/sites/site_1/knowledge", body: "{\"name\":\"n\",\"text\":\"abcde\xff\"}", wantStatus: 400, wantCode: "invalid_json"},
		{rule: "knowledge text of 200,000 characters", method: "POST", path: "/api/v1/sites/site_1/knowledge", body: `{"name":"n","text":"` + long + `"}`, wantStatus: 201},
		{rule: "knowledge text over 200,000 characters", method: "POST", path: "/api/v1/sites/site_1/knowledge", body: `{"name":"n","text":"` + long + `b"}`, wantStatus: 422, wantCode: "invalid_text", wantField: "text"},
		{rule: "knowledge name is required", method: "POST", path: "/api/v1/sites/site_1/knowledge", body: `{"text":"hello world"}`, wantStatus: 422, wantCode: "required", wantField: "name"},
		{rule: "knowledge text is required", method: "POST", path: "/api/v1/sites/site_1/knowledge", body: `{"name":"n"}`, wantStatus: 422, wantCode: "required", wantField: "text"},
		{rule: "knowledge is pasted text only", method: "POST", path: "/api/v1/sites/site_1/knowledge", body: `{"name":"n","url":"https://acme.example"}`, wantStatus: 400, wantCode: "invalid_json", wantField: "url"},
		{rule: "a body over 4 MiB is refused", method: "POST", path: "/api/v1/sites/site_1/knowledge", body: `{"name":"n","text":"` + strings.Repeat("x", 5<<20) + `"}`, wantStatus: 413, wantCode: "body_too_large"},

		// FAQs and publishing.
		{rule: "FAQ question is required", method: "POST", path: "/api/v1/sites/site_1/faqs", body: `{"answer":"a"}`, wantStatus: 422, wantCode: "required", wantField: "question"},
		{rule: "FAQ answer is required", method: "POST", path: "/api/v1/sites/site_1/faqs", body: `{"question":"q"}`, wantStatus: 422, wantCode: "required", wantField: "answer"},
		{rule: "publish true answers 200", method: "POST", path: "/api/v1/sites/site_1/publish", body: `{"published":true}`, wantStatus: 200},
		{rule: "publish needs published", method: "POST", path: "/api/v1/sites/site_1/publish", body: `{}`, wantStatus: 422, wantCode: "required", wantField: "published"},
		{rule: "publishing an unknown site is 404", method: "POST", path: "/api/v1/sites/site_404/publish", body: `{"published":true}`, wantStatus: 404, wantCode: "site_not_found", wantField: "site_id"},

		// Leads.
		{rule: "limit defaults and accepts 1", method: "GET", path: "/api/v1/sites/site_1/leads?limit=1", wantStatus: 200},
		{rule: "limit accepts 200", method: "GET", path: "/api/v1/sites/site_1/leads?limit=200", wantStatus: 200},
		{rule: "limit 0 is out of range", method: "GET", path: "/api/v1/sites/site_1/leads?limit=0", wantStatus: 400, wantCode: "invalid_limit", wantField: "limit"},
		{rule: "limit 201 is out of range", method: "GET", path: "/api/v1/sites/site_1/leads?limit=201", wantStatus: 400, wantCode: "invalid_limit", wantField: "limit"},
		{rule: "limit is an integer", method: "GET", path: "/api/v1/sites/site_1/leads?limit=ten", wantStatus: 400, wantCode: "invalid_limit", wantField: "limit"},
		{rule: "another site's cursor is refused", method: "GET", path: "/api/v1/sites/site_1/leads?cursor={cursor_site_2}", wantStatus: 400, wantCode: "invalid_cursor", wantField: "cursor"},
		{rule: "the same cursor on its own site", method: "GET", path: "/api/v1/sites/site_2/leads?cursor={cursor_site_2}", wantStatus: 200},
		{rule: "a forged cursor is refused", method: "GET", path: "/api/v1/sites/site_1/leads?cursor=AAAAAAAAAAFzaXRlXzE%3D", wantStatus: 400, wantCode: "invalid_cursor", wantField: "cursor"},
		{rule: "an edited cursor is refused", method: "GET", path: "/api/v1/sites/site_2/leads?cursor={edited_cursor_site_2}", wantStatus: 400, wantCode: "invalid_cursor", wantField: "cursor"},
		{rule: "leads of an unknown site are 404", method: "GET", path: "/api/v1/sites/site_404/leads", wantStatus: 404, wantCode: "site_not_found", wantField: "site_id"},

		// Webhook endpoints.
		{rule: "registration of an HTTPS public URL", method: "POST", path: "/api/v1/webhook-endpoints", body: `{"url":"https://hooks.example.org/v2","events":["lead.created","site.published"]}`, wantStatus: 201},
		{rule: "the URL must be HTTPS", method: "POST", path: "/api/v1/webhook-endpoints", body: `{"url":"http://hooks.example.org/in","events":["lead.created"]}`, wantStatus: 422, wantCode: "invalid_url", wantField: "url"},
		{rule: "the URL has no username or password", method: "POST", path: "/api/v1/webhook-endpoints", body: `{"url":"https://u:p@hooks.example.org/in","events":["lead.created"]}`, wantStatus: 422, wantCode: "invalid_url", wantField: "url"},
		{rule: "the URL has no fragment", method: "POST", path: "/api/v1/webhook-endpoints", body: `{"url":"https://hooks.example.org/in#x","events":["lead.created"]}`, wantStatus: 422, wantCode: "invalid_url", wantField: "url"},
		{rule: "the URL has no custom port", method: "POST", path: "/api/v1/webhook-endpoints", body: `{"url":"https://hooks.example.org:8443/in","events":["lead.created"]}`, wantStatus: 422, wantCode: "invalid_url", wantField: "url"},
		{rule: "an explicit port 443 is not a custom port", method: "POST", path: "/api/v1/webhook-endpoints", body: `{"url":"https://hooks.example.org:443/in","events":["lead.created"]}`, wantStatus: 201},
		{rule: "localhost names are refused (the table runs in loopback test mode, which allows localhost itself)", method: "POST", path: "/api/v1/webhook-endpoints", body: `{"url":"https://api.localhost/in","events":["lead.created"]}`, wantStatus: 422, wantCode: "invalid_url", wantField: "url"},
		{rule: "the host must resolve to public addresses only", method: "POST", path: "/api/v1/webhook-endpoints", body: `{"url":"https://internal.example.org/in","events":["lead.created"]}`, wantStatus: 422, wantCode: "invalid_url", wantField: "url"},
		{rule: "a private IP literal is refused", method: "POST", path: "/api/v1/webhook-endpoints", body: `{"url":"https://10.0.0.8/in","events":["lead.created"]}`, wantStatus: 422, wantCode: "invalid_url", wantField: "url"},
		{rule: "event types come from the known set", method: "POST", path: "/api/v1/webhook-endpoints", body: `{"url":"https://hooks.example.org/in","events":["lead.updated"]}`, wantStatus: 422, wantCode: "invalid_events", wantField: "events"},
		{rule: "domain.activated is retired", method: "POST", path: "/api/v1/webhook-endpoints", body: `{"url":"https://hooks.example.org/in","events":["domain.activated"]}`, wantStatus: 422, wantCode: "invalid_events", wantField: "events"},
		{rule: "at least one event type", method: "POST", path: "/api/v1/webhook-endpoints", body: `{"url":"https://hooks.example.org/in","events":[]}`, wantStatus: 422, wantCode: "invalid_events", wantField: "events"},
		{rule: "deleting an endpoint answers 204", method: "DELETE", path: "/api/v1/webhook-endpoints/we_1", wantStatus: 204},
		{rule: "deleting an unknown endpoint is 404", method: "DELETE", path: "/api/v1/webhook-endpoints/we_404", wantStatus: 404, wantCode: "endpoint_not_found", wantField: "endpoint_id"},
		{rule: "unknown API routes are 404 with a JSON error", method: "GET", path: "/api/v1/conversations", wantStatus: 404, wantCode: "not_found"},
	}
	for i, tc := range tests {
		t.Run(tc.rule, func(t *testing.T) {
			h := newHarness(t, testConfig())
			h.resolver.set("internal.example.org", "93.184.215.14", "192.168.0.7")
			site1 := h.createSite(t, "acme")
			site2 := h.createSite(t, "other")
			if site1 != "site_1" || site2 != "site_2" {
				t.Fatalf("setup made %s and %s", site1, site2)
			}
			if _, err := h.sim.CreateLeads(site1, 3); err != nil {
				t.Fatal(err)
			}
			if _, err := h.sim.CreateLeads(site2, 2); err != nil {
				t.Fatal(err)
			}
			rc := newReceiver(t)
			if id := h.register(t, rc, "/hook", "lead.created"); id != "we_1" {
				t.Fatalf("setup endpoint = %s", id)
			}
			path := tc.path
			if strings.Contains(path, "cursor_site_2}") {
				page := h.do(t, "GET", "/api/v1/sites/site_2/leads?limit=1", keyAll, "", "")
				var out struct {
					NextCursor string `json:"next_cursor"`
				}
				mustDecode(t, page.Body, &out)
				path = strings.ReplaceAll(path, "{cursor_site_2}", url.QueryEscape(out.NextCursor))
				edited := []byte(out.NextCursor)
				edited[2] ^= 1 // still base64, no longer what the API issued
				path = strings.ReplaceAll(path, "{edited_cursor_site_2}", url.QueryEscape(string(edited)))
			}
			token := tc.token
			if token == "" {
				token = keyAll
			}
			idem := tc.idem
			if idem == "" && tc.method != "GET" {
				idem = "contract-" + string(rune('a'+i%26)) + tc.rule
			}
			if idem == "-" {
				idem = ""
			}
			auth := "Bearer " + token
			switch token {
			case "-":
				auth = ""
			case "-basic":
				auth = "Basic c3ZjX2xpdmVfYWxsOng="
			}
			resp := h.doAuth(t, tc.method, path, auth, idem, tc.body)
			if resp.Status != tc.wantStatus {
				t.Fatalf("%s %s: status %d, want %d; body %.300s", tc.method, path, resp.Status, tc.wantStatus, resp.Body)
			}
			if resp.Header.Get("X-Request-Id") == "" {
				t.Errorf("no X-Request-Id on the answer")
			}
			if tc.wantStatus >= 400 {
				code, field := resp.errorCode()
				if code != tc.wantCode || field != tc.wantField {
					t.Errorf("error code/field = %q/%q, want %q/%q; body %.300s", code, field, tc.wantCode, tc.wantField, resp.Body)
				}
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("error Content-Type = %q", ct)
				}
			}
			if strings.Contains(string(resp.Body), keyAll) {
				t.Errorf("the answer carries the API key")
			}
		})
	}
}
