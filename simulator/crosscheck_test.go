package simulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
)

// The cross-check: the client's validation (package agentsite, which
// siteops and its --dry-run apply before sending) and the simulator's own
// rules (rules.go, origins.go, receivers.go, addresses.go, written apart
// from the client's) must give the same outcome on every case below, and
// that outcome must be the one the contract demands. Each case runs both
// sides: the client's validator, and a raw request through the
// simulator's real handler over HTTP, so the simulator side includes the
// JSON decoding and the error answer.
//
// Where the two sides may differ by design, a case says so with simWant
// and why. No validation case differs today; what does differ by design,
// and so cannot be a row here, is listed in the simulator's package doc
// ("Client and simulator").

type outcome string

const (
	accepted outcome = "accepted"
	refused  outcome = "refused"
)

// crossCase is one input, the outcome the contract demands of the client,
// and the simulator's outcome where it differs by design.
type crossCase struct {
	name    string
	want    outcome
	simWant outcome // "" means the same as want
	why     string  // required when simWant is set
}

func (c crossCase) wantSim(t *testing.T) outcome {
	t.Helper()
	if c.simWant == "" {
		return c.want
	}
	if c.why == "" {
		t.Fatalf("case %q differs by design without a reason", c.name)
	}
	return c.simWant
}

// clientOutcome turns the client validator's answer into an outcome and
// the field of its first error.
func clientOutcome(t *testing.T, err error) (outcome, string) {
	t.Helper()
	if err == nil {
		return accepted, ""
	}
	var ve *agentsite.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("client error %v is not a *agentsite.ValidationError", err)
	}
	return refused, ve.Field
}

