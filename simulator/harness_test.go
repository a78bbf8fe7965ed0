package simulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/internal/siteopstest"
)

const (
	keyAll   = "svc_live_all"
	keyRead  = "svc_live_sites_read"
	keyOther = "svc_live_other_service"
	admin    = "sim-admin"
)

// tableResolver answers from a table that a test may change.
type tableResolver struct {
	mu sync.Mutex
	m  map[string][]string
}

func (r *tableResolver) set(host string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[host] = addrs
}

func (r *tableResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	addrs, ok := r.m[host]
	if !ok {
		return nil, fmt.Errorf("lookup %s: no such host", host)
	}
	out := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		out[i] = netip.MustParseAddr(a)
	}
	return out, nil
}

type harness struct {
	sim      *Simulator
	srv      *httptest.Server
	client   *agentsite.Client
	resolver *tableResolver
}

func testConfig() Config {
	keys := map[string][]string{
		keyAll:   {ScopeAll},
		keyRead:  {ScopeSitesRead},
		keyOther: {ScopeAll},
	}
	for _, sc := range AllScopes() {
		keys["svc_live_only_"+sc] = []string{sc}
	}
	return Config{
		Keys:                   keys,
		AdminToken:             admin,
		AllowLoopbackReceivers: true,
		TimeScale:              1000,
		KnowledgeDelay:         time.Second, // 1 ms at this scale
		Seed:                   7,
	}
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	res := &tableResolver{m: map[string][]string{"hooks.example.org": {"93.184.215.14"}}}
	if cfg.Resolver == nil {
		cfg.Resolver = res
	}
	sim, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		srv.Close()
		sim.Close()
	})
	c, err := agentsite.NewClient(srv.URL, keyAll, agentsite.WithResolver(res))
	if err != nil {
		t.Fatal(err)
	}
	return &harness{sim: sim, srv: srv, client: c, resolver: res}
}

// rawResponse is an answer read whole.
type rawResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r rawResponse) errorCode() (code, field string) {
	var eb struct {
		Error struct{ Code, Field string } `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &eb)
	return eb.Error.Code, eb.Error.Field
}

// do sends a raw request. token "" sends no Authorization header; idem ""
// sends no Idempotency-Key.
func (h *harness) do(t *testing.T, method, path, token, idem, body string) rawResponse {
	t.Helper()
	auth := ""
	if token != "" {
		auth = "Bearer " + token
	}
	return h.doAuth(t, method, path, auth, idem, body)
}

// doAuth sends a raw request with the given Authorization value ("" for
// none).
func (h *harness) doAuth(t *testing.T, method, path, auth, idem, body string) rawResponse {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, h.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return rawResponse{resp.StatusCode, resp.Header, b}
}

func (h *harness) admin(t *testing.T, method, path, body string) rawResponse {
	t.Helper()
	return h.do(t, method, path, admin, "", body)
}

// createSite makes a site through the client and returns its id.
func (h *harness) createSite(t *testing.T, slug string) string {
	t.Helper()
	cs, err := h.client.CreateSite(t.Context(), "create/"+slug, agentsite.NewSite{
		Title: "Acme " + slug, Slug: slug, Type: "business", Template: "minimal",
		Content:     agentsite.SiteContent{Headline: "Anvils", Subheadline: "Since 1949", About: "We make anvils."},
		PersonaMode: "assistant", Languages: []string{"en"},
	})
	if err != nil {
		t.Fatalf("CreateSite(%s): %v", slug, err)
	}
	return cs.Site.ID
}

// receiver is an httptest webhook receiver that verifies every delivery.
type receiver struct {
	*httptest.Server
	mu        sync.Mutex
	secrets   []string
	got       []receivedDelivery
	status    func(n int) int // answer for the n-th delivery (from 1)
	verifyErr []error
}

type receivedDelivery struct {
	Header   http.Header
	Body     []byte
	Envelope webhook.Envelope
	At       time.Time
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	rc := &receiver{status: func(int) int { return http.StatusOK }}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		secrets := append([]string(nil), rc.secrets...)
		rc.mu.Unlock()
		env, _, err := webhook.VerifyEnvelope(body, r.Header.Get("svc-signature"), secrets, time.Now(), webhook.DefaultWindow)
		rc.mu.Lock()
		if err != nil {
			rc.verifyErr = append(rc.verifyErr, err)
		}
		rc.got = append(rc.got, receivedDelivery{Header: r.Header.Clone(), Body: body, Envelope: env, At: time.Now()})
		n := len(rc.got)
		status := rc.status
		rc.mu.Unlock()
		w.WriteHeader(status(n))
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) setStatus(f func(n int) int) {
	rc.mu.Lock()
	rc.status = f
	rc.mu.Unlock()
}

func (rc *receiver) deliveries() []receivedDelivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]receivedDelivery(nil), rc.got...)
}

func (rc *receiver) errors() []error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]error(nil), rc.verifyErr...)
}

// register creates an endpoint for rc and lets rc verify with its secret.
func (h *harness) register(t *testing.T, rc *receiver, path string, events ...string) string {
	t.Helper()
	created, err := h.client.CreateWebhookEndpoint(t.Context(), "register"+path+strings.Join(events, ","), agentsite.NewWebhookEndpoint{URL: rc.URL + path, Events: events})
	var ve *agentsite.ValidationError
	if err != nil && errors.As(err, &ve) {
		// The client applies the production URL rules; loopback receivers are
		// registered over raw HTTP in test mode.
		body, _ := json.Marshal(map[string]any{"url": rc.URL + path, "events": events})
		resp := h.do(t, "POST", "/api/v1/webhook-endpoints", keyAll, "register-raw"+path+strings.Join(events, ","), string(body))
		if resp.Status != http.StatusCreated {
			t.Fatalf("registering %s: %d %s", rc.URL, resp.Status, resp.Body)
		}
		var out struct {
			Data struct{ ID, Secret string } `json:"data"`
		}
		if err := json.Unmarshal(resp.Body, &out); err != nil {
			t.Fatal(err)
		}
		rc.mu.Lock()
		rc.secrets = append(rc.secrets, out.Data.Secret)
		rc.mu.Unlock()
		return out.Data.ID
	}
	if err != nil {
		t.Fatalf("CreateWebhookEndpoint: %v", err)
	}
	rc.mu.Lock()
	rc.secrets = append(rc.secrets, created.Secret.Reveal())
	rc.mu.Unlock()
	return created.Endpoint.ID
}

// waitFor polls cond until it holds, failing the test after 10 s. The
// simulator's tests wait on it in several files; it is
// siteopstest.Eventually with their deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	siteopstest.Eventually(t, 10*time.Second, what, cond)
}

func mustDecode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %.200s: %v", b, err)
	}
}
