package probe

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/mptester/mptester/internal/dnstest"
)

// RFC 6052 §2.4's table: 192.0.2.33 under each prefix length.
func TestEmbedExtractRFC6052(t *testing.T) {
	v4 := netip.MustParseAddr("192.0.2.33")
	for _, c := range []struct{ prefix, addr string }{
		{"2001:db8::/32", "2001:db8:c000:221::"},
		{"2001:db8:100::/40", "2001:db8:1c0:2:21::"},
		{"2001:db8:122::/48", "2001:db8:122:c000:2:2100::"},
		{"2001:db8:122:300::/56", "2001:db8:122:3c0:0:221::"},
		{"2001:db8:122:344::/64", "2001:db8:122:344:c0:2:2100:0"},
		{"2001:db8:122:344::/96", "2001:db8:122:344::192.0.2.33"},
		{"64:ff9b::/96", "64:ff9b::192.0.2.33"},
	} {
		p := netip.MustParsePrefix(c.prefix)
		want := netip.MustParseAddr(c.addr)
		got, ok := Embed4(p, v4)
		if !ok || got != want {
			t.Errorf("Embed4(%s, %s) = %s, %v; want %s", p, v4, got, ok, want)
		}
		back, ok := Extract4(want, p.Bits())
		if !ok || back != v4 {
			t.Errorf("Extract4(%s, %d) = %s, %v; want %s", want, p.Bits(), back, ok, v4)
		}
	}
	if _, ok := Extract4(netip.MustParseAddr("2001:db8:122:344:ffc0:2:2100:0"), 64); ok {
		t.Error("Extract4 accepted a non-zero u octet")
	}
	if _, ok := Embed4(netip.MustParsePrefix("2001:db8::/33"), v4); ok {
		t.Error("Embed4 accepted a /33")
	}
}

func TestNAT64Prefixes(t *testing.T) {
	got := NAT64Prefixes([]netip.Addr{netip.MustParseAddr("fd00:64::c000:aa"), netip.MustParseAddr("fd00:64::c000:ab"),
		netip.MustParseAddr("2001:db8:122:344:c0:0:aa00:0"), netip.MustParseAddr("fd00:200::1")})
	want := []netip.Prefix{netip.MustParsePrefix("fd00:64::/96"), netip.MustParsePrefix("2001:db8:122:344::/64")}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("NAT64Prefixes = %v, want %v", got, want)
	}
	if p := NAT64Prefixes([]netip.Addr{netip.MustParseAddr("fd00:ff::1")}); len(p) != 0 {
		t.Errorf("a real AAAA gave prefixes %v", p)
	}
}

// Extract4 of Embed4 is the identity for every allowed length; neither
// panics on any input.
func FuzzNAT64(f *testing.F) {
	f.Add([]byte("0123456789abcdef"), []byte{192, 0, 2, 33}, 96)
	f.Fuzz(func(t *testing.T, a16, a4 []byte, plen int) {
		if len(a16) < 16 || len(a4) < 4 {
			return
		}
		a := netip.AddrFrom16([16]byte(a16[:16]))
		v4 := netip.AddrFrom4([4]byte(a4[:4]))
		_, _ = Extract4(a, plen)
		if plen < 0 || plen > 128 {
			return
		}
		p := netip.PrefixFrom(a, plen)
		s, ok := Embed4(p, v4)
		if !ok {
			return
		}
		if back, ok := Extract4(s, plen); !ok || back != v4 {
			t.Fatalf("Extract4(Embed4(%s, %s)) = %s, %v", p, v4, back, ok)
		}
		_ = NAT64Prefixes([]netip.Addr{s, a})
	})
}

// TestDiscoverNAT64Paths: a path asks its own DNS servers: a DNS64's
// path gets its prefix, a plain resolver's none, a failing one its error;
// a path without DNS servers is not asked. (One loopback path per call:
// a path's name is the interface its queries are bound to.)
func TestDiscoverNAT64Paths(t *testing.T) {
	ask := func(z dns.Handler) (NAT64Discovery, bool) {
		p := loopbackPath(t)
		if z != nil {
			p = loopbackPath(t, serveZone(t, z))
		}
		d, ok := DiscoverNAT64Paths(context.Background(), []Path{p}, time.Second)[p.Name]
		return d, ok
	}
	if d, _ := ask(&dnstest.Zone{AAAA: map[string][]string{"ipv4only.arpa.": {"fd00:64::c000:aa", "fd00:64::c000:ab"}}}); d.Err != nil ||
		len(d.Prefixes) != 1 || d.Prefixes[0] != netip.MustParsePrefix("fd00:64::/96") {
		t.Errorf("a DNS64: %+v", d)
	}
	if d, _ := ask(&dnstest.Zone{}); d.Err != nil || len(d.Prefixes) != 0 {
		t.Errorf("a plain resolver: %+v", d)
	}
	if d, _ := ask(&dnstest.Zone{Rcode: map[string]int{"ipv4only.arpa.": dns.RcodeServerFailure}}); d.Err == nil {
		t.Errorf("a failing resolver: %+v, want an error", d)
	}
	if d, ok := ask(nil); ok {
		t.Errorf("a path without DNS servers was asked: %+v", d)
	}
}
