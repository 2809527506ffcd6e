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
