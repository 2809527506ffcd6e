package doctor

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mptester/mptester/probe"
)

func accessPath(name string, addrs ...string) probe.Path {
	p := probe.Path{Name: name, Up: true, Kind: probe.KindCellular}
	for _, a := range addrs {
		pf := netip.MustParsePrefix(a)
		p.Addrs = append(p.Addrs, probe.Addr{IP: pf.Addr(), PrefixLen: pf.Bits(), Scope: probe.ScopeGlobal})
	}
	return p
}

// An IPv6-only path warns (IPv4 targets need a NAT64) with the command
// that finds its prefix; a CGNAT address is noted; a dual-stack path with
// a public IPv4 address gets no access check.
func TestAccessChecks(t *testing.T) {
	checks := accessChecks([]probe.Path{
		accessPath("wlan0", "198.18.1.2/24", "fd00:1::2/64"),
		accessPath("wwan0", "fd00:2::2/64"),
		accessPath("rmnet0", "100.64.7.9/30"),
	})
	var got []string
	for _, c := range checks {
		got = append(got, c.ID)
	}
	assert.Equal(t, []string{"access.wwan0.ipv6-only", "access.rmnet0.cgnat"}, got)
	assert.Equal(t, StatusWarn, checks[0].Status)
	assert.Equal(t, "mptester ifaces --nat64", checks[0].Fix)
	assert.Contains(t, checks[1].Detail, "100.64.7.9")
	assert.Equal(t, StatusOK, checks[1].Status)
}
