package agentsite

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/siteops/siteops/agentsite/webhook"
)

// Knowledge text bounds, in Unicode code points.
const (
	MinKnowledgeText = 5
	MaxKnowledgeText = 200_000
)

// ValidateOrigin checks that s is an exact origin as a browser sends it:
// http or https, a host, an optional port, and nothing else — no path (not
// even "/"), query, fragment, userinfo, wildcard or default port, all in
// lowercase. field names the value in the error, e.g. allowed_origins[2].
func ValidateOrigin(field, s string) error {
	bad := func(reason string) error { return &ValidationError{Field: field, Value: s, Reason: reason} }
	switch {
	case s == "":
		return bad("an origin cannot be empty; write it as https://example.com")
	case strings.ContainsAny(s, " \t\r\n"):
		return bad("an origin cannot contain whitespace")
	case strings.Contains(s, "*"):
		return bad("wildcards are not allowed; list each origin exactly, e.g. https://www.example.com")
	case strings.ContainsAny(s, "#"):
		return bad("an origin has no fragment")
	case strings.ContainsAny(s, "?"):
		return bad("an origin has no query")
	}
	u, err := url.Parse(s)
	if err != nil {
		return bad("not a URL origin; write it as scheme://host[:port], e.g. https://example.com")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return bad("the scheme must be http or https")
	}
	if u.Opaque != "" || u.Host == "" {
		return bad("no host; write it as scheme://host[:port], e.g. https://example.com")
	}
	if u.User != nil {
		return bad("an origin has no username or password")
	}
	if u.Path != "" || u.RawPath != "" {
		return bad(fmt.Sprintf("an origin has no path, not even \"/\"; write %s://%s", u.Scheme, u.Host))
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return bad("no host; write it as scheme://host[:port]")
	}
	if strings.HasSuffix(u.Host, ":") {
		return bad("the port after ':' is empty")
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return bad("the port must be a number from 1 to 65535")
		}
		if (u.Scheme == "https" && n == 443) || (u.Scheme == "http" && n == 80) {
			return bad(fmt.Sprintf("browsers send the default port as no port; write %s://%s", u.Scheme, u.Hostname()))
		}
	}
	if lower := strings.ToLower(s); lower != s {
		return bad(fmt.Sprintf("origins are compared exactly and browsers send them in lowercase; write %s", lower))
	}
	return nil
}

// ValidateOrigins checks every entry of an allowed_origins list and reports
// every bad entry at once.
func ValidateOrigins(origins []string) error {
	var errs []error
	seen := make(map[string]bool, len(origins))
	for i, o := range origins {
		field := fmt.Sprintf("allowed_origins[%d]", i)
		if err := ValidateOrigin(field, o); err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[o] {
			errs = append(errs, &ValidationError{Field: field, Value: o, Reason: "listed twice"})
		}
		seen[o] = true
	}
	return errors.Join(errs...)
}

// ValidateKnowledgeText checks the length of a knowledge source's text in
// code points, not bytes: 5 to 200,000.
func ValidateKnowledgeText(text string) error {
	if !utf8.ValidString(text) {
		return &ValidationError{Field: "text", Reason: "not valid UTF-8"}
	}
	n := utf8.RuneCountInString(text)
	if n < MinKnowledgeText || n > MaxKnowledgeText {
		return &ValidationError{Field: "text", Reason: fmt.Sprintf("is %d characters; it must be %d to %d characters (code points)", n, MinKnowledgeText, MaxKnowledgeText)}
	}
	return nil
}

// ValidateEventTypes checks a subscription: at least one type, each one the
// service emits, none twice. The retired domain.activated is refused with
// its reason.
func ValidateEventTypes(events []string) error {
	if len(events) == 0 {
		return &ValidationError{Field: "events", Reason: "subscribe to at least one event type, e.g. lead.created"}
	}
	var errs []error
	seen := make(map[string]bool, len(events))
	for i, e := range events {
		field := fmt.Sprintf("events[%d]", i)
		et := webhook.EventType(e)
		switch {
		case et.Retired():
			errs = append(errs, &ValidationError{Field: field, Value: e, Reason: "retired: custom domains are not offered and this event is never emitted"})
		case !et.Known():
			errs = append(errs, &ValidationError{Field: field, Value: e, Reason: "unknown event type; known types: " + joinTypes(webhook.EventTypes())})
		case seen[e]:
			errs = append(errs, &ValidationError{Field: field, Value: e, Reason: "listed twice"})
		}
		seen[e] = true
	}
	return errors.Join(errs...)
}

