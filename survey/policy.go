package survey

import (
	"net/netip"

	"github.com/mptester/mptester/internal/bogon"
	"github.com/mptester/mptester/probe"
)

// Skip reasons reported in Summary.Skipped.
const (
	SkipCrossPrivate = "cross-path-private"
	SkipNeverProbe   = "broadcast-multicast"
	SkipNoSource     = "no-source-address"
	SkipMaxBytes     = "max-bytes"
	SkipPrivate      = "private"
)

// Policy decides which addresses may be probed from which path.
type Policy struct {
	// Public prefixes are treated as public despite the bogon table (the lab
	// uses reserved ranges as its "Internet").
	Public            []netip.Prefix
	AllowCrossPrivate bool
	// NoPrivate skips every private address and every address on a subnet
	// of Local (the host's own networks), from every path: a fleet task
	// runs so unless the probe's owner allows private targets.
	NoPrivate bool
	Local     []netip.Prefix
	// NAT64 is, per path name, the NAT64 prefix RFC 7050 discovery found
	// on it (DiscoverNAT64). An IPv4 target on a path with a prefix and no
	// IPv4 source is probed through the translator (ViaNAT64) instead of
	// skipped as no-source-address; AAAA answers inside a resolution
	// path's prefix are synthesized and stand for their IPv4 (Unsynthesize).
	NAT64 map[string]netip.Prefix
}

// ViaNAT64 returns the address a probe to a from probePath is sent to
// when it goes through the path's NAT64 (RFC 6052 §2.2 synthesis, as iOS
// does for IPv4 literals on such networks): a is IPv4, the path has no
// IPv4 source but an IPv6 one and a discovered prefix.
func (pol Policy) ViaNAT64(probePath probe.Path, a netip.Addr) (netip.Addr, bool) {
	a = a.Unmap()
	pfx, ok := pol.NAT64[probePath.Name]
	if !ok || !a.Is4() {
		return netip.Addr{}, false
	}
	if _, has4 := probePath.SourceAddr(probe.Family4); has4 {
		return netip.Addr{}, false
	}
	if _, has6 := probePath.SourceAddr(probe.Family6); !has6 {
		return netip.Addr{}, false
	}
	return probe.Embed4(pfx, a)
}

// Unsynthesize maps an AAAA answer of resolution path rp inside its NAT64
// prefix (a DNS64's synthesis, RFC 6147) to the IPv4 address it embeds, so
// the overlap and the cells count one server once; other addresses are
// returned as they are.
func (pol Policy) Unsynthesize(rp string, a netip.Addr) netip.Addr {
	pfx, ok := pol.NAT64[rp]
	if !ok || !a.Is6() || a.Is4In6() || !pfx.Contains(a) {
		return a
	}
	if v4, ok := probe.Extract4(a, pfx.Bits()); ok {
		return v4
	}
	return a
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
	return bogon.Contains(a, pol.Public)
}

// Check returns "" when address a, resolved on path resolve, may be probed
// from path probePath, else the skip reason.
func (pol Policy) Check(probePath, resolve probe.Path, a netip.Addr) string {
	a = a.Unmap()
	if NeverProbe(a) || isDirectedBroadcast(probePath, a) {
		return SkipNeverProbe
	}
	if pol.NoPrivate && (pol.IsPrivate(a) || pol.isLocal(a)) {
		return SkipPrivate
	}
	if probePath.Name != resolve.Name && !pol.AllowCrossPrivate && pol.IsPrivate(a) {
		return SkipCrossPrivate
	}
	if _, ok := probePath.SourceAddr(probe.FamilyOf(a)); !ok {
		if _, via := pol.ViaNAT64(probePath, a); via {
			return ""
		}
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

func (pol Policy) isLocal(a netip.Addr) bool {
	for _, p := range pol.Local {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
