package activities

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/siteops/siteops/agentsite"
)

// ErrTypePolicy is the error type of a request refused by siteops' own
// policy (an endpoint URL outside the deployment, a duration past its
// maximum): no retry changes the answer.
const ErrTypePolicy = "PolicyViolation"

// MaxGracePeriod is the longest a rotation keeps accepting the old secret
// after it deleted the old endpoint. Reconciliation retires a deleted
// endpoint's secret at once when its planned retirement lies further
// ahead, whoever planned it.
const MaxGracePeriod = 7 * 24 * time.Hour

// ErrOutsideDeployment matches errors.Is for an endpoint URL that does not
// lie under the deployment's public receiver URLs.
var ErrOutsideDeployment = errors.New("the URL does not lie under this deployment's public receiver URL")

// ReceiverPolicy says where siteops may point the account's webhooks: under
// the public URLs by which the Agent-Site service reaches this
// deployment's ingress (SITEOPS_PUBLIC_URL), and, in test mode
// (SITEOPS_ALLOW_LOOPBACK_RECEIVERS), at loopback. Whoever may start a
// workflow in siteops' namespace could otherwise register or rotate an
// endpoint onto a host of their own and receive every event, leads
// included. The zero value allows nothing.
type ReceiverPolicy struct {
	Public        []*url.URL
	AllowLoopback bool
}

// ParseReceiverPolicy reads SITEOPS_PUBLIC_URL (comma-separated absolute
// http(s) URLs, without query, fragment or credentials).
func ParseReceiverPolicy(publicURLs string, allowLoopback bool) (ReceiverPolicy, error) {
	p := ReceiverPolicy{AllowLoopback: allowLoopback}
	for raw := range strings.SplitSeq(publicURLs, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		switch {
		case err != nil, u.Host == "", u.Scheme != "https" && u.Scheme != "http":
			return ReceiverPolicy{}, fmt.Errorf("SITEOPS_PUBLIC_URL: %q is not an absolute http(s) URL; give the URL the Agent-Site service reaches the ingress's receivers under, e.g. https://hooks.example.com/webhooks", raw)
		case u.User != nil, u.RawQuery != "", u.Fragment != "", strings.Contains(raw, "#"):
			return ReceiverPolicy{}, fmt.Errorf("SITEOPS_PUBLIC_URL: %s must not carry credentials, a query or a fragment", u.Redacted())
		}
		u.Path = strings.TrimSuffix(u.Path, "/")
		p.Public = append(p.Public, u)
	}
	return p, nil
}

// String lists the public URLs, for messages.
func (p ReceiverPolicy) String() string {
	if len(p.Public) == 0 {
		return "none (SITEOPS_PUBLIC_URL is not set)"
	}
	s := make([]string, len(p.Public))
	for i, u := range p.Public {
		s[i] = u.String()
	}
	return strings.Join(s, ", ")
}

// Check refuses a webhook endpoint URL that does not lie under one of the
// public URLs: the same scheme, host and port, and a path that is the
// public URL's path or below it (whole segments; no dot segments or
// escaped slashes, which a proxy could read otherwise).
func (p ReceiverPolicy) Check(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%w: %q is not an absolute URL", ErrOutsideDeployment, clipURL(raw))
	}
	if p.AllowLoopback && agentsite.IsLoopbackHost(u.Hostname()) {
		return nil
	}
	if u.User == nil && u.RawQuery == "" && u.Fragment == "" && !strings.Contains(raw, "#") && cleanPath(u) {
		for _, pub := range p.Public {
			if under(u, pub) {
				return nil
			}
		}
	}
	hint := "list the deployment's public receiver URL in SITEOPS_PUBLIC_URL (worker and CLI), or choose a URL under it"
	if len(p.Public) > 0 {
		hint = "choose a URL under it; another host would receive every event of the account"
	}
	return fmt.Errorf("%w: %s is not under %s; %s", ErrOutsideDeployment, clipURL(u.Redacted()), p, hint)
}

// under reports whether u is pub or below it.
func under(u, pub *url.URL) bool {
	if !strings.EqualFold(u.Scheme, pub.Scheme) || !strings.EqualFold(strings.TrimSuffix(u.Hostname(), "."), strings.TrimSuffix(pub.Hostname(), ".")) ||
		port(u) != port(pub) {
		return false
	}
	path := strings.TrimSuffix(u.Path, "/")
	return path == pub.Path || strings.HasPrefix(path, pub.Path+"/")
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// cleanPath refuses paths that mean one thing here and another to a proxy.
func cleanPath(u *url.URL) bool {
	if strings.Contains(strings.ToLower(u.EscapedPath()), "%2f") || strings.Contains(strings.ToLower(u.EscapedPath()), "%2e") {
		return false
	}
	for seg := range strings.SplitSeq(u.Path, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

func clipURL(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
