package agentsite

import (
	"context"
	"net"
	"net/netip"
)

// Resolver looks up the addresses of a host name. *net.Resolver satisfies it;
// tests inject their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

type defaultResolver struct{}

func (defaultResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, network, host)
}

// nonPublic lists the ranges that may not receive deliveries: every block
// of the IANA IPv4 and IPv6 special-purpose address registries (loopback,
// private, link-local, CGNAT, documentation, benchmarking, protocol
// assignments, and the anycast infrastructure blocks too, which are never a
// receiver), multicast, reserved and unspecified. IPv4-mapped, NAT64 and
// 6to4 addresses are judged by the IPv4 address they carry.
var nonPublic = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		// IPv4
		"0.0.0.0/8",       // "this network", unspecified
		"10.0.0.0/8",      // private
		"100.64.0.0/10",   // CGNAT shared address space
		"127.0.0.0/8",     // loopback
		"169.254.0.0/16",  // link-local
		"172.16.0.0/12",   // private
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // documentation TEST-NET-1
		"192.31.196.0/24", // AS112
		"192.52.193.0/24", // AMT
		"192.88.99.0/24",  // 6to4 relay anycast (deprecated)
		"192.168.0.0/16",  // private
		"192.175.48.0/24", // AS112 direct delegation
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // documentation TEST-NET-2
		"203.0.113.0/24",  // documentation TEST-NET-3
		"224.0.0.0/4",     // multicast
		"240.0.0.0/4",     // reserved, and broadcast
		// IPv6
		"::/128",            // unspecified
		"::1/128",           // loopback
		"::/96",             // IPv4-compatible (deprecated)
		"64:ff9b:1::/48",    // local-use NAT64
		"100::/64",          // discard-only
		"2001::/23",         // IETF protocol assignments (Teredo, benchmarking 2001:2::/48, ORCHID)
		"2001:db8::/32",     // documentation
		"2620:4f:8000::/48", // AS112 direct delegation
		"3fff::/20",         // documentation
		"5f00::/16",         // SRv6 SIDs
		"fc00::/7",          // unique local
		"fe80::/10",         // link-local
		"fec0::/10",         // site-local (deprecated)
		"ff00::/8",          // multicast
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	global6   = netip.MustParsePrefix("2000::/3")
)

// IsPublicAddr reports whether a may receive webhook deliveries: a unicast
// address that is routable on the public internet. An address with a zone
// (fe80::1%eth0) names an interface of this host and is never public.
func IsPublicAddr(a netip.Addr) bool {
	if !a.IsValid() || a.Zone() != "" {
		return false
	}
	if a.Is4In6() {
		return IsPublicAddr(a.Unmap())
	}
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64.Contains(a):
			return IsPublicAddr(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		case sixToFour.Contains(a):
			return IsPublicAddr(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
		case !global6.Contains(a):
			return false // everything outside 2000::/3 is unassigned or special
		}
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}
