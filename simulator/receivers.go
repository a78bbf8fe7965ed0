package simulator

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// The contract's URL rules at registration: "scheme HTTPS; no username; no
// password; no fragment; no custom port; the hostname must resolve only to
// public IP addresses (localhost and internal ranges are rejected)". Where
// it is silent the simulator takes the strict reading: a ':' with no port
// and a port written other than as 443 (0443) are custom ports; an empty
// fragment ("#") is a fragment; "@" with an empty username is a username.
// A query and a path are allowed.

// receiverForm is one rule on the form of a receiver URL: broken reports
// whether u (parsed from raw) breaks it.
type receiverForm struct {
	broken func(u *url.URL, raw string) bool
	reason string
}

// productionForm holds the contract's rules on the form, in the order they
// are reported.
var productionForm = []receiverForm{
	{func(u *url.URL, _ string) bool { return u.Scheme != "https" }, "the scheme must be https"},
	{func(u *url.URL, _ string) bool { return u.Hostname() == "" }, "no host; use https://host/path"},
	{hasPassword, "a webhook URL must not carry a password"},
	{hasUserinfo, "a webhook URL must not carry a username"},
	{hasFragment, "a webhook URL must not carry a fragment"},
	{hasCustomPort, "custom ports are not allowed; receive on the default HTTPS port"},
}

// loopbackForm holds the rules of test mode (Config.AllowLoopbackReceivers)
// for a URL on a loopback host: http too, any port, still no credentials
// and no fragment.
var loopbackForm = []receiverForm{
	{func(u *url.URL, _ string) bool { return u.Scheme != "https" && u.Scheme != "http" }, "the scheme must be https (or http on loopback in test mode)"},
	{hasPassword, "a webhook URL must not carry a password"},
	{hasUserinfo, "a webhook URL must not carry a username"},
	{hasFragment, "a webhook URL must not carry a fragment"},
}

func hasPassword(u *url.URL, _ string) bool {
	if u.User == nil {
		return false
	}
	_, set := u.User.Password()
	return set
}

func hasUserinfo(u *url.URL, _ string) bool { return u.User != nil }

func hasFragment(u *url.URL, raw string) bool { return u.Fragment != "" || strings.Contains(raw, "#") }

func hasCustomPort(u *url.URL, _ string) bool {
	return strings.HasSuffix(u.Host, ":") || (u.Port() != "" && u.Port() != "443")
}

// localNames are host names that mean this machine without any lookup
// (RFC 6761 §6.3): the name itself and every name under it.
var localNames = []string{"localhost"}

func isLocalName(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	for _, n := range localNames {
		if h == n || strings.HasSuffix(h, "."+n) {
			return true
		}
	}
	return false
}

// isLoopbackHost reports whether host is, for test mode, a loopback
// receiver: the name localhost or a loopback address literal.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && loopbackAddress(a)
}

// checkReceiverURL applies the registration rules to raw and answers the
// first one it breaks, or "" when it breaks none. In test mode a URL on a
// loopback host gets loopbackForm and no address check.
func checkReceiverURL(ctx context.Context, raw string, r Resolver, testMode bool) string {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		return "not an absolute URL; use https://host/path"
	}
	form := productionForm
	loopback := testMode && isLoopbackHost(u.Hostname())
	if loopback {
		form = loopbackForm
	}
	for _, rule := range form {
		if rule.broken(u, raw) {
			return rule.reason
		}
	}
	if loopback {
		return ""
	}
	return checkPublicHost(ctx, u.Hostname(), r)
}

// checkPublicHost answers why host may not receive deliveries, or "" when
// every address it resolves to is public. An address literal is judged
// without a lookup; a local name is refused without one.
func checkPublicHost(ctx context.Context, host string, r Resolver) string {
	if a, err := netip.ParseAddr(host); err == nil {
		if ok, why := addressVerdict(a); !ok {
			return fmt.Sprintf("%s is not a public address: %s", host, why)
		}
		return ""
	}
	if isLocalName(host) {
		return "localhost is not a public host"
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Sprintf("the host %s does not resolve: %v", host, err)
	}
	if len(addrs) == 0 {
		return fmt.Sprintf("the host %s resolves to no address", host)
	}
	for _, a := range addrs {
		if ok, why := addressVerdict(a); !ok {
			return fmt.Sprintf("the host %s resolves to %s, which is not a public address: %s", host, a, why)
		}
	}
	return ""
}
