package probe_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/probe"
)

// On the plain host, discovery must agree with iproute2 on every interface
// and address.
func TestDiscoverMatchesIproute2(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2")
	}
	out, err := exec.Command("ip", "-j", "addr", "show").Output()
	require.NoError(t, err)
	var links []struct {
		Ifname   string `json:"ifname"`
		Ifindex  int    `json:"ifindex"`
		AddrInfo []struct {
			Local     string `json:"local"`
			Prefixlen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	require.NoError(t, json.Unmarshal(out, &links))

	paths, err := probe.Discover(context.Background(), probe.DiscoverOptions{})
	require.NoError(t, err)
	require.Len(t, paths, len(links))
	for _, l := range links {
		p, err := probe.FindPath(paths, l.Ifname)
		require.NoError(t, err, l.Ifname)
		assert.Equal(t, l.Ifindex, p.Index, l.Ifname)
		assert.NotEmpty(t, p.Kind)
		want := map[string]int{}
		for _, a := range l.AddrInfo {
			want[netip.MustParseAddr(a.Local).String()] = a.Prefixlen
		}
		got := map[string]int{}
		for _, a := range p.Addrs {
			got[a.IP.String()] = a.PrefixLen
			assert.Equal(t, probe.ScopeOf(a.IP), a.Scope)
		}
		assert.Equal(t, want, got, l.Ifname)
		for _, d := range p.DNS {
			assert.True(t, d.Addr.IsValid(), l.Ifname)
			assert.NotEmpty(t, d.Source, l.Ifname)
		}
		if l.Ifname == "lo" {
			assert.Equal(t, probe.KindLoopback, p.Kind)
		}
	}
}
