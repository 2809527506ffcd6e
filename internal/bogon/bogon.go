// Package bogon is the table of private, reserved and special-purpose
// address ranges (RFC 6890 and the IANA special-purpose registries): an
// address there means something different from every network. The survey
// probes one only where it was learnt; a fleet task may never name one.
package bogon

import (
	"fmt"
	"net"
	"net/netip"
)

var prefixes = mustPrefixes(
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
	"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
	"198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
	"::/128", "::1/128", "::ffff:0:0/96", "64:ff9b:1::/48", "100::/64", "2001::/23",
	"2001:db8::/32", "2002::/16", "3fff::/20", "5f00::/16", "fc00::/7", "fe80::/10", "ff00::/8",
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// WellKnownNAT64 is RFC 6052's well-known prefix: 64:ff9b::a.b.c.d is
// a.b.c.d reached through the network's NAT64.
var WellKnownNAT64 = netip.MustParsePrefix("64:ff9b::/96")

// ipv4Compatible is ::a.b.c.d (RFC 4291, deprecated): nothing uses it but
// tricks; refused with :: and ::1.
var ipv4Compatible = netip.MustParsePrefix("::/96")

// Contains reports whether a lies in a bogon range, or carries an IPv4
// address that does (IPv4-mapped, IPv4-compatible, RFC 6052 NAT64 under the
// well-known prefix), unless one of public (prefixes the owner declared
// public, as the lab's synthetic Internet) holds it.
func Contains(a netip.Addr, public []netip.Prefix) bool {
	return Private(a, public, nil)
}

// Private is Contains with the network's own NAT64 prefixes (RFC 6052,
// as a path discovered them, RFC 7050): an address under one is the IPv4
// address it embeds.
func Private(a netip.Addr, public, nat64 []netip.Prefix) bool {
	a = a.Unmap()
	if v4, ok := Embedded4(a, nat64); ok {
		return contains(v4, public) // what the NAT64 reaches decides
	}
	if a.Is6() && ipv4Compatible.Contains(a) {
		return true
	}
	return contains(a, public)
}

// Embedded4 returns the IPv4 address a NAT64 address embeds (RFC 6052
// section 2.2: prefix lengths 32, 40, 48, 56, 64 and 96, skipping bits
// 64-71), under the well-known prefix or one of nat64.
func Embedded4(a netip.Addr, nat64 []netip.Prefix) (netip.Addr, bool) {
	if !a.Is6() || a.Is4In6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	for _, p := range append([]netip.Prefix{WellKnownNAT64}, nat64...) {
		if !p.Addr().Is6() || !p.Contains(a) {
			continue
		}
		var v4 [4]byte
		switch p.Bits() {
		case 32:
			copy(v4[:], b[4:8])
		case 40:
			copy(v4[:3], b[5:8])
			v4[3] = b[9]
		case 48:
			copy(v4[:2], b[6:8])
			copy(v4[2:], b[9:11])
		case 56:
			v4[0] = b[7]
			copy(v4[1:], b[9:12])
		case 64:
			copy(v4[:], b[9:13])
		case 96:
			copy(v4[:], b[12:16])
		default:
			continue
		}
		return netip.AddrFrom4(v4), true
	}
	return netip.Addr{}, false
}

func contains(a netip.Addr, public []netip.Prefix) bool {
	for _, p := range public {
		if p.Contains(a) {
			return false
		}
	}
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// LocalPrefixes are the subnets of every address of this host: an address
// there is on its owner's own network.
func LocalPrefixes() ([]netip.Prefix, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list the host's addresses: %w", err)
	}
	var out []netip.Prefix
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ip, _ := netip.AddrFromSlice(n.IP)
			ones, bits := n.Mask.Size()
			if ip.Is4In6() && bits == 128 {
				ones -= 96
			}
			if p, err := ip.Unmap().Prefix(ones); err == nil {
				out = append(out, p)
			}
		}
	}
	return out, nil
}
