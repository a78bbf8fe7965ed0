package simulator

import (
	"context"
	"net"
	"net/netip"
)

// Resolver looks up the addresses of a webhook host. *net.Resolver
// satisfies it; tests inject a table.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

// The contract says a webhook host "must resolve only to public IP
// addresses (localhost and internal ranges are rejected)". The simulator
// reads "public" as ordinary global unicast: an address an internet host
// may hold. It refuses every block of the IANA IPv4 and IPv6
// Special-Purpose Address Registries, the multicast blocks, the reserved
// IPv4 block and, in IPv6, everything outside 2000::/3 (the only block
// allocated as global unicast). Some special-purpose blocks are globally
// reachable (AS112 DNS sinks, AMT relays, the PCP and TURN anycast
// addresses), but they are protocol infrastructure, never a receiver, so
// refusing them whole costs no real receiver and keeps the rule to one
// table. Addresses that carry an IPv4 address (IPv4-mapped, the NAT64
// well-known prefix, 6to4) are judged by the IPv4 address they carry, so
// ::ffff:10.0.0.1 is as private as 10.0.0.1. An address with a zone
// (fe80::1%eth0) names an interface of the sender itself and is refused.
//
// The table is written from the registries, not from package agentsite;
// crosscheck_test.go checks that both sides agree.
var specialBlocks = []struct {
	block netip.Prefix
	why   string
}{
	// IPv4 (RFC 6890 registry, and RFC 5771 and RFC 1112 for multicast
	// and reserved).
	{netip.MustParsePrefix("0.0.0.0/8"), "\"this network\" (RFC 791), including the unspecified address"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private-use (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space, carrier-grade NAT (RFC 6598)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback (RFC 1122)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local, including cloud metadata services (RFC 3927)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private-use (RFC 1918)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments (RFC 6890)"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation, TEST-NET-1 (RFC 5737)"},
	{netip.MustParsePrefix("192.31.196.0/24"), "AS112 DNS sink (RFC 7535)"},
	{netip.MustParsePrefix("192.52.193.0/24"), "AMT relays (RFC 7450)"},
	{netip.MustParsePrefix("192.88.99.0/24"), "deprecated 6to4 relay anycast (RFC 7526)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private-use (RFC 1918)"},
	{netip.MustParsePrefix("192.175.48.0/24"), "AS112 direct delegation (RFC 7534)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking (RFC 2544)"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation, TEST-NET-2 (RFC 5737)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation, TEST-NET-3 (RFC 5737)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast (RFC 5771)"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved, including limited broadcast (RFC 1112, RFC 919)"},

	// IPv6 (RFC 6890 registry, RFC 4291 and RFC 3879).
	{netip.MustParsePrefix("::/128"), "the unspecified address (RFC 4291)"},
	{netip.MustParsePrefix("::1/128"), "loopback (RFC 4291)"},
	{netip.MustParsePrefix("::/96"), "deprecated IPv4-compatible (RFC 4291)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use IPv4/IPv6 translation (RFC 8215)"},
	{netip.MustParsePrefix("100::/64"), "discard-only (RFC 6666)"},
	{netip.MustParsePrefix("2001::/23"), "IETF protocol assignments: Teredo, benchmarking, ORCHID and others (RFC 2928)"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation (RFC 3849)"},
	{netip.MustParsePrefix("2620:4f:8000::/48"), "AS112 direct delegation (RFC 7534)"},
	{netip.MustParsePrefix("3fff::/20"), "documentation (RFC 9637)"},
	{netip.MustParsePrefix("5f00::/16"), "segment routing SIDs (RFC 9602)"},
	{netip.MustParsePrefix("fc00::/7"), "unique local (RFC 4193)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local (RFC 4291)"},
	{netip.MustParsePrefix("fec0::/10"), "deprecated site-local (RFC 3879)"},
	{netip.MustParsePrefix("ff00::/8"), "multicast (RFC 4291)"},
}

// carriers are the IPv6 blocks whose addresses carry an IPv4 address, and
// the byte at which it starts.
var carriers = []struct {
	block netip.Prefix
	at    int
	name  string
}{
	{netip.MustParsePrefix("::ffff:0:0/96"), 12, "IPv4-mapped"},
	{netip.MustParsePrefix("64:ff9b::/96"), 12, "NAT64"},
	{netip.MustParsePrefix("2002::/16"), 2, "6to4"},
}

var globalUnicast6 = netip.MustParsePrefix("2000::/3")

// addressVerdict says whether a may receive webhook deliveries and, when it
// may not, why.
func addressVerdict(a netip.Addr) (public bool, why string) {
	if !a.IsValid() {
		return false, "not an IP address"
	}
	if a.Zone() != "" {
		return false, "a scoped address with a zone names an interface of the sender"
	}
	if a.Is6() {
		for _, c := range carriers {
			if c.block.Contains(a) {
				b := a.As16()
				inner := netip.AddrFrom4([4]byte(b[c.at : c.at+4]))
				if ok, innerWhy := addressVerdict(inner); !ok {
					return false, c.name + " address of " + inner.String() + ", " + innerWhy
				}
				return true, ""
			}
		}
	}
	for _, s := range specialBlocks {
		if s.block.Contains(a) {
			return false, s.why
		}
	}
	if a.Is6() && !globalUnicast6.Contains(a) {
		return false, "outside 2000::/3, the only IPv6 block allocated as global unicast"
	}
	return true, ""
}

// publicAddress reports whether a may receive webhook deliveries.
func publicAddress(a netip.Addr) bool {
	ok, _ := addressVerdict(a)
	return ok
}

// loopbackAddress reports whether a is a loopback address, also in its
// IPv4-mapped form. Test mode (Config.AllowLoopbackReceivers) lets these,
// and no other non-public address, receive deliveries.
func loopbackAddress(a netip.Addr) bool {
	return a.Zone() == "" && a.Unmap().IsLoopback()
}
