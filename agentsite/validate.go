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

// ValidateOrigin checks that s is an exact origin: http or https, a host,
// an optional port, and nothing else: no path (not even "/"), query,
// fragment, userinfo or wildcard. Letter case is free and the scheme's
// default port may be written (see the package doc, "Allowed origins").
// The host is a host name of letters, digits and hyphens (an international
// name in its xn-- form), a dotted-quad IPv4 address or a bracketed IPv6
// address; a port is 1 to 65535 without leading zeros. field names the
// value in the error, e.g. allowed_origins[2].
func ValidateOrigin(field, s string) error {
	_, err := canonicalOrigin(field, s)
	return err
}

// CanonicalOrigin returns the form of origin s that a browser sends in its
// Origin header: scheme and host in lowercase, the default port left out,
// an IPv6 address in its shortest form. It fails as ValidateOrigin does.
// https://Shop.Example:443 and https://shop.example are one origin, and
// only the second is what a service comparing strings will ever see.
func CanonicalOrigin(s string) (string, error) {
	return canonicalOrigin("allowed_origins", s)
}

// CanonicalOrigins returns the canonical form of every entry of an
// allowed_origins list, or the errors of ValidateOrigins.
func CanonicalOrigins(origins []string) ([]string, error) {
	if err := ValidateOrigins(origins); err != nil {
		return nil, err
	}
	if origins == nil {
		return nil, nil
	}
	out := make([]string, len(origins))
	for i, o := range origins {
		out[i], _ = canonicalOrigin("", o)
	}
	return out, nil
}

func canonicalOrigin(field, s string) (string, error) {
	bad := func(reason string) error { return &ValidationError{Field: field, Value: s, Reason: reason} }
	switch {
	case s == "":
		return "", bad("an origin cannot be empty; write it as https://example.com")
	case strings.ContainsAny(s, " \t\r\n"):
		return "", bad("an origin cannot contain whitespace")
	case strings.Contains(s, "*"):
		return "", bad("wildcards are not allowed; list each origin exactly, e.g. https://www.example.com")
	case strings.ContainsAny(s, "#"):
		return "", bad("an origin has no fragment")
	case strings.ContainsAny(s, "?"):
		return "", bad("an origin has no query")
	case strings.ContainsAny(s, "%\\"):
		return "", bad("an origin has no percent-encoding, zone or backslash; write an international name in its xn-- form")
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", bad("not a URL origin; write it as scheme://host[:port], e.g. https://example.com")
	}
	if u.Scheme != "http" && u.Scheme != "https" { // url.Parse lowercases the scheme
		return "", bad("the scheme must be http or https")
	}
	if u.Opaque != "" || u.Host == "" {
		return "", bad("no host; write it as scheme://host[:port], e.g. https://example.com")
	}
	if u.User != nil {
		return "", bad("an origin has no username or password")
	}
	if u.Path != "" || u.RawPath != "" {
		return "", bad(fmt.Sprintf("an origin has no path, not even \"/\"; write %s://%s", u.Scheme, u.Host))
	}
	host, reason := originHost(u)
	if reason != "" {
		return "", bad(reason)
	}
	port := u.Port()
	if strings.HasSuffix(u.Host, ":") {
		return "", bad("the port after ':' is empty")
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return "", bad("the port must be a number from 1 to 65535 without leading zeros")
		}
		if (u.Scheme == "https" && n == 443) || (u.Scheme == "http" && n == 80) {
			port = ""
		}
	}
	if port != "" {
		return u.Scheme + "://" + host + ":" + port, nil
	}
	return u.Scheme + "://" + host, nil
}

// originHost returns the canonical host of an origin URL, or why it is not
// a host name or an IP address.
func originHost(u *url.URL) (string, string) {
	h := u.Hostname()
	if strings.HasPrefix(u.Host, "[") {
		a, err := netip.ParseAddr(h)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", "the brackets do not hold an IPv6 address"
		}
		if a.Is4In6() {
			// netip writes ::ffff:1.2.3.4; browsers write the hex form.
			b := a.As16()
			return "[::ffff:" + strconv.FormatUint(uint64(b[12])<<8|uint64(b[13]), 16) + ":" + strconv.FormatUint(uint64(b[14])<<8|uint64(b[15]), 16) + "]", ""
		}
		return "[" + a.String() + "]", ""
	}
	if h == "" {
		return "", "no host; write it as scheme://host[:port]"
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if !a.Is4() {
			return "", "an IPv6 address goes in brackets, e.g. https://[2001:db8::1]"
		}
		return a.String(), ""
	}
	if len(h) > 253 {
		return "", "a host name is at most 253 characters"
	}
	var last string
	for label := range strings.SplitSeq(h, ".") {
		if reason := labelProblem(label); reason != "" {
			return "", reason
		}
		last = label
	}
	if numeric(last) {
		return "", "a host ending in a number must be an IPv4 address of four decimal parts, e.g. 192.0.2.1"
	}
	return strings.ToLower(h), ""
}

// labelProblem says why label is not a label of a host name (RFC 1123
// §2.1), or "".
func labelProblem(label string) string {
	if label == "" || len(label) > 63 {
		return "each dot-separated part of a host name has 1 to 63 characters, and the name has no trailing dot"
	}
	if label[0] == '-' || label[len(label)-1] == '-' {
		return "a part of a host name cannot start or end with a hyphen"
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-':
		case c >= 0x80:
			return "an international host name is written in its xn-- form, as browsers send it"
		default:
			return fmt.Sprintf("a host name holds letters, digits and hyphens, not %q", c)
		}
	}
	return ""
}

// numeric reports whether a browser would read label as a number: decimal
// digits, or 0x and hex digits (WHATWG URL, "ends in a number").
func numeric(label string) bool {
	digits := label
	if len(label) >= 2 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X') {
		digits = label[2:]
		for i := 0; i < len(digits); i++ {
			if !strings.ContainsRune("0123456789abcdefABCDEF", rune(digits[i])) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return digits != ""
}

// ValidateOrigins checks every entry of an allowed_origins list and reports
// every bad entry at once. Two entries that name the same origin (compared
// by CanonicalOrigin) are refused as listed twice.
func ValidateOrigins(origins []string) error {
	var errs []error
	seen := make(map[string]int, len(origins))
	for i, o := range origins {
		field := fmt.Sprintf("allowed_origins[%d]", i)
		canonical, err := canonicalOrigin(field, o)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if j, dup := seen[canonical]; dup {
			errs = append(errs, &ValidationError{Field: field, Value: o, Reason: fmt.Sprintf("listed twice: entry %d names the same origin", j)})
			continue
		}
		seen[canonical] = i
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
