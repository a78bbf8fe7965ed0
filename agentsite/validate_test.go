package agentsite

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// fakeResolver answers from a table and fails for names it does not know.
type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	addrs, ok := f[host]
	if !ok {
		return nil, fmt.Errorf("lookup %s: no such host", host)
	}
	out := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		out[i] = netip.MustParseAddr(a)
	}
	return out, nil
}

func publicResolver() fakeResolver {
	return fakeResolver{
		"hooks.example.org": {"93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"},
	}
}

func TestValidateOrigin(t *testing.T) {
	tests := []struct {
		origin string
		ok     bool
	}{
		{"https://example.com", true},
		{"https://www.example.com", true},
		{"http://localhost:3000", true},
		{"https://example.com:8443", true},
		{"https://[2001:db8::1]:8443", true},
		{"https://xn--bcher-kva.example", true},
		{"", false},
		{"example.com", false},
		{"//example.com", false},
		{"https://example.com/", false},
		{"https://example.com/path", false},
		{"https://example.com?x=1", false},
		{"https://example.com?", false},
		{"https://example.com#top", false},
		{"https://user@example.com", false},
		{"https://user:pw@example.com", false},
		{"https://*.example.com", false},
		{"https://example.*", false},
		{"*", false},
		{"ftp://example.com", false},
		{"mailto:a@example.com", false},
		{"https://", false},
		{"https://example.com:", false},
		{"https://example.com:0", false},
		{"https://example.com:65536", false},
		{"https://example.com:08443", false},
		// The contract's "scheme, hostname and an optional port" admits a
		// written default port and any letter case (package doc).
		{"https://example.com:443", true},
		{"http://example.com:80", true},
		{"https://example.com:80", true},
		{"http://example.com:443", true},
		{"https://Example.com", true},
		{"HTTPS://example.com", true},
		{"HTTPS://Gen.Example", true},
		{"https://XN--BCHER-KVA.EXAMPLE", true},
		{"https://192.0.2.1", true},
		{"http://192.0.2.1:8080", true},
		{"https://[2001:DB8::1]", true},
		{"https://[::ffff:192.0.2.1]", true},
		{"https://intranet", true},
		{"https://example.com ", false},
		{"https://exa mple.com", false},
		// A host is a host name, a dotted-quad IPv4 address or a bracketed
		// IPv6 address.
		{"https://bücher.example", false},
		{"https://ex%61mple.com", false},
		{"https://my_site.example", false},
		{"https://-a.example", false},
		{"https://a-.example", false},
		{"https://a..example", false},
		{"https://example.com.", false},
		{"https://" + strings.Repeat("a", 64) + ".example", false},
		{"https://127.1", false},
		{"https://0x7f.0.0.1", false},
		{"https://192.168.0.010", false},
		{"https://1.2.3.4.5", false},
		{"https://example.123", false},
		{"https://[fe80::1%25eth0]", false},
		{"https://[192.0.2.1]", false},
		{"https://[2001:db8::1", false},
		{"https://example.com\\", false},
	}
	for _, tc := range tests {
		t.Run(tc.origin, func(t *testing.T) {
			err := ValidateOrigin("allowed_origins[0]", tc.origin)
			if (err == nil) != tc.ok {
				t.Fatalf("ValidateOrigin(%q) = %v, want ok=%v", tc.origin, err, tc.ok)
			}
			var ve *ValidationError
			if err != nil && (!errors.As(err, &ve) || ve.Field != "allowed_origins[0]" || ve.Reason == "") {
				t.Errorf("error %v does not name the field and a reason", err)
			}
		})
	}
}

