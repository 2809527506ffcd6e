package doctor

import (
	"context"
	"net/netip"
	"os"
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

// With a portal detector, doctor names a captive portal per path from
// what it measured there (fail, with what it means) and says none on the
// others; without one it makes no portal check (no traffic).
func TestPortalChecks(t *testing.T) {
	paths := []probe.Path{accessPath("wlan0", "198.18.1.2/24"), accessPath("wwan0", "198.18.2.2/24")}
	detect := func(_ context.Context, p probe.Path) string {
		if p.Name == "wlan0" {
			return "portal: names that cannot exist resolve to 198.18.199.1"
		}
		return ""
	}
	checks := measuredChecks(context.Background(), paths, detect, portalCheck)
	if assert.Len(t, checks, 2) {
		assert.Equal(t, "access.wlan0.portal", checks[0].ID)
		assert.Equal(t, StatusFail, checks[0].Status)
		assert.Contains(t, checks[0].Detail, "198.18.199.1")
		assert.Contains(t, checks[0].Detail, "reach the portal, not the Internet")
		assert.Equal(t, "access.wwan0.portal", checks[1].ID)
		assert.Equal(t, StatusOK, checks[1].Status)
	}
	var ids []string
	for _, c := range Run(context.Background(), Env{Paths: paths, ReadFile: func(string) ([]byte, error) { return nil, os.ErrNotExist },
		Command: func(context.Context, string, ...string) ([]byte, error) { return nil, os.ErrNotExist }}) {
		ids = append(ids, c.ID)
	}
	assert.NotContains(t, ids, "access.wlan0.portal", "no detector, no portal check")
}

// With an IPv6 black-hole detector, doctor warns per path where it found
// one, saying what it means, and says none on the others.
func TestV6BlackholeChecks(t *testing.T) {
	paths := []probe.Path{accessPath("wlan0", "198.18.1.2/24", "fd00:1::2/64"), accessPath("wwan0", "198.18.2.2/24", "fd00:2::2/64")}
	checks := Run(context.Background(), Env{Paths: paths, ReadFile: func(string) ([]byte, error) { return nil, os.ErrNotExist },
		Command: func(context.Context, string, ...string) ([]byte, error) { return nil, os.ErrNotExist },
		V6Blackhole: func(_ context.Context, p probe.Path) string {
			return map[string]string{"wlan0": "v6-blackhole: wlan0 ..."}[p.Name]
		}})
	got := map[string]Check{}
	for _, c := range checks {
		got[c.ID] = c
	}
	assert.Equal(t, StatusWarn, got["access.wlan0.v6-blackhole"].Status)
	assert.Contains(t, got["access.wlan0.v6-blackhole"].Detail, "IPv6 measurements over wlan0 time out")
	assert.Equal(t, StatusOK, got["access.wwan0.v6-blackhole"].Status)
}

// With a NAT64 detector, doctor names a path's prefix (ok, with what it
// means), warns on an IPv6-only path without one (with the flag that
// gives it), and says none on a dual-stack path.
func TestNAT64Checks(t *testing.T) {
	paths := []probe.Path{accessPath("wlan0", "198.18.1.2/24", "fd00:1::2/64"), accessPath("wwan0", "fd00:2::2/64"), accessPath("rmnet0", "fd00:3::2/64")}
	checks := measuredChecks(context.Background(), paths, func(_ context.Context, p probe.Path) string {
		return map[string]string{"wwan0": "fd00:64::/96"}[p.Name]
	}, nat64Check)
	if assert.Len(t, checks, 3) {
		assert.Equal(t, [2]any{"access.wlan0.nat64", StatusOK}, [2]any{checks[0].ID, checks[0].Status})
		assert.Equal(t, StatusOK, checks[1].Status)
		assert.Contains(t, checks[1].Detail, "prefix fd00:64::/96")
		assert.Equal(t, StatusWarn, checks[2].Status)
		assert.Equal(t, "mptester survey --nat64-prefix rmnet0=PREFIX", checks[2].Fix)
	}
}