// simOutcome sends a raw request and turns the answer into an outcome and
// the field the error names. Any answer but success or a refusal with
// code is a failure of the test.
func (h *harness) simOutcome(t *testing.T, method, path, idem string, body []byte, success int, code string) (outcome, string) {
	t.Helper()
	resp := h.do(t, method, path, keyAll, idem, string(body))
	gotCode, field := resp.errorCode()
	switch {
	case resp.Status == success:
		return accepted, ""
	case resp.Status == http.StatusUnprocessableEntity && gotCode == code:
		return refused, field
	case resp.Status == http.StatusBadRequest && gotCode == "invalid_json":
		return refused, field
	}
	t.Fatalf("%s %s: %d %s, want %d or 422 %s", method, path, resp.Status, resp.Body, success, code)
	return "", ""
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCrossCheckOrigins(t *testing.T) {
	tests := []struct {
		crossCase
		origins []string
		// canonical is the browser's form of an accepted single entry.
		canonical string
	}{
		{crossCase{name: "https origin", want: accepted}, []string{"https://acme.example"}, "https://acme.example"},
		{crossCase{name: "http origin with a port", want: accepted}, []string{"http://localhost:3000"}, "http://localhost:3000"},
		{crossCase{name: "subdomain", want: accepted}, []string{"https://www.acme.example"}, "https://www.acme.example"},
		{crossCase{name: "non-default port", want: accepted}, []string{"https://acme.example:8443"}, "https://acme.example:8443"},
		{crossCase{name: "https on port 80 is not the default", want: accepted}, []string{"https://acme.example:80"}, "https://acme.example:80"},
		{crossCase{name: "explicit default port https", want: accepted}, []string{"https://x.example:443"}, "https://x.example"},
		{crossCase{name: "explicit default port http", want: accepted}, []string{"http://x.example:80"}, "http://x.example"},
		{crossCase{name: "uppercase scheme and host", want: accepted}, []string{"HTTPS://Gen.Example"}, "https://gen.example"},
		{crossCase{name: "mixed case and default port", want: accepted}, []string{"Https://Shop.Example:443"}, "https://shop.example"},
		{crossCase{name: "IDN in punycode", want: accepted}, []string{"https://xn--bcher-kva.example"}, "https://xn--bcher-kva.example"},
		{crossCase{name: "IDN in punycode, upper case", want: accepted}, []string{"https://XN--BCHER-KVA.example"}, "https://xn--bcher-kva.example"},
		{crossCase{name: "single-label host", want: accepted}, []string{"http://intranet"}, "http://intranet"},
		{crossCase{name: "IPv4 literal", want: accepted}, []string{"https://192.0.2.1"}, "https://192.0.2.1"},
		{crossCase{name: "IPv4 literal with port", want: accepted}, []string{"http://192.0.2.1:8080"}, "http://192.0.2.1:8080"},
		{crossCase{name: "IPv6 literal", want: accepted}, []string{"https://[2001:db8::1]"}, "https://[2001:db8::1]"},
		{crossCase{name: "IPv6 literal, long form, default port", want: accepted}, []string{"https://[2001:DB8:0:0::1]:443"}, "https://[2001:db8::1]"},
		{crossCase{name: "IPv6 literal with port", want: accepted}, []string{"https://[2001:db8::1]:8443"}, "https://[2001:db8::1]:8443"},
		{crossCase{name: "IPv4-mapped IPv6 literal", want: accepted}, []string{"https://[::ffff:192.0.2.1]"}, "https://[::ffff:c000:201]"},
		{crossCase{name: "empty list clears", want: accepted}, []string{}, ""},
		{crossCase{name: "two distinct origins", want: accepted}, []string{"https://acme.example", "http://acme.example"}, ""},

		{crossCase{name: "empty", want: refused}, []string{""}, ""},
		{crossCase{name: "path", want: refused}, []string{"https://acme.example/shop"}, ""},
		{crossCase{name: "trailing slash", want: refused}, []string{"https://acme.example/"}, ""},
		{crossCase{name: "query", want: refused}, []string{"https://acme.example?x=1"}, ""},
		{crossCase{name: "empty query", want: refused}, []string{"https://acme.example?"}, ""},
		{crossCase{name: "fragment", want: refused}, []string{"https://acme.example#top"}, ""},
		{crossCase{name: "empty fragment", want: refused}, []string{"https://acme.example#"}, ""},
		{crossCase{name: "userinfo", want: refused}, []string{"https://user@acme.example"}, ""},
		{crossCase{name: "user and password", want: refused}, []string{"https://user:pw@acme.example"}, ""},
		{crossCase{name: "wildcard host", want: refused}, []string{"https://*.acme.example"}, ""},
		{crossCase{name: "trailing wildcard", want: refused}, []string{"https://acme.example*"}, ""},
		{crossCase{name: "wildcard path", want: refused}, []string{"https://acme.example/*"}, ""},
		{crossCase{name: "bare wildcard", want: refused}, []string{"*"}, ""},
		{crossCase{name: "missing scheme", want: refused}, []string{"acme.example"}, ""},
		{crossCase{name: "scheme-relative", want: refused}, []string{"//acme.example"}, ""},
		{crossCase{name: "ftp scheme", want: refused}, []string{"ftp://acme.example"}, ""},
		{crossCase{name: "ws scheme", want: refused}, []string{"wss://acme.example"}, ""},
		{crossCase{name: "mailto", want: refused}, []string{"mailto:a@acme.example"}, ""},
		{crossCase{name: "scheme only", want: refused}, []string{"https://"}, ""},
		{crossCase{name: "empty port", want: refused}, []string{"https://acme.example:"}, ""},
		{crossCase{name: "port 0", want: refused}, []string{"https://acme.example:0"}, ""},
		{crossCase{name: "port 65536", want: refused}, []string{"https://acme.example:65536"}, ""},
		{crossCase{name: "port with leading zero", want: refused}, []string{"https://acme.example:08443"}, ""},
		{crossCase{name: "IDN in Unicode", want: refused}, []string{"https://bücher.example"}, ""},
		{crossCase{name: "percent-encoded host", want: refused}, []string{"https://ex%61mple.com"}, ""},
		{crossCase{name: "underscore", want: refused}, []string{"https://my_site.example"}, ""},
		{crossCase{name: "label starting with a hyphen", want: refused}, []string{"https://-a.example"}, ""},
		{crossCase{name: "empty label", want: refused}, []string{"https://a..example"}, ""},
		{crossCase{name: "trailing dot", want: refused}, []string{"https://acme.example."}, ""},
		{crossCase{name: "label over 63", want: refused}, []string{"https://" + strings.Repeat("a", 64) + ".example"}, ""},
		{crossCase{name: "short IPv4", want: refused}, []string{"https://127.1"}, ""},
		{crossCase{name: "hex IPv4", want: refused}, []string{"https://0x7f.0.0.1"}, ""},
		{crossCase{name: "IPv4 with leading zero", want: refused}, []string{"https://192.168.0.010"}, ""},
		{crossCase{name: "numeric top-level label", want: refused}, []string{"https://acme.123"}, ""},
		{crossCase{name: "IPv6 with zone", want: refused}, []string{"https://[fe80::1%25eth0]"}, ""},
		{crossCase{name: "IPv4 in brackets", want: refused}, []string{"https://[192.0.2.1]"}, ""},
		{crossCase{name: "unclosed bracket", want: refused}, []string{"https://[2001:db8::1"}, ""},
		{crossCase{name: "whitespace", want: refused}, []string{"https://acme.example "}, ""},
		{crossCase{name: "backslash", want: refused}, []string{`https://acme.example\`}, ""},
		{crossCase{name: "same origin twice", want: refused}, []string{"https://acme.example", "https://acme.example"}, ""},
		{crossCase{name: "one origin in two spellings", want: refused}, []string{"https://acme.example", "HTTPS://Acme.Example:443"}, ""},
		{crossCase{name: "second entry bad", want: refused}, []string{"https://acme.example", "https://acme.example/"}, ""},
	}
	h := newHarness(t, testConfig())
	site := h.createSite(t, "acme")
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client, clientField := clientOutcome(t, agentsite.ValidateOrigins(tc.origins))
			body := mustJSON(t, map[string]any{"allowed_origins": tc.origins})
			sim, simField := h.simOutcome(t, "PATCH", "/api/v1/sites/"+site+"/agent", fmt.Sprintf("cross-origin-%d", i), body, http.StatusOK, "invalid_origin")
			if client != tc.want || sim != tc.wantSim(t) {
				t.Fatalf("%q: client %s, simulator %s; want client %s, simulator %s", tc.origins, client, sim, tc.want, tc.wantSim(t))
			}
			if client == refused && sim == refused && clientField != simField {
				t.Errorf("%q: client blames %s, simulator %s", tc.origins, clientField, simField)
			}
			if tc.canonical != "" {
				clientForm, err := agentsite.CanonicalOrigin(tc.origins[0])
				simForm, problem := checkOrigin(tc.origins[0])
				if err != nil || problem != "" || clientForm != tc.canonical || simForm != tc.canonical {
					t.Errorf("canonical form of %q: client %q (%v), simulator %q (%s); want %q", tc.origins[0], clientForm, err, simForm, problem, tc.canonical)
				}
			}
		})
	}
	// The simulator stores entries as sent: the contract does not say the
	// service rewrites them.
	r := h.do(t, "PATCH", "/api/v1/sites/"+site+"/agent", keyAll, "cross-origin-stored", `{"allowed_origins":["HTTPS://Gen.Example:443"]}`)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"allowed_origins":["HTTPS://Gen.Example:443"]`) {
		t.Errorf("stored origins: %d %s", r.Status, r.Body)
	}
}

func TestCrossCheckKnowledgeText(t *testing.T) {
	tests := []struct {
		crossCase
		text string
		raw  string // a raw JSON body, for text the client cannot encode
	}{
		{crossCase: crossCase{name: "empty", want: refused}, text: ""},
		{crossCase: crossCase{name: "4 code points", want: refused}, text: "abcd"},
		{crossCase: crossCase{name: "5 code points", want: accepted}, text: "abcde"},
		{crossCase: crossCase{name: "4 code points in 12 bytes", want: refused}, text: "日本語字"},
		{crossCase: crossCase{name: "5 code points in 15 bytes", want: accepted}, text: "日本語日本"},
		{crossCase: crossCase{name: "5 code points of 4 bytes", want: accepted}, text: "😀😀😀😀😀"},
		{crossCase: crossCase{name: "4 emoji are 4 code points, not 8 UTF-16 units", want: refused}, text: "😀😀😀😀"},
		{crossCase: crossCase{name: "combining marks count on their own", want: accepted}, text: "e\u0301e\u0301e"},
		{crossCase: crossCase{name: "200,000 code points", want: accepted}, text: strings.Repeat("a", 200_000)},
		{crossCase: crossCase{name: "200,000 multi-byte code points", want: accepted}, text: strings.Repeat("é", 200_000)},
		{crossCase: crossCase{name: "200,001 code points", want: refused}, text: strings.Repeat("a", 200_001)},
		{crossCase: crossCase{name: "200,001 multi-byte code points", want: refused}, text: strings.Repeat("語", 200_001)},
		// The client refuses invalid UTF-8 before sending (encoding/json
		// would replace it); the simulator refuses a body that is not UTF-8
		// with 400 invalid_json. Same outcome, different layer.
		{crossCase: crossCase{name: "invalid UTF-8", want: refused}, text: "abcde\xff", raw: "{\"name\":\"n\",\"text\":\"abcde\xff\"}"},
	}
	h := newHarness(t, testConfig())
	site := h.createSite(t, "acme")
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client, _ := clientOutcome(t, agentsite.ValidateKnowledgeText(tc.text))
			body := []byte(tc.raw)
			if tc.raw == "" {
				body = mustJSON(t, map[string]string{"name": "n", "text": tc.text})
			}
			sim, _ := h.simOutcome(t, "POST", "/api/v1/sites/"+site+"/knowledge", fmt.Sprintf("cross-knowledge-%d", i), body, http.StatusCreated, "invalid_text")
			if client != tc.want || sim != tc.wantSim(t) {
				t.Fatalf("client %s, simulator %s; want client %s, simulator %s", client, sim, tc.want, tc.wantSim(t))
			}
		})
	}
}