func TestCanonicalOrigin(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://example.com", "https://example.com"},
		{"HTTPS://Gen.Example", "https://gen.example"},
		{"https://x.example:443", "https://x.example"},
		{"http://x.example:80", "http://x.example"},
		{"http://x.example:443", "http://x.example:443"},
		{"https://x.example:8443", "https://x.example:8443"},
		{"https://XN--BCHER-KVA.example", "https://xn--bcher-kva.example"},
		{"https://[2001:DB8:0:0::1]:443", "https://[2001:db8::1]"},
		{"https://[::FFFF:192.0.2.1]", "https://[::ffff:c000:201]"},
		{"http://LOCALHOST:3000", "http://localhost:3000"},
	}
	for _, tc := range tests {
		got, err := CanonicalOrigin(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("CanonicalOrigin(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := CanonicalOrigin("https://example.com/"); err == nil {
		t.Error("CanonicalOrigin accepted an origin with a path")
	}
	got, err := CanonicalOrigins([]string{"https://A.example:443", "http://b.example"})
	if err != nil || strings.Join(got, " ") != "https://a.example http://b.example" {
		t.Errorf("CanonicalOrigins = %q, %v", got, err)
	}
	if got, err := CanonicalOrigins([]string{}); err != nil || got == nil || len(got) != 0 {
		t.Errorf("CanonicalOrigins([]) = %#v, %v; want an empty, non-nil list (it clears the list)", got, err)
	}
}

func TestValidateOriginsReportsEveryEntry(t *testing.T) {
	err := ValidateOrigins([]string{"https://ok.example", "https://a.example/", "https://ok.example", "*"})
	msg := fmt.Sprint(err)
	for _, want := range []string{"allowed_origins[1]", "allowed_origins[2]", "allowed_origins[3]"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %s", msg, want)
		}
	}
	if strings.Contains(msg, "allowed_origins[0]") {
		t.Errorf("error %q names the valid entry", msg)
	}
	// Spellings of one origin are the same origin listed twice.
	err = ValidateOrigins([]string{"https://shop.example", "HTTPS://Shop.Example:443"})
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "allowed_origins[1]" || !strings.Contains(ve.Reason, "twice") {
		t.Errorf("error = %v, want allowed_origins[1] listed twice", err)
	}
	if err := ValidateOrigins([]string{"https://shop.example", "http://shop.example", "https://shop.example:8443"}); err != nil {
		t.Errorf("distinct origins refused: %v", err)
	}
}

func TestUpdateAgentRefusesBadOriginsBeforeSending(t *testing.T) {
	srv := newAPIServer(t, answer(200, `{}`))
	c := newTestClient(t, srv.URL)
	_, err := c.UpdateAgent(t.Context(), "k", "site_1", AgentUpdate{AllowedOrigins: []string{"https://example.com/"}})
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "allowed_origins[0]" {
		t.Fatalf("error = %v, want a ValidationError on allowed_origins[0]", err)
	}
	if _, err := c.UpdateAgent(t.Context(), "k", "site_1", AgentUpdate{}); !errors.As(err, &ve) {
		t.Fatalf("empty update: error = %v, want a ValidationError", err)
	}
	if _, err := c.SetEmbed(t.Context(), "k", "", true); !errors.As(err, &ve) || ve.Field != "site_id" {
		t.Fatalf("empty site id: error = %v, want a ValidationError on site_id", err)
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("server saw %d requests, want 0", n)
	}
}

func TestValidateKnowledgeText(t *testing.T) {
	tests := []struct {
		name string
		text string
		ok   bool
	}{
		{"empty", "", false},
		{"4 ASCII", "abcd", false},
		{"5 ASCII", "abcde", true},
		{"5 code points of 4 bytes", "😀😀😀😀😀", true},
		{"4 code points in 12 bytes", "日本語字", false},
		{"200000 code points", strings.Repeat("a", MaxKnowledgeText), true},
		{"200000 multi-byte code points", strings.Repeat("é", MaxKnowledgeText), true},
		{"200001 code points", strings.Repeat("a", MaxKnowledgeText+1), false},
		{"invalid UTF-8", "abcde\xff", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateKnowledgeText(tc.text)
			if (err == nil) != tc.ok {
				t.Fatalf("ValidateKnowledgeText = %v, want ok=%v", err, tc.ok)
			}
			var ve *ValidationError
			if err != nil && (!errors.As(err, &ve) || ve.Field != "text") {
				t.Errorf("error %v does not name the field text", err)
			}
		})
	}
	srv := newAPIServer(t, answer(201, `{"data":{"id":"k"}}`))
	c := newTestClient(t, srv.URL)
	if _, err := c.AddKnowledge(t.Context(), "k", "site_1", KnowledgeSource{Name: "n", Text: "abc"}); err == nil {
		t.Fatal("AddKnowledge accepted a 3-character text")
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("server saw %d requests, want 0", n)
	}
}

