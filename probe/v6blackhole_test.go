package probe

import (
	"context"
	"net/netip"
	"testing"
	"time"
)

// A path that cannot tell says nothing: no IPv6 address, or not both an
// IPv4 and an IPv6 resolver of its own (the paths are not interfaces of
// this host: nothing could be sent).
func TestDetectV6BlackholeCannotTell(t *testing.T) {
	addr := func(s string) Addr {
		p := netip.MustParsePrefix(s)
		return Addr{IP: p.Addr(), PrefixLen: p.Bits(), Scope: ScopeGlobal}
	}
	dns := func(s string) DNSServer { return DNSServer{Addr: netip.MustParseAddrPort(s), Source: "flag"} }
	for name, p := range map[string]Path{
		"IPv4 only":          {Name: "a", Up: true, Addrs: []Addr{addr("198.18.1.2/24")}, DNS: []DNSServer{dns("198.18.100.1:53"), dns("[fd00:100::1]:53")}},
		"IPv6 resolver only": {Name: "b", Up: true, Addrs: []Addr{addr("198.18.1.2/24"), addr("fd00:1::2/64")}, DNS: []DNSServer{dns("[fd00:100::1]:53")}},
		"IPv4 resolver only": {Name: "c", Up: true, Addrs: []Addr{addr("198.18.1.2/24"), addr("fd00:1::2/64")}, DNS: []DNSServer{dns("198.18.100.1:53")}},
	} {
		if got := DetectV6Blackhole(context.Background(), p, time.Second); got != "" {
			t.Errorf("%s: %q, want nothing", name, got)
		}
	}
}