func TestCrossCheckEventTypes(t *testing.T) {
	all := []string{"site.published", "site.unpublished", "lead.created", "conversation.started", "conversation.message.created", "knowledge.ready", "broadcast.sent"}
	tests := []struct {
		crossCase
		events []string
	}{
		{crossCase{name: "all seven together", want: accepted}, all},
		{crossCase{name: "none", want: refused}, []string{}},
		{crossCase{name: "null", want: refused}, nil},
		{crossCase{name: "domain.activated is retired", want: refused}, []string{"domain.activated"}},
		{crossCase{name: "retired beside a good one", want: refused}, []string{"lead.created", "domain.activated"}},
		{crossCase{name: "unknown type", want: refused}, []string{"lead.deleted"}},
		{crossCase{name: "unknown prefix", want: refused}, []string{"site"}},
		{crossCase{name: "wildcard", want: refused}, []string{"*"}},
		{crossCase{name: "types are case-sensitive", want: refused}, []string{"Lead.Created"}},
		{crossCase{name: "empty string", want: refused}, []string{""}},
		{crossCase{name: "padded", want: refused}, []string{" lead.created"}},
		{crossCase{name: "twice", want: refused}, []string{"lead.created", "lead.created"}},
	}
	for _, e := range all {
		tests = append(tests, struct {
			crossCase
			events []string
		}{crossCase{name: e, want: accepted}, []string{e}})
	}
	h := newHarness(t, testConfig())
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client, _ := clientOutcome(t, agentsite.ValidateEventTypes(tc.events))
			body := mustJSON(t, map[string]any{"url": "https://hooks.example.org/in", "events": tc.events})
			sim, simField := h.simOutcome(t, "POST", "/api/v1/webhook-endpoints", fmt.Sprintf("cross-events-%d", i), body, http.StatusCreated, "invalid_events")
			if client != tc.want || sim != tc.wantSim(t) {
				t.Fatalf("%q: client %s, simulator %s; want client %s, simulator %s", tc.events, client, sim, tc.want, tc.wantSim(t))
			}
			if sim == refused && simField != "events" {
				t.Errorf("simulator blames %q, want events", simField)
			}
		})
	}

	// Both tables hold exactly the contract's types: the client's list of
	// subscribable types is the simulator's catalogue less the retired.
	var simTypes []string
	for name, e := range eventCatalogue {
		if !e.retired {
			simTypes = append(simTypes, name)
		}
	}
	var clientTypes []string
	for _, e := range webhook.EventTypes() {
		clientTypes = append(clientTypes, string(e))
	}
	slices.Sort(simTypes)
	slices.Sort(clientTypes)
	sortedAll := slices.Sorted(slices.Values(all))
	if !slices.Equal(simTypes, sortedAll) || !slices.Equal(clientTypes, sortedAll) {
		t.Errorf("subscribable types: simulator %q, client %q; the contract %q", simTypes, clientTypes, sortedAll)
	}
	if !eventCatalogue["domain.activated"].retired || !webhook.DomainActivated.Retired() {
		t.Error("domain.activated is not retired on both sides")
	}
	// Row for row, the simulator's table says what the client's
	// (webhook.Catalogue) says: the type, when it is emitted, retired.
	if len(eventCatalogue) != len(webhook.Catalogue) {
		t.Errorf("the simulator's catalogue has %d types, webhook.Catalogue %d", len(eventCatalogue), len(webhook.Catalogue))
	}
	for _, row := range webhook.Catalogue {
		sim, ok := eventCatalogue[string(row.Type)]
		switch {
		case !ok:
			t.Errorf("%s is in webhook.Catalogue, not in the simulator's", row.Type)
		case sim.retired != row.Retired:
			t.Errorf("%s: retired %v in the simulator, %v in webhook.Catalogue", row.Type, sim.retired, row.Retired)
		case !sim.retired && sim.emittedWhen != row.EmittedWhen:
			t.Errorf("%s: emitted when %q in the simulator, %q in webhook.Catalogue", row.Type, sim.emittedWhen, row.EmittedWhen)
		}
	}
}