func TestValidateEventTypes(t *testing.T) {
	tests := []struct {
		name   string
		events []string
		ok     bool
		reason string
	}{
		{"one", []string{"lead.created"}, true, ""},
		{"all", []string{"site.published", "site.unpublished", "lead.created", "conversation.started", "conversation.message.created", "knowledge.ready", "broadcast.sent"}, true, ""},
		{"none", nil, false, "at least one"},
		{"retired", []string{"lead.created", "domain.activated"}, false, "retired"},
		{"unknown", []string{"lead.deleted"}, false, "unknown"},
		{"wrong case", []string{"Lead.Created"}, false, "unknown"},
		{"twice", []string{"lead.created", "lead.created"}, false, "twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateEventTypes(tc.events)
			if (err == nil) != tc.ok {
				t.Fatalf("ValidateEventTypes = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("error %q does not say %q", err, tc.reason)
			}
		})
	}
}

func TestValidateWebhookURL(t *testing.T) {
	res := fakeResolver{
		"hooks.example.org":   {"93.184.215.14"},
		"v6.example.org":      {"2606:2800:21f:cb07:6820:80da:af6b:8b2c"},
		"mixed.example.org":   {"93.184.215.14", "10.0.0.5"},
		"private.example.org": {"192.168.1.10"},
		"loop6.example.org":   {"::1"},
		"mapped.example.org":  {"::ffff:127.0.0.1"},
		"nat64.example.org":   {"64:ff9b::a00:1"},
		"empty.example.org":   {},
	}
	tests := []struct {
		url    string
		ok     bool
		reason string
	}{
		{"https://hooks.example.org/siteops/webhooks", true, ""},
		{"https://hooks.example.org:443/in", true, ""},
		{"https://v6.example.org/in", true, ""},
		{"https://93.184.215.14/in", true, ""},
		{"http://hooks.example.org/in", false, "https"},
		{"ftp://hooks.example.org/in", false, "https"},
		{"hooks.example.org/in", false, "https"},
		{"https://user@hooks.example.org/in", false, "username"},
		{"https://user:pw@hooks.example.org/in", false, "username"},
		{"https://hooks.example.org/in#frag", false, "fragment"},
		{"https://hooks.example.org/in#", false, "fragment"},
		{"https://hooks.example.org:8443/in", false, "port"},
		{"https://hooks.example.org:/in", false, "port"},
		{"https:///in", false, "host"},
		{"https://localhost/in", false, "localhost"},
		{"https://api.localhost/in", false, "localhost"},
		{"https://127.0.0.1/in", false, "not public"},
		{"https://[::1]/in", false, "not public"},
		{"https://10.1.2.3/in", false, "not public"},
		{"https://private.example.org/in", false, "192.168.1.10"},
		{"https://mixed.example.org/in", false, "10.0.0.5"},
		{"https://loop6.example.org/in", false, "::1"},
		{"https://mapped.example.org/in", false, "::ffff:127.0.0.1"},
		{"https://nat64.example.org/in", false, "64:ff9b::a00:1"},
		{"https://empty.example.org/in", false, "no address"},
		{"https://unknown.example.org/in", false, "does not resolve"},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			err := ValidateWebhookURL(t.Context(), tc.url, res)
			if (err == nil) != tc.ok {
				t.Fatalf("ValidateWebhookURL = %v, want ok=%v", err, tc.ok)
			}
			if err != nil {
				var ve *ValidationError
				if !errors.As(err, &ve) || ve.Field != "url" || !strings.Contains(err.Error(), tc.reason) {
					t.Errorf("error %q is not a ValidationError on url saying %q", err, tc.reason)
				}
				if strings.Contains(err.Error(), "pw@") {
					t.Errorf("error shows the password: %s", err)
				}
			}
		})
	}
}

