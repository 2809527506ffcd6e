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

// Contains reports whether a lies in a bogon range, unless one of public
// (prefixes the owner declared public, as the lab's synthetic Internet) holds it.
func Contains(a netip.Addr, public []netip.Prefix) bool {
	a = a.Unmap()
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