// crossResolver is the DNS both sides see.
func crossResolver(h *harness) {
	for host, addrs := range map[string][]string{
		"hooks.example.org":     {"93.184.215.14"},
		"v6.example.org":        {"2606:2800:21f:cb07:6820:80da:af6b:8b2c"},
		"both.example.org":      {"93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"},
		"private.example.org":   {"192.168.1.10"},
		"ten.example.org":       {"10.1.2.3"},
		"mixed.example.org":     {"93.184.215.14", "10.0.0.5"},
		"cgnat.example.org":     {"100.64.1.1"},
		"metadata.example.org":  {"169.254.169.254"},
		"loop6.example.org":     {"::1"},
		"ula.example.org":       {"fd00::1"},
		"mapped.example.org":    {"::ffff:127.0.0.1"},
		"nat64.example.org":     {"64:ff9b::a00:1"},
		"sixtofour.example.org": {"2002:c0a8:101::1"},
		"empty.example.org":     {},
	} {
		h.resolver.set(host, addrs...)
	}
}

func TestCrossCheckWebhookURLs(t *testing.T) {
	tests := []struct {
		crossCase
		url string
	}{
		{crossCase{name: "https on a public host", want: accepted}, "https://hooks.example.org/siteops/webhooks"},
		{crossCase{name: "a query is allowed", want: accepted}, "https://hooks.example.org/in?source=agent-site"},
		{crossCase{name: "no path", want: accepted}, "https://hooks.example.org"},
		{crossCase{name: "explicit port 443 is not custom", want: accepted}, "https://hooks.example.org:443/in"},
		{crossCase{name: "uppercase scheme", want: accepted}, "HTTPS://hooks.example.org/in"},
		{crossCase{name: "public IPv6 host", want: accepted}, "https://v6.example.org/in"},
		{crossCase{name: "public on both families", want: accepted}, "https://both.example.org/in"},
		{crossCase{name: "public IPv4 literal", want: accepted}, "https://93.184.215.14/in"},
		{crossCase{name: "public IPv6 literal", want: accepted}, "https://[2606:4700:4700::1111]/in"},

		{crossCase{name: "http", want: refused}, "http://hooks.example.org/in"},
		{crossCase{name: "ftp", want: refused}, "ftp://hooks.example.org/in"},
		{crossCase{name: "no scheme", want: refused}, "hooks.example.org/in"},
		{crossCase{name: "opaque", want: refused}, "https:hooks.example.org"},
		{crossCase{name: "no host", want: refused}, "https:///in"},
		{crossCase{name: "username", want: refused}, "https://user@hooks.example.org/in"},
		{crossCase{name: "empty username", want: refused}, "https://@hooks.example.org/in"},
		{crossCase{name: "username and password", want: refused}, "https://user:pw@hooks.example.org/in"},
		{crossCase{name: "password only", want: refused}, "https://:pw@hooks.example.org/in"},
		{crossCase{name: "fragment", want: refused}, "https://hooks.example.org/in#frag"},
		{crossCase{name: "empty fragment", want: refused}, "https://hooks.example.org/in#"},
		{crossCase{name: "custom port", want: refused}, "https://hooks.example.org:8443/in"},
		{crossCase{name: "port 80 on https", want: refused}, "https://hooks.example.org:80/in"},
		{crossCase{name: "443 with a leading zero", want: refused}, "https://hooks.example.org:0443/in"},
		{crossCase{name: "empty port", want: refused}, "https://hooks.example.org:/in"},
		{crossCase{name: "localhost", want: refused}, "https://localhost/in"},
		{crossCase{name: "LOCALHOST.", want: refused}, "https://LOCALHOST./in"},
		{crossCase{name: "a name under localhost", want: refused}, "https://api.localhost/in"},
		{crossCase{name: "127.0.0.1", want: refused}, "https://127.0.0.1/in"},
		{crossCase{name: "10/8", want: refused}, "https://10.1.2.3/in"},
		{crossCase{name: "192.168/16", want: refused}, "https://192.168.1.1/in"},
		{crossCase{name: "172.16/12", want: refused}, "https://172.16.0.1/in"},
		{crossCase{name: "169.254 metadata", want: refused}, "https://169.254.169.254/in"},
		{crossCase{name: "100.64/10", want: refused}, "https://100.64.0.1/in"},
		{crossCase{name: "0.0.0.0", want: refused}, "https://0.0.0.0/in"},
		{crossCase{name: "::1", want: refused}, "https://[::1]/in"},
		{crossCase{name: "fc00::", want: refused}, "https://[fc00::1]/in"},
		{crossCase{name: "fe80:: with zone", want: refused}, "https://[fe80::1%25eth0]/in"},
		{crossCase{name: "IPv4-mapped loopback", want: refused}, "https://[::ffff:127.0.0.1]/in"},
		{crossCase{name: "name resolving to 192.168", want: refused}, "https://private.example.org/in"},
		{crossCase{name: "name resolving to 10/8", want: refused}, "https://ten.example.org/in"},
		{crossCase{name: "name resolving to public and private", want: refused}, "https://mixed.example.org/in"},
		{crossCase{name: "name resolving to CGNAT", want: refused}, "https://cgnat.example.org/in"},
		{crossCase{name: "name resolving to link-local metadata", want: refused}, "https://metadata.example.org/in"},
		{crossCase{name: "name resolving to ::1", want: refused}, "https://loop6.example.org/in"},
		{crossCase{name: "name resolving to ULA", want: refused}, "https://ula.example.org/in"},
		{crossCase{name: "name resolving to mapped loopback", want: refused}, "https://mapped.example.org/in"},
		{crossCase{name: "name resolving to NAT64 of 10/8", want: refused}, "https://nat64.example.org/in"},
		{crossCase{name: "name resolving to 6to4 of 192.168", want: refused}, "https://sixtofour.example.org/in"},
		{crossCase{name: "name resolving to nothing", want: refused}, "https://empty.example.org/in"},
		{crossCase{name: "name that does not resolve", want: refused}, "https://unknown.example.org/in"},
	}
	cfg := testConfig()
	cfg.AllowLoopbackReceivers = false // the contract's rules, as the real service
	h := newHarness(t, cfg)
	crossResolver(h)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client, clientField := clientOutcome(t, agentsite.ValidateWebhookURL(t.Context(), tc.url, h.resolver))
			body := mustJSON(t, map[string]any{"url": tc.url, "events": []string{"lead.created"}})
			sim, simField := h.simOutcome(t, "POST", "/api/v1/webhook-endpoints", fmt.Sprintf("cross-url-%d", i), body, http.StatusCreated, "invalid_url")
			if client != tc.want || sim != tc.wantSim(t) {
				t.Fatalf("%s: client %s, simulator %s; want client %s, simulator %s", tc.url, client, sim, tc.want, tc.wantSim(t))
			}
			if client == refused && (clientField != "url" || simField != "url") {
				t.Errorf("fields: client %q, simulator %q; want url", clientField, simField)
			}
		})
	}
}