func joinTypes(ts []webhook.EventType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// ParseWebhookURL checks the form of a webhook receiver URL: HTTPS, a host,
// no username or password, no fragment, no custom port. It does not resolve
// the host; ValidateWebhookURL does.
func ParseWebhookURL(raw string) (*url.URL, error) {
	bad := func(reason string) error {
		return &ValidationError{Field: "url", Value: redactURL(raw), Reason: reason}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		return nil, bad("not an absolute URL; use https://host/path")
	}
	switch {
	case u.Scheme != "https":
		return nil, bad("the scheme must be https")
	case u.Host == "" || u.Hostname() == "":
		return nil, bad("no host")
	case u.User != nil:
		return nil, bad("a webhook URL must not carry a username or password")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, bad("a webhook URL must not carry a fragment")
	case u.Port() != "" && u.Port() != "443", strings.HasSuffix(u.Host, ":"):
		return nil, bad("custom ports are not allowed; receive on the default HTTPS port 443")
	}
	return u, nil
}

// ValidateWebhookURL checks a receiver URL's form (ParseWebhookURL) and that
// its host resolves only to public addresses: a name that resolves to any
// loopback, private, link-local or otherwise internal address is refused, as
// the service refuses it.
func ValidateWebhookURL(ctx context.Context, raw string, r Resolver) error {
	return ValidateReceiverURL(ctx, raw, r, false)
}

// ValidateReceiverURL is ValidateWebhookURL with a test mode: when
// allowLoopback is set, a URL on a loopback host (127.0.0.0/8, ::1,
// localhost) may also use http and any port; it still may not carry
// credentials or a fragment. Every other host gets the contract's rules.
func ValidateReceiverURL(ctx context.Context, raw string, r Resolver, allowLoopback bool) error {
	if allowLoopback {
		if u, err := url.Parse(raw); err == nil && IsLoopbackHost(u.Hostname()) {
			switch {
			case u.Scheme != "http" && u.Scheme != "https":
				return &ValidationError{Field: "url", Value: redactURL(raw), Reason: "the scheme must be https (or http on loopback in test mode)"}
			case u.User != nil:
				return &ValidationError{Field: "url", Value: redactURL(raw), Reason: "a webhook URL must not carry a username or password"}
			case u.Fragment != "" || strings.Contains(raw, "#"):
				return &ValidationError{Field: "url", Value: raw, Reason: "a webhook URL must not carry a fragment"}
			}
			return nil
		}
	}
	u, err := ParseWebhookURL(raw)
	if err != nil {
		return err
	}
	return CheckPublicHost(ctx, r, u.Hostname())
}

// IsLoopbackHost reports whether host is localhost or a loopback address.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// CheckPublicHost resolves host with r and refuses it unless every address
// is public (IsPublicAddr). An IP literal is judged without a lookup.
func CheckPublicHost(ctx context.Context, r Resolver, host string) error {
	bad := func(reason string) error { return &ValidationError{Field: "url", Value: host, Reason: reason} }
	if a, err := netip.ParseAddr(host); err == nil {
		if !IsPublicAddr(a) {
			return bad("the address is not public (loopback, private, link-local or reserved)")
		}
		return nil
	}
	lower := strings.TrimSuffix(strings.ToLower(host), ".")
	if lower == "localhost" || strings.HasSuffix(lower, ".localhost") {
		return bad("localhost is not a public host")
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return bad("the host does not resolve: " + err.Error())
	}
	if len(addrs) == 0 {
		return bad("the host resolves to no address")
	}
	for _, a := range addrs {
		if !IsPublicAddr(a) {
			return bad(fmt.Sprintf("the host resolves to %s, which is not a public address", a))
		}
	}
	return nil
}

// redactURL drops userinfo before a URL is shown in an error.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		return u.Redacted()
	}
	return raw
}

func requireID(field, id string) error {
	if strings.TrimSpace(id) == "" {
		return &ValidationError{Field: field, Reason: "is empty"}
	}
	return nil
}