func TestCreateWebhookEndpointValidatesBeforeSending(t *testing.T) {
	srv := newAPIServer(t, answer(201, `{}`))
	c := newTestClient(t, srv.URL, WithResolver(publicResolver()))
	_, err := c.CreateWebhookEndpoint(t.Context(), "k", NewWebhookEndpoint{URL: "https://localhost/in", Events: []string{"domain.activated"}})
	if err == nil || !strings.Contains(err.Error(), "localhost") || !strings.Contains(err.Error(), "retired") {
		t.Fatalf("error = %v, want both the URL and the event type refused", err)
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("server saw %d requests, want 0", n)
	}
}

func TestIsPublicAddr(t *testing.T) {
	tests := []struct {
		addr   string
		public bool
	}{
		{"93.184.215.14", true},
		{"8.8.8.8", true},
		{"1.1.1.1", true},
		{"2606:4700:4700::1111", true},
		{"0.0.0.0", false},
		{"0.1.2.3", false},
		{"10.0.0.1", false},
		{"100.64.0.1", false},
		{"100.127.255.255", false},
		{"100.128.0.1", true},
		{"127.0.0.1", false},
		{"127.255.255.254", false},
		{"169.254.169.254", false},
		{"172.16.0.1", false},
		{"172.31.255.255", false},
		{"172.32.0.1", true},
		{"192.0.0.8", false},
		{"192.0.2.1", false},
		{"192.88.99.1", false},
		{"192.168.0.1", false},
		{"198.18.0.1", false},
		{"198.19.255.255", false},
		{"198.51.100.1", false},
		{"203.0.113.1", false},
		{"224.0.0.1", false},
		{"239.255.255.250", false},
		{"240.0.0.1", false},
		{"255.255.255.255", false},
		{"::", false},
		{"::1", false},
		{"::127.0.0.1", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"::ffff:93.184.215.14", true},
		{"64:ff9b::7f00:1", false},
		{"64:ff9b::a00:1", false},
		{"64:ff9b::5db8:d70e", true},
		{"64:ff9b:1::1", false},
		{"100::1", false},
		{"2001::1", false},
		{"2001:2::1", false},
		{"2001:db8::1", false},
		{"2620:4f:8000::1", false},
		{"2606:4700:4700::1111%eth0", false},
		{"3fff::1", false},
		{"2002:7f00:1::", false},
		{"2002:c0a8:101::", false},
		{"2002:5db8:d70e::", true},
		{"5f00::1", false},
		{"fc00::1", false},
		{"fd12:3456::1", false},
		{"fe80::1", false},
		{"fe80::1%eth0", false},
		{"fec0::1", false},
		{"ff02::1", false},
		{"4000::1", false},
	}
	for _, tc := range tests {
		if got := IsPublicAddr(netip.MustParseAddr(tc.addr)); got != tc.public {
			t.Errorf("IsPublicAddr(%s) = %v, want %v", tc.addr, got, tc.public)
		}
	}
	if IsPublicAddr(netip.Addr{}) {
		t.Error("the zero Addr is public")
	}
}

func TestValidateReceiverURLLoopbackMode(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:8088/webhooks/v2", true},
		{"http://localhost:9/webhooks", true},
		{"https://[::1]:8443/in", true},
		{"http://u:p@127.0.0.1:8088/x", false},
		{"http://127.0.0.1:8088/x#f", false},
		{"ftp://127.0.0.1/x", false},
		{"http://10.0.0.1:8088/x", false},
		{"http://hooks.example.org/x", false},
		{"https://hooks.example.org/x", true},
	} {
		err := ValidateReceiverURL(t.Context(), tc.url, publicResolver(), true)
		if (err == nil) != tc.ok {
			t.Errorf("%s in loopback mode: %v, want ok=%v", tc.url, err, tc.ok)
		}
		if strings.HasPrefix(tc.url, "http://127.0.0.1") && ValidateWebhookURL(t.Context(), tc.url, publicResolver()) == nil {
			t.Errorf("%s passed without loopback mode", tc.url)
		}
	}
}