// TestCrossCheckLoopbackTestMode holds the test mode of both sides
// (agentsite.WithLoopbackReceivers, Config.AllowLoopbackReceivers) to the
// same rules: http and any port on a loopback host, nothing else relaxed.
func TestCrossCheckLoopbackTestMode(t *testing.T) {
	tests := []struct {
		crossCase
		url string
	}{
		{crossCase{name: "http on 127.0.0.1 with a port", want: accepted}, "http://127.0.0.1:8088/webhooks/v2"},
		{crossCase{name: "http on 127.1.2.3", want: accepted}, "http://127.1.2.3:9/in"},
		{crossCase{name: "localhost", want: accepted}, "http://localhost:9/webhooks"},
		{crossCase{name: "https on ::1", want: accepted}, "https://[::1]:8443/in"},
		{crossCase{name: "mapped loopback", want: accepted}, "http://[::ffff:127.0.0.1]:8080/in"},
		{crossCase{name: "public https still fine", want: accepted}, "https://hooks.example.org/x"},
		{crossCase{name: "credentials on loopback", want: refused}, "http://u:p@127.0.0.1:8088/x"},
		{crossCase{name: "fragment on loopback", want: refused}, "http://127.0.0.1:8088/x#f"},
		{crossCase{name: "ftp on loopback", want: refused}, "ftp://127.0.0.1/x"},
		{crossCase{name: "private is still private", want: refused}, "http://10.0.0.1:8088/x"},
		{crossCase{name: "a name under localhost is not loopback", want: refused}, "http://api.localhost:8080/x"},
		{crossCase{name: "http on a public host", want: refused}, "http://hooks.example.org/x"},
		{crossCase{name: "custom port on a public host", want: refused}, "https://hooks.example.org:8443/x"},
	}
	h := newHarness(t, testConfig())
	crossResolver(h)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client, _ := clientOutcome(t, agentsite.ValidateReceiverURL(t.Context(), tc.url, h.resolver, true))
			body := mustJSON(t, map[string]any{"url": tc.url, "events": []string{"lead.created"}})
			sim, _ := h.simOutcome(t, "POST", "/api/v1/webhook-endpoints", fmt.Sprintf("cross-loop-%d", i), body, http.StatusCreated, "invalid_url")
			if client != tc.want || sim != tc.wantSim(t) {
				t.Fatalf("%s: client %s, simulator %s; want client %s, simulator %s", tc.url, client, sim, tc.want, tc.wantSim(t))
			}
		})
	}
}

