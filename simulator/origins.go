package simulator

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// The contract: "each entry is an exact origin made of scheme, hostname and
// an optional port. An entry must not carry a path and must not carry a
// trailing wildcard." Read literally, that admits https://x.example:443 (a
// scheme, a hostname and a port) and HTTPS://Gen.Example (schemes and host
// names are case-insensitive, RFC 3986 §3.1 and §3.2.2), so the simulator
// accepts both and stores every entry as it was sent: the contract does
// not say that the service rewrites entries. Such spellings name the same
// origin as their canonical form (lowercase, default port left out: RFC
// 3986 §6.2.2.1 and §6.2.3, RFC 6454 §6.2), and two entries naming one
// origin are refused as listed twice. Everything else the strict way, as
// the contract is silent on it: the host is a host name of letters, digits
// and hyphens (an international name in its xn-- form), a dotted-quad IPv4
// address or a bracketed IPv6 address without a zone; a port is 1 to 65535
// without leading zeros, and a ':' with no port is refused.

// originSchemes maps each scheme an origin may have to its default port.
var originSchemes = map[string]string{"http": "80", "https": "443"}

// originMarks are characters no part of an origin may hold, and what their
// presence means.
var originMarks = []struct{ mark, reason string }{
	{"*", "wildcards are not allowed; list each origin exactly, e.g. https://www.example.com"},
	{"@", "an origin has no username or password"},
	{"?", "an origin has no query"},
	{"#", "an origin has no fragment"},
	{"%", "an origin has no percent-encoding or zone; write an international name in its xn-- form"},
	{"\\", "an origin has no backslash"},
}

var (
	hostLabel   = regexp.MustCompile(`^(?i)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$`)
	numberLabel = regexp.MustCompile(`^(?i)(?:[0-9]+|0x[0-9a-f]*)$`)
	portNumber  = regexp.MustCompile(`^[1-9][0-9]{0,4}$`)
)

// checkOrigin answers the canonical form of one allowed_origins entry, the
// form a browser sends in its Origin header, or why entry is not an origin.
func checkOrigin(entry string) (canonical, problem string) {
	if entry == "" {
		return "", "an origin cannot be empty; write it as https://example.com"
	}
	for _, r := range entry {
		switch {
		case r <= ' ' || r == 0x7f:
			return "", "an origin cannot contain whitespace or control characters"
		case r > 0x7f:
			return "", "an international host name is written in its xn-- form, as browsers send it"
		}
	}
	for _, m := range originMarks {
		if strings.Contains(entry, m.mark) {
			return "", m.reason
		}
	}
	scheme, authority, found := strings.Cut(entry, "://")
	if !found {
		return "", "write it as scheme://host[:port], e.g. https://example.com"
	}
	scheme = strings.ToLower(scheme)
	defaultPort, known := originSchemes[scheme]
	if !known {
		return "", "the scheme must be http or https"
	}
	if strings.Contains(authority, "/") {
		return "", "an origin has no path, not even \"/\""
	}
	host, port, portGiven, problem := splitAuthority(authority)
	if problem != "" {
		return "", problem
	}
	host, problem = canonicalHost(host)
	if problem != "" {
		return "", problem
	}
	if portGiven {
		if port == "" {
			return "", "the port after ':' is empty"
		}
		if n, err := strconv.Atoi(port); err != nil || !portNumber.MatchString(port) || n > 65535 {
			return "", "the port must be a number from 1 to 65535 without leading zeros"
		}
		if port == defaultPort {
			port = ""
		}
	}
	canonical = scheme + "://" + host
	if port != "" {
		canonical += ":" + port
	}
	return canonical, ""
}

// splitAuthority splits host[:port] or [v6][:port].
func splitAuthority(authority string) (host, port string, portGiven bool, problem string) {
	if strings.HasPrefix(authority, "[") {
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return "", "", false, "an IPv6 address in brackets lacks its ']'"
		}
		host, rest := authority[:end+1], authority[end+1:]
		if rest == "" {
			return host, "", false, ""
		}
		port, found := strings.CutPrefix(rest, ":")
		if !found {
			return "", "", false, "only :port may follow an IPv6 address in brackets"
		}
		return host, port, true, ""
	}
	host, port, portGiven = strings.Cut(authority, ":")
	if strings.Contains(port, ":") {
		return "", "", false, "an IPv6 address goes in brackets, e.g. https://[2001:db8::1]"
	}
	return host, port, portGiven, ""
}

// canonicalHost answers the lowercase form of a host name, a dotted-quad
// IPv4 address, or a bracketed IPv6 address in its shortest form.
func canonicalHost(host string) (string, string) {
	if inner, bracketed := strings.CutPrefix(host, "["); bracketed {
		a, err := netip.ParseAddr(strings.TrimSuffix(inner, "]"))
		if err != nil || !a.Is6() {
			return "", "the brackets do not hold an IPv6 address"
		}
		if a.Is4In6() { // browsers write these in hex, not dotted
			b := a.As16()
			return fmt.Sprintf("[::ffff:%x:%x]", uint16(b[12])<<8|uint16(b[13]), uint16(b[14])<<8|uint16(b[15])), ""
		}
		return "[" + a.String() + "]", ""
	}
	if host == "" {
		return "", "no host; write it as scheme://host[:port], e.g. https://example.com"
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Is4() {
		return a.String(), ""
	}
	if len(host) > 253 {
		return "", "a host name is at most 253 characters"
	}
	labels := strings.Split(host, ".")
	for _, l := range labels {
		if !hostLabel.MatchString(l) {
			return "", fmt.Sprintf("%q is not a host name: labels of 1 to 63 letters, digits and inner hyphens, separated by single dots, with no trailing dot", host)
		}
	}
	if numberLabel.MatchString(labels[len(labels)-1]) {
		return "", "a host ending in a number must be an IPv4 address of four decimal parts, e.g. 192.0.2.1"
	}
	return strings.ToLower(host), ""
}

// checkOrigins checks an allowed_origins list and answers the first entry at
// fault and why, or "" when every entry is an origin named once.
func checkOrigins(entries []string) (field, problem string) {
	first := make(map[string]int, len(entries))
	for i, e := range entries {
		field = fmt.Sprintf("allowed_origins[%d]", i)
		canonical, why := checkOrigin(e)
		if why != "" {
			return field, why
		}
		if j, seen := first[canonical]; seen {
			return field, fmt.Sprintf("listed twice: the same origin as allowed_origins[%d] (%s)", j, canonical)
		}
		first[canonical] = i
	}
	return "", ""
}
