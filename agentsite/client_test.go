package agentsite

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const testKey = "svc_live_TESTKEY_must_never_leak"

// recorded is one request as the test server saw it.
type recorded struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   string
}

// apiServer is an httptest server that records requests and answers with
// reply.
type apiServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

func newAPIServer(t *testing.T, reply http.HandlerFunc) *apiServer {
	t.Helper()
	s := &apiServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, recorded{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), string(b)})
		s.mu.Unlock()
		reply(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *apiServer) requests() []recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recorded(nil), s.reqs...)
}

func (s *apiServer) last(t *testing.T) recorded {
	t.Helper()
	reqs := s.requests()
	if len(reqs) == 0 {
		t.Fatal("the server saw no request")
	}
	return reqs[len(reqs)-1]
}

// newHangingServer never answers: each request waits until the client
// gives up (or the test ends).
func newHangingServer(t *testing.T) *apiServer {
	t.Helper()
	release := make(chan struct{})
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	return srv
}

func newTestClient(t *testing.T, url string, opts ...Option) *Client {
	t.Helper()
	c, err := NewClient(url, testKey, opts...)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req_123")
		if status == http.StatusCreated {
			w.Header().Set("Location", "/api/v1/sites/site_1")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func TestEndpoints(t *testing.T) {
	enabled := false
	tests := []struct {
		name       string
		reply      http.HandlerFunc
		call       func(ctx context.Context, c *Client) (any, error)
		wantMethod string
		wantPath   string
		wantQuery  string
		wantBody   string // exact JSON; "" means no body
		wantKey    string // Idempotency-Key; "" means the header must be absent
		check      func(t *testing.T, got any)
	}{
		{
			name:  "create site",
			reply: answer(201, `{"data":{"id":"site_1","status":"draft","slug":"acme"}}`),
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateSite(ctx, "wf/create-site", NewSite{
					Title: "Acme", Slug: "acme", Type: "business", Template: "minimal",
					Content:     SiteContent{Headline: "H", Subheadline: "S", About: "A"},
					PersonaMode: "assistant", Languages: []string{"en"},
				})
			},
			wantMethod: "POST", wantPath: "/api/v1/sites", wantKey: "wf/create-site",
			wantBody: `{"title":"Acme","slug":"acme","type":"business","template":"minimal","content":{"headline":"H","subheadline":"S","about":"A"},"persona_mode":"assistant","languages":["en"]}`,
			check: func(t *testing.T, got any) {
				cs := got.(*CreatedSite)
				if cs.Site.ID != "site_1" || cs.Site.Status != "draft" || cs.Location != "/api/v1/sites/site_1" || cs.Response.RequestID != "req_123" || cs.Response.Status != 201 {
					t.Errorf("CreateSite = %+v, response %+v", cs.Site, cs.Response)
				}
			},
		},
		{
			name:  "update agent sends only embed_enabled",
			reply: answer(200, `{"data":{"embed_enabled":false}}`),
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.SetEmbed(ctx, "incident/1/embed-off", "site_1", false)
			},
			wantMethod: "PATCH", wantPath: "/api/v1/sites/site_1/agent", wantKey: "incident/1/embed-off",
			wantBody: `{"embed_enabled":false}`,
			check: func(t *testing.T, got any) {
				if a := got.(*Agent); a.EmbedEnabled == nil || *a.EmbedEnabled {
					t.Errorf("agent = %+v", a)
				}
			},
		},
		{
			name:  "update agent full",
			reply: answer(200, ``),
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.UpdateAgent(ctx, "k", "site_1", AgentUpdate{
					DisplayName: new("Ava"), PersonaMode: new("assistant"), Instructions: new("Be kind."),
					Languages: []string{"en", "de"}, EmbedEnabled: &enabled, AllowedOrigins: []string{"https://acme.com", "http://localhost:3000"},
				})
			},
			wantMethod: "PATCH", wantPath: "/api/v1/sites/site_1/agent", wantKey: "k",
			wantBody: `{"display_name":"Ava","persona_mode":"assistant","instructions":"Be kind.","languages":["en","de"],"embed_enabled":false,"allowed_origins":["https://acme.com","http://localhost:3000"]}`,
		},
		{
			name:  "update agent clears origins with an empty list",
			reply: answer(200, `{}`),
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.UpdateAgent(ctx, "k", "site_1", AgentUpdate{AllowedOrigins: []string{}})
			},
			wantMethod: "PATCH", wantPath: "/api/v1/sites/site_1/agent", wantKey: "k",
			wantBody: `{"allowed_origins":[]}`,
		},
		{
			name:  "add knowledge",
			reply: answer(201, `{"data":{"id":"kn_1","name":"About","status":"processing"}}`),
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.AddKnowledge(ctx, "k2", "site_1", KnowledgeSource{Name: "About", Text: "We sell anvils."})
			},
			wantMethod: "POST", wantPath: "/api/v1/sites/site_1/knowledge", wantKey: "k2",
			wantBody: `{"name":"About","text":"We sell anvils."}`,
			check: func(t *testing.T, got any) {
				if k := got.(*Knowledge); k.ID != "kn_1" {
					t.Errorf("knowledge = %+v", k)
				}
			},
		},
		{
			name:  "add FAQ sends approved false",
			reply: answer(201, `{"data":{"id":"faq_1","question":"Q?","answer":"A.","approved":false}}`),
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.AddFAQ(ctx, "k3", "site_1", FAQ{Question: "Q?", Answer: "A."})
			},
			wantMethod: "POST", wantPath: "/api/v1/sites/site_1/faqs", wantKey: "k3",
			wantBody: `{"question":"Q?","answer":"A.","approved":false}`,
			check: func(t *testing.T, got any) {
				if f := got.(*FAQ); f.ID != "faq_1" {
					t.Errorf("faq = %+v", f)
				}
			},
		},
		{
			name:  "publish",
			reply: answer(200, `{"data":{"id":"site_1","status":"published"}}`),
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Publish(ctx, "k4", "site_1", true)
			},
			wantMethod: "POST", wantPath: "/api/v1/sites/site_1/publish", wantKey: "k4",
			wantBody: `{"published":true}`,
			check: func(t *testing.T, got any) {
				if p := got.(*PublishResult); p.ID != "site_1" || p.Status != "published" {
					t.Errorf("publish = %+v", p)
				}
			},
		},
		{
			name:  "unpublish",
			reply: answer(200, `{"data":{"id":"site_1","status":"draft"}}`),
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Publish(ctx, "k5", "site_1", false)
			},
			wantMethod: "POST", wantPath: "/api/v1/sites/site_1/publish", wantKey: "k5",
			wantBody: `{"published":false}`,
		},
		{
			name:  "list leads first page",
			reply: answer(200, `{"data":[{"id":"lead_1","site_id":"site_1","email":"a@example.com"}],"next_cursor":null}`),
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.ListLeads(ctx, "site_1", ListLeadsOptions{Limit: 50})
			},
			wantMethod: "GET", wantPath: "/api/v1/sites/site_1/leads", wantQuery: "limit=50",
			check: func(t *testing.T, got any) {
				p := got.(*LeadPage)
				if len(p.Leads) != 1 || p.Leads[0].ID != "lead_1" || p.Next != nil ||
					string(p.Leads[0].Raw) != `{"id":"lead_1","site_id":"site_1","email":"a@example.com"}` {
					t.Errorf("page = %+v", p)
				}
			},
		},
		{
			name:  "create webhook endpoint",
			reply: answer(201, `{"data":{"id":"we_1","url":"https://hooks.example.org/in","events":["lead.created"],"status":"enabled","secret":"whsec_abc"}}`),
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateWebhookEndpoint(ctx, "k6", NewWebhookEndpoint{URL: "https://hooks.example.org/in", Events: []string{"lead.created"}})
			},
			wantMethod: "POST", wantPath: "/api/v1/webhook-endpoints", wantKey: "k6",
			wantBody: `{"url":"https://hooks.example.org/in","events":["lead.created"]}`,
			check: func(t *testing.T, got any) {
				ce := got.(*CreatedWebhookEndpoint)
				if ce.Endpoint.ID != "we_1" || ce.Secret.Reveal() != "whsec_abc" || ce.Endpoint.Status != "enabled" {
					t.Errorf("created = %+v", ce)
				}
			},
		},
		{
			name:  "list webhook endpoints",
			reply: answer(200, `{"data":[{"id":"we_1","url":"https://hooks.example.org/in","events":["lead.created"],"status":"enabled","last_delivery":{"at":"2026-11-21T09:00:00.000Z","event_id":"evt_1","outcome":"failed","status_code":500},"last_error":"500 Internal Server Error"}]}`),
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.ListWebhookEndpoints(ctx)
			},
			wantMethod: "GET", wantPath: "/api/v1/webhook-endpoints",
			check: func(t *testing.T, got any) {
				eps := got.([]WebhookEndpoint)
				if len(eps) != 1 || eps[0].LastDelivery == nil || eps[0].LastDelivery.StatusCode != 500 || eps[0].LastError == nil {
					t.Errorf("endpoints = %+v", eps)
				}
			},
		},
		{
			name:  "delete webhook endpoint",
			reply: answer(204, ``),
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.DeleteWebhookEndpoint(ctx, "k7", "we_1")
			},
			wantMethod: "DELETE", wantPath: "/api/v1/webhook-endpoints/we_1", wantKey: "k7",
		},
		{
			name:  "path values are escaped as one segment",
			reply: answer(200, `{"data":{"id":"a/b c","status":"published"}}`),
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Publish(ctx, "k8", "a/b c", true)
			},
			wantMethod: "POST", wantPath: "/api/v1/sites/a%2Fb%20c/publish", wantKey: "k8",
			wantBody: `{"published":true}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newAPIServer(t, tc.reply)
			c := newTestClient(t, srv.URL, WithResolver(publicResolver()))
			got, err := tc.call(t.Context(), c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			req := srv.last(t)
			if req.Method != tc.wantMethod || req.Path != tc.wantPath || req.RawQuery != tc.wantQuery {
				t.Errorf("request = %s %s?%s, want %s %s?%s", req.Method, req.Path, req.RawQuery, tc.wantMethod, tc.wantPath, tc.wantQuery)
			}
			if got := req.Header.Get("Authorization"); got != "Bearer "+testKey {
				t.Errorf("Authorization = %q", got)
			}
			if got := req.Header.Get("Idempotency-Key"); got != tc.wantKey {
				t.Errorf("Idempotency-Key = %q, want %q", got, tc.wantKey)
			}
			if _, present := req.Header["Idempotency-Key"]; present && tc.wantKey == "" {
				t.Errorf("Idempotency-Key present on %s", req.Method)
			}
			if req.Body != tc.wantBody {
				t.Errorf("body = %s\nwant   %s", req.Body, tc.wantBody)
			}
			if ct := req.Header.Get("Content-Type"); (tc.wantBody != "") != (ct == "application/json") {
				t.Errorf("Content-Type = %q with body %q", ct, req.Body)
			}
			if ua := req.Header.Get("User-Agent"); ua != DefaultUserAgent {
				t.Errorf("User-Agent = %q", ua)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

func TestMissingIdempotencyKeySendsNothing(t *testing.T) {
	srv := newAPIServer(t, answer(200, `{}`))
	c := newTestClient(t, srv.URL, WithResolver(publicResolver()))
	ctx := t.Context()
	calls := map[string]func() error{
		"CreateSite": func() error { _, err := c.CreateSite(ctx, "", NewSite{Slug: "x"}); return err },
		"UpdateAgent": func() error {
			_, err := c.SetEmbed(ctx, "", "site_1", true)
			return err
		},
		"AddKnowledge": func() error {
			_, err := c.AddKnowledge(ctx, "", "site_1", KnowledgeSource{Name: "n", Text: "hello world"})
			return err
		},
		"AddFAQ":  func() error { _, err := c.AddFAQ(ctx, "", "site_1", FAQ{Question: "q", Answer: "a"}); return err },
		"Publish": func() error { _, err := c.Publish(ctx, "", "site_1", true); return err },
		"CreateWebhookEndpoint": func() error {
			_, err := c.CreateWebhookEndpoint(ctx, "", NewWebhookEndpoint{URL: "https://hooks.example.org/in", Events: []string{"lead.created"}})
			return err
		},
		"DeleteWebhookEndpoint": func() error { return c.DeleteWebhookEndpoint(ctx, "", "we_1") },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, ErrMissingIdempotencyKey) {
				t.Errorf("error = %v, want ErrMissingIdempotencyKey", err)
			}
		})
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("the server saw %d requests, want 0", n)
	}
}

func TestCursorArrivesIntact(t *testing.T) {
	const weird = "a+b/c=d&e%f g?h#i"
	var gotCursors []string
	var mu sync.Mutex
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		cur := r.URL.Query().Get("cursor")
		mu.Lock()
		gotCursors = append(gotCursors, cur)
		mu.Unlock()
		switch cur {
		case "":
			answer(200, `{"data":[{"id":"l1"}],"next_cursor":"`+weird+`"}`)(w, r)
		case weird:
			answer(200, `{"data":[{"id":"l2"}],"next_cursor":null}`)(w, r)
		default:
			answer(400, `{"error":{"code":"invalid_cursor","message":"bad cursor"}}`)(w, r)
		}
	})
	c := newTestClient(t, srv.URL)
	var ids []string
	for page, err := range c.LeadPages(t.Context(), "site_1", ListLeadsOptions{Limit: 1}) {
		if err != nil {
			t.Fatalf("LeadPages: %v", err)
		}
		for _, l := range page.Leads {
			ids = append(ids, l.ID)
		}
	}
	if strings.Join(ids, ",") != "l1,l2" {
		t.Errorf("leads = %v, want l1,l2", ids)
	}
	if len(gotCursors) != 2 || gotCursors[1] != weird {
		t.Errorf("cursors seen by the server = %q, want [\"\" %q]", gotCursors, weird)
	}
	if raw := srv.requests()[1].RawQuery; !strings.Contains(raw, "cursor=a%2Bb%2Fc%3Dd%26e%25f+g%3Fh%23i") {
		t.Errorf("raw query %q does not carry the escaped cursor", raw)
	}
}

func TestCursorBoundToItsSite(t *testing.T) {
	srv := newAPIServer(t, answer(200, `{"data":[],"next_cursor":"opaque"}`))
	c := newTestClient(t, srv.URL)
	page, err := c.ListLeads(t.Context(), "site_a", ListLeadsOptions{})
	if err != nil || page.Next == nil {
		t.Fatalf("ListLeads = %+v, %v", page, err)
	}
	// The cursor survives a JSON round trip (workflow state, heartbeats).
	b, err := json.Marshal(page.Next)
	if err != nil {
		t.Fatal(err)
	}
	var back Cursor
	if err := json.Unmarshal(b, &back); err != nil || back != *page.Next || back.SiteID() != "site_a" {
		t.Fatalf("round trip = %+v, %v", back, err)
	}
	before := len(srv.requests())
	_, err = c.ListLeads(t.Context(), "site_b", ListLeadsOptions{Cursor: &back})
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "cursor" {
		t.Fatalf("another site's cursor: error = %v, want a ValidationError on cursor", err)
	}
	if len(srv.requests()) != before {
		t.Errorf("a request was sent with another site's cursor")
	}
}

func TestLeadPagesStopsOnStuckCursor(t *testing.T) {
	srv := newAPIServer(t, answer(200, `{"data":[{"id":"l"}],"next_cursor":"same"}`))
	c := newTestClient(t, srv.URL)
	var lastErr error
	pages := 0
	for _, err := range c.LeadPages(t.Context(), "s", ListLeadsOptions{}) {
		if err != nil {
			lastErr = err
			break
		}
		pages++
		if pages > 5 {
			t.Fatal("iteration did not stop")
		}
	}
	if !errors.Is(lastErr, ErrCursorStuck) || pages != 2 {
		t.Errorf("pages = %d, err = %v; want 2 pages then ErrCursorStuck", pages, lastErr)
	}
}

func TestAPIErrors(t *testing.T) {
	now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name           string
		status         int
		body           string
		header         map[string]string
		wantCode       string
		wantMessage    string
		wantField      string
		wantRetryAfter time.Duration
		wantTemporary  bool
	}{
		{"validation with field", 422, `{"error":{"code":"invalid_field","message":"slug is taken","field":"slug"}}`, nil, "invalid_field", "slug is taken", "slug", 0, false},
		{"not found", 404, `{"error":{"code":"not_found","message":"no such site"}}`, nil, "not_found", "no such site", "", 0, false},
		{"unauthorized", 401, `{"error":{"code":"unauthorized","message":"missing bearer"}}`, nil, "unauthorized", "missing bearer", "", 0, false},
		{"in flight", 409, `{"error":{"code":"idempotency_in_flight","message":"retry later"}}`, nil, "idempotency_in_flight", "retry later", "", 0, true},
		{"rate limited seconds", 429, `{"error":{"code":"rate_limited","message":"slow down"}}`, map[string]string{"Retry-After": "7"}, "rate_limited", "slow down", "", 7 * time.Second, true},
		{"unavailable HTTP date", 503, `{"error":{"code":"unavailable"}}`, map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, "unavailable", "", "", 90 * time.Second, true},
		{"Retry-After in the past", 503, `{}`, map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, "", "", "", 0, true},
		{"Retry-After garbage", 429, `{}`, map[string]string{"Retry-After": "soon"}, "", "", "", 0, true},
		{"Retry-After ignored on 500", 500, `not json`, map[string]string{"Retry-After": "5"}, "", "", "", 0, true},
		{"HTML body", 502, `<html>bad gateway</html>`, nil, "", "", "", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				answer(tc.status, tc.body)(w, r)
			})
			c := newTestClient(t, srv.URL, WithClock(func() time.Time { return now }))
			_, err := c.Publish(t.Context(), "k", "site_1", true)
			var apiErr *APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("error = %v (%T), want *APIError", err, err)
			}
			if apiErr.Status != tc.status || apiErr.Method != "POST" || apiErr.Path != "/api/v1/sites/site_1/publish" || apiErr.RequestID != "req_123" {
				t.Errorf("APIError = %+v", apiErr)
			}
			if apiErr.Code != tc.wantCode || apiErr.Message != tc.wantMessage || apiErr.Field != tc.wantField {
				t.Errorf("code/message/field = %q/%q/%q, want %q/%q/%q", apiErr.Code, apiErr.Message, apiErr.Field, tc.wantCode, tc.wantMessage, tc.wantField)
			}
			if string(apiErr.Body) != tc.body {
				t.Errorf("Body = %q, want %q", apiErr.Body, tc.body)
			}
			if apiErr.RetryAfter != tc.wantRetryAfter {
				t.Errorf("RetryAfter = %s, want %s", apiErr.RetryAfter, tc.wantRetryAfter)
			}
			if apiErr.Temporary() != tc.wantTemporary {
				t.Errorf("Temporary() = %v, want %v", apiErr.Temporary(), tc.wantTemporary)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("the error text carries the API key: %s", err)
			}
		})
	}
}

func TestErrorBodyIsCapped(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	srv := newAPIServer(t, answer(500, big))
	c := newTestClient(t, srv.URL)
	_, err := c.ListWebhookEndpoints(t.Context())
	var apiErr *APIError
	if !errors.As(err, &apiErr) || len(apiErr.Body) != maxErrorBody {
		t.Fatalf("error body length = %d, want %d (err %v)", len(apiErr.Body), maxErrorBody, err)
	}
}

func TestRedirectIsNotFollowed(t *testing.T) {
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://elsewhere.example.org/", http.StatusFound)
	})
	c := newTestClient(t, srv.URL)
	_, err := c.ListWebhookEndpoints(t.Context())
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusFound {
		t.Fatalf("error = %v, want an APIError with status 302", err)
	}
	if n := len(srv.requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

func TestTransportErrorsHideTheKey(t *testing.T) {
	srv := newAPIServer(t, answer(200, `{}`))
	url := srv.URL
	srv.Close()
	c := newTestClient(t, url)
	_, err := c.Publish(t.Context(), "k", "site_1", true)
	var te *TransportError
	if !errors.As(err, &te) {
		t.Fatalf("error = %v (%T), want *TransportError", err, err)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error carries the API key: %s", err)
	}
}

func TestTimeout(t *testing.T) {
	srv := newHangingServer(t)
	c := newTestClient(t, srv.URL, WithTimeout(50*time.Millisecond))
	_, err := c.ListWebhookEndpoints(t.Context())
	var te *TransportError
	if !errors.As(err, &te) {
		t.Fatalf("error = %v, want a TransportError from the timeout", err)
	}
}

func TestNewClientValidates(t *testing.T) {
	tests := []struct {
		name string
		base string
		key  string
		opts []Option
	}{
		{"empty base", "", testKey, nil},
		{"relative base", "/api", testKey, nil},
		{"ftp base", "ftp://x.example.com", testKey, nil},
		{"base with credentials", "https://u:p@x.example.com", testKey, nil},
		{"base with query", "https://x.example.com?a=b", testKey, nil},
		{"empty key", "https://x.example.com", "", nil},
		{"key with newline", "https://x.example.com", "svc_live_a\nb", nil},
		{"nil http client", "https://x.example.com", testKey, []Option{WithHTTPClient(nil)}},
		{"zero timeout", "https://x.example.com", testKey, []Option{WithTimeout(0)}},
		{"empty user agent", "https://x.example.com", testKey, []Option{WithUserAgent(" ")}},
		{"nil resolver", "https://x.example.com", testKey, []Option{WithResolver(nil)}},
		{"zero breaker", "https://x.example.com", testKey, []Option{WithBreaker(BreakerSettings{})}},
		{"nil clock", "https://x.example.com", testKey, []Option{WithClock(nil)}},
		{"nil tracer", "https://x.example.com", testKey, []Option{WithTracerProvider(nil)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewClient(tc.base, tc.key, tc.opts...)
			if err == nil {
				t.Fatalf("NewClient succeeded: %+v", c)
			}
			if tc.key != "" && strings.Contains(err.Error(), tc.key) {
				t.Errorf("error carries the key: %s", err)
			}
		})
	}
	for base, want := range map[string]string{
		"https://x.example.com":             "https://x.example.com",
		"https://x.example.com/":            "https://x.example.com",
		"https://x.example.com/api/v1":      "https://x.example.com",
		"https://x.example.com/pre/":        "https://x.example.com/pre",
		"http://127.0.0.1:8080/pre/api/v1/": "http://127.0.0.1:8080/pre",
	} {
		c, err := NewClient(base, testKey)
		if err != nil || c.BaseURL() != want {
			t.Errorf("NewClient(%q).BaseURL() = %v, %v; want %q", base, c, err, want)
		}
	}
}

func TestUserAgentAndHTTPClientOptions(t *testing.T) {
	srv := newAPIServer(t, answer(200, `{"data":[]}`))
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	c := newTestClient(t, srv.URL, WithUserAgent("onboarder/2"), WithHTTPClient(hc), WithTimeout(time.Second))
	if _, err := c.ListWebhookEndpoints(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := srv.last(t).Header.Get("User-Agent"); got != "onboarder/2" {
		t.Errorf("User-Agent = %q", got)
	}
	if hc.Timeout != 0 || hc.CheckRedirect != nil {
		t.Errorf("the caller's http.Client was modified: %+v", hc)
	}
}

func TestAgentUpdateJSONRoundTrip(t *testing.T) {
	off := false
	for _, u := range []AgentUpdate{
		{EmbedEnabled: &off},
		{AllowedOrigins: []string{}},
		{DisplayName: new("Ava"), Languages: []string{"en"}, AllowedOrigins: []string{"https://a.example"}},
	} {
		b, err := json.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		var back AgentUpdate
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		b2, _ := json.Marshal(back)
		if string(b) != string(b2) || (u.AllowedOrigins != nil) != (back.AllowedOrigins != nil) {
			t.Errorf("round trip %s -> %s", b, b2)
		}
	}
}