// TestCrossCheckAddresses holds the two non-public address tables to the
// same verdict on each address: the client's IsPublicAddr, the
// simulator's own table, and the simulator's registration answer for the
// address as a literal host and as a name resolving to it.
func TestCrossCheckAddresses(t *testing.T) {
	public := []string{
		"93.184.215.14", "8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.1", "172.15.255.255", "172.32.0.1",
		"192.0.1.255", "192.169.0.1", "198.17.255.255", "198.20.0.1", "223.255.255.255",
		"2606:4700:4700::1111", "2001:200::1", "2a00:1450:4001:81b::200e",
		"::ffff:93.184.215.14", "64:ff9b::5db8:d70e", "2002:5db8:d70e::1",
	}
	private := []string{
		// IPv4
		"0.0.0.0", "0.1.2.3", "10.0.0.1", "10.255.255.255", "100.64.0.1", "100.127.255.255", "127.0.0.1", "127.255.255.254",
		"169.254.0.1", "169.254.169.254", "172.16.0.1", "172.31.255.255", "192.0.0.8", "192.0.0.9", "192.0.2.1",
		"192.31.196.1", "192.52.193.1", "192.88.99.1", "192.168.0.1", "192.168.255.255", "192.175.48.1",
		"198.18.0.1", "198.19.255.255", "198.51.100.1", "203.0.113.1", "224.0.0.1", "239.255.255.250",
		"240.0.0.1", "255.255.255.255",
		// IPv6
		"::", "::1", "::127.0.0.1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254",
		"64:ff9b::7f00:1", "64:ff9b::a00:1", "64:ff9b:1::1", "100::1", "2001::1", "2001:2::1", "2001:db8::1",
		"2002:7f00:1::", "2002:c0a8:101::", "2620:4f:8000::1", "3fff::1", "5f00::1",
		"fc00::1", "fd12:3456::1", "fe80::1", "fe80::1%eth0", "fec0::1", "ff02::1", "4000::1", "1::1",
		"2606:4700:4700::1111%eth0",
	}
	cfg := testConfig()
	cfg.AllowLoopbackReceivers = false
	h := newHarness(t, cfg)
	check := func(addr string, want bool) {
		t.Run(addr, func(t *testing.T) {
			a := netip.MustParseAddr(addr)
			if got := agentsite.IsPublicAddr(a); got != want {
				t.Errorf("client IsPublicAddr(%s) = %v, want %v", addr, got, want)
			}
			if got, why := addressVerdict(a); got != want || (!got && why == "") {
				t.Errorf("simulator addressVerdict(%s) = %v %q, want %v", addr, got, why, want)
			}
			wantOutcome := refused
			if want {
				wantOutcome = accepted
			}
			host := addr
			if a.Is6() {
				host = "[" + strings.Replace(addr, "%", "%25", 1) + "]"
			}
			name := "addr-" + strings.NewReplacer(".", "-", ":", "-", "%", "-").Replace(addr) + ".example.org"
			h.resolver.set(name, a.String())
			for _, u := range []string{"https://" + host + "/in", "https://" + name + "/in"} {
				client, _ := clientOutcome(t, agentsite.ValidateWebhookURL(t.Context(), u, h.resolver))
				body := mustJSON(t, map[string]any{"url": u, "events": []string{"lead.created"}})
				sim, _ := h.simOutcome(t, "POST", "/api/v1/webhook-endpoints", "cross-addr-"+u, body, http.StatusCreated, "invalid_url")
				if client != wantOutcome || sim != wantOutcome {
					t.Errorf("%s: client %s, simulator %s; want %s", u, client, sim, wantOutcome)
				}
			}
		})
	}
	for _, addr := range public {
		check(addr, true)
	}
	for _, addr := range private {
		check(addr, false)
	}
	if agentsite.IsPublicAddr(netip.Addr{}) || publicAddress(netip.Addr{}) {
		t.Error("the zero Addr is public on one side")
	}
}
