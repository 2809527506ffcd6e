package survey

import (
	"net/netip"

	"github.com/mptester/mptester/probe"
)

// Skip reasons reported in Summary.Skipped.
const (
	SkipCrossPrivate = "cross-path-private"
	SkipNeverProbe   = "broadcast-multicast"
	SkipNoSource     = "no-source-address"
	SkipMaxBytes     = "max-bytes"
)

// bogons are private, reserved and special-purpose ranges (RFC 6890 and
// the IANA special-purpose registries): an address there means something
// different from every network, so it is only probed where it was learnt.
var bogons = mustPrefixes(
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
	"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
	"198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4",
	"::/128", "::1/128", "::ffff:0:0/96", "64:ff9b:1::/48", "100::/64", "2001::/23",
	"2001:db8::/32", "2002::/16", "3fff::/20", "5f00::/16", "fc00::/7", "fe80::/10",
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// Policy decides which addresses may be probed from which path.
type Policy struct {
	// Public prefixes are treated as public despite the bogon table (the lab
	// uses reserved ranges as its "Internet").
	Public            []netip.Prefix
	AllowCrossPrivate bool
}

// NeverProbe reports addresses no survey may send to: multicast,
// broadcast, unspecified.
func NeverProbe(a netip.Addr) bool {
	a = a.Unmap()
	return !a.IsValid() || a.IsUnspecified() || a.IsMulticast() ||
		a == netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// IsPrivate reports whether a is private/reserved/bogon and not marked public.
func (pol Policy) IsPrivate(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range pol.Public {
		if p.Contains(a) {
			return false
		}
	}
	for _, p := range bogons {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Check returns "" when address a, resolved on path resolve, may be probed
// from path probePath, else the skip reason.
func (pol Policy) Check(probePath, resolve probe.Path, a netip.Addr) string {
	a = a.Unmap()
	if NeverProbe(a) || isDirectedBroadcast(probePath, a) {
		return SkipNeverProbe
	}
	if probePath.Name != resolve.Name && !pol.AllowCrossPrivate && pol.IsPrivate(a) {
		return SkipCrossPrivate
	}
	if _, ok := probePath.SourceAddr(probe.FamilyOf(a)); !ok {
		return SkipNoSource
	}
	return ""
}

// isDirectedBroadcast: the last address of an IPv4 subnet of the path.
func isDirectedBroadcast(p probe.Path, a netip.Addr) bool {
	if !a.Is4() {
		return false
	}
	for _, pa := range p.Addrs {
		if !pa.IP.Is4() || pa.PrefixLen <= 0 || pa.PrefixLen >= 31 {
			continue
		}
		pfx := netip.PrefixFrom(pa.IP, pa.PrefixLen).Masked()
		if !pfx.Contains(a) {
			continue
		}
		b := pfx.Addr().As4()
		host := uint32(1)<<(32-pa.PrefixLen) - 1
		v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | host
		if a == netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}) {
			return true
		}
	}
	return false
}
