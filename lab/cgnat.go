package lab

import (
	"fmt"
	"net/netip"
	"slices"
)

// CGNAT is the plan of a cgnat path (RFC 6598): the client's IPv4 side in
// the shared address space 100.64.0.0/10, the stateful NAT's public
// address (the path's usual client address, so the Internet's routes stay
// as they are), and a server "in the cellular core" that only this path
// reaches (004 §III supposes such servers).
type CGNAT struct {
	Client4  netip.Addr
	Gateway4 netip.Addr
	Subnet4  netip.Prefix
	Public   netip.Addr
	Core     netip.Addr
}

// CGNATOf returns the CGNAT plan of path name.
func CGNATOf(name string) CGNAT {
	i := slices.Index(PathNames, name) + 1 // wlan0 100.64.1.0/24, wwan0 100.64.2.0/24
	p, _ := Plan(name)
	return CGNAT{
		Client4:  netip.MustParseAddr(fmt.Sprintf("100.64.%d.2", i)),
		Gateway4: netip.MustParseAddr(fmt.Sprintf("100.64.%d.1", i)),
		Subnet4:  netip.MustParsePrefix(fmt.Sprintf("100.64.%d.0/24", i)),
		Public:   p.Client4,
		Core:     netip.MustParseAddr(fmt.Sprintf("100.64.254.%d", i)),
	}
}

// cgnatTable is the nftables table of path name's CGNAT.
func cgnatTable(name string) string { return "mpt_cgnat_" + name }

// cgnatRuleset is the CGNAT of path p as an nft script. The lab's servers
// are local to the Internet namespace, so the translation is a nat input
// chain (postrouting never sees locally delivered packets); conntrack
// reverses it on the replies. Behind a NAT64 (nat64) the NAT's inside is
// the translator's IPv4 side (its TUN), and the core server is reached
// through the translator: the path's NAT64 prefix then serves the path's
// own clients only, or another path could reach the core through it.
func cgnatRuleset(p PathPlan, nat64 bool) string {
	c := CGNATOf(p.Name)
	inside := p.Router
	if nat64 {
		inside = NAT64Behind(p.Name, true).TUN
	}
	s := fmt.Sprintf(`table ip %[1]s {
	chain pre {
		type filter hook prerouting priority -300; policy accept;
		ip daddr %[4]s iifname != %[2]q counter drop
	}
	chain natin {
		type nat hook input priority 100; policy accept;
		iifname %[2]q ip saddr %[3]s ip daddr != %[4]s counter snat to %[5]s
	}
	chain natout {
		type nat hook output priority -100; policy accept;
	}
	chain out {
		type filter hook output priority 0; policy accept;
		oifname %[2]q ip daddr %[3]s ct state new counter drop
	}
}
`, cgnatTable(p.Name), inside, c.Subnet4, c.Core, c.Public)
	if nat64 {
		s += fmt.Sprintf(`table ip6 %[1]s {
	chain pre {
		type filter hook prerouting priority -300; policy accept;
		ip6 daddr %[2]s iifname != %[3]q counter drop
	}
}
`, cgnatTable(p.Name), NAT64Of(p.Name).Prefix, p.Router)
	}
	return s
}

// nat64Paths are the paths built IPv6-only behind a NAT64 (lab up's
// "nat64" setting).
func (o *Options) nat64Paths() map[string]bool {
	return o.pathsWith(func(c ImpairChange) *bool { return c.NAT64 })
}

// no7050Paths are the nat64 paths whose DNS64 hides ipv4only.arpa
// (nat64=no-rfc7050).
func (o *Options) no7050Paths() map[string]bool {
	return o.pathsWith(func(c ImpairChange) *bool { return c.NAT64No7050 })
}

// cgnatPaths are the paths built behind a CGNAT (lab up's "cgnat").
func (o *Options) cgnatPaths() map[string]bool {
	return o.pathsWith(func(c ImpairChange) *bool { return c.CGNAT })
}

// pathsWith are the paths whose build-time setting (setting of their
// ImpairChange) is on.
func (o *Options) pathsWith(setting func(ImpairChange) *bool) map[string]bool {
	m := map[string]bool{}
	for name, c := range o.Impair {
		if on := setting(c); on != nil && *on {
			m[name] = true
		}
	}
	return m
}

// plan is path name's address plan as this lab builds it: a cgnat path's
// client IPv4 side is in 100.64.0.0/10 (behind a NAT64 the client has no
// IPv4: the translator's side is, NAT64Behind).
func (o *Options) plan(name string) PathPlan {
	p, _ := Plan(name)
	if o.cgnatPaths()[name] && !o.nat64Paths()[name] {
		c := CGNATOf(name)
		p.Client4, p.Gateway4, p.Subnet4 = c.Client4, c.Gateway4, c.Subnet4.String()
	}
	return p
}
