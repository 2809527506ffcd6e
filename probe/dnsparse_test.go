package probe

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseDNSServer(t *testing.T) {
	for in, want := range map[string]string{
		"198.18.100.1":        "198.18.100.1:53",
		"198.18.100.1:5353":   "198.18.100.1:5353",
		"fd00:100::1":         "[fd00:100::1]:53",
		"[fd00:100::1]:5353":  "[fd00:100::1]:5353",
		"198.18.0.1#dns.test": "198.18.0.1:53",
		"fe80::1%2":           "[fe80::1]:53",
		" 198.18.0.9 ":        "198.18.0.9:53",
		"::ffff:198.18.0.7":   "198.18.0.7:53",
	} {
		got, err := ParseDNSServer(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got.String(), in)
	}
	for _, bad := range []string{"", "dns.example", "198.18.0.1:x", "1.2.3"} {
		_, err := ParseDNSServer(bad)
		assert.Error(t, err, bad)
	}
}

func TestParseResolvConfAndNmcli(t *testing.T) {
	rc := "# generated\nsearch lan\nnameserver 198.18.0.53\nnameserver fd00::53\nnameserver bogus\noptions edns0\n"
	assert.Equal(t, []netip.AddrPort{netip.MustParseAddrPort("198.18.0.53:53"), netip.MustParseAddrPort("[fd00::53]:53")}, parseResolvConf(rc))
	nm := "IP4.DNS[1]:198.18.0.1\nIP4.DNS[2]:198.18.0.2\nIP6.DNS[1]:fd00\\:\\:1\nGENERAL.DEVICE:wlan0\n"
	assert.Equal(t, []netip.AddrPort{netip.MustParseAddrPort("198.18.0.1:53"), netip.MustParseAddrPort("198.18.0.2:53"), netip.MustParseAddrPort("[fd00::1]:53")}, parseNmcli(nm))
}

func TestParseScutilDNS(t *testing.T) {
	text := `DNS configuration

resolver #1
  search domain[0] : lan
  nameserver[0] : 198.18.0.1
  if_index : 6 (en0)
  flags    : Request A records
  reach    : 0x00020002 (Reachable,Directly Reachable Address)

resolver #2
  domain   : local
  options  : mdns

DNS configuration (for scoped queries)

resolver #1
  nameserver[0] : 198.18.0.1
  if_index : 6 (en0)
  flags    : Scoped, Request A records

resolver #2
  nameserver[0] : 198.19.0.1
  nameserver[1] : fd00:2::1
  if_index : 14 (pdp_ip0)
  flags    : Scoped, Request A records, Request AAAA records
`
	scoped, global := parseScutilDNS(text)
	assert.Equal(t, []netip.AddrPort{netip.MustParseAddrPort("198.18.0.1:53")}, global)
	assert.Equal(t, map[string][]netip.AddrPort{
		"en0":     {netip.MustParseAddrPort("198.18.0.1:53")},
		"pdp_ip0": {netip.MustParseAddrPort("198.19.0.1:53"), netip.MustParseAddrPort("[fd00:2::1]:53")},
	}, scoped)
	ports := parseHardwarePorts("Hardware Port: Wi-Fi\nDevice: en0\nEthernet Address: x\n\nHardware Port: iPhone USB\nDevice: en5\n\nHardware Port: Thunderbolt Ethernet\nDevice: en7\n")
	assert.Equal(t, map[string]Kind{"en0": KindWiFi, "en5": KindCellular, "en7": KindEthernet}, ports)
}

func TestParseDNSFlag(t *testing.T) {
	got, err := ParseDNSFlag([]string{"wwan0=198.18.100.2", "wlan0=198.18.100.1,fd00:100::1"})
	require.NoError(t, err)
	assert.Len(t, got["wlan0"], 2)
	assert.Equal(t, "198.18.100.2:53", got["wwan0"][0].String())
	for _, bad := range []string{"wwan0", "=198.18.0.1", "wwan0=", "wwan0=nope"} {
		_, err := ParseDNSFlag([]string{bad})
		assert.ErrorContains(t, err, "invalid --dns", bad)
	}
}

func TestAttachDNSPrecedence(t *testing.T) {
	flag := netip.MustParseAddrPort("198.18.0.1:53")
	cfg := netip.MustParseAddrPort("198.18.0.2:53")
	v4 := []Addr{{IP: netip.MustParseAddr("198.18.1.2"), PrefixLen: 24, Scope: ScopeGlobal}}
	v6 := []Addr{{IP: netip.MustParseAddr("fd00:6::2"), PrefixLen: 64, Scope: ScopeOf(netip.MustParseAddr("fd00:6::2"))}}
	cfg6 := netip.MustParseAddrPort("[fd00:6::1]:53")
	paths := []Path{{Name: "wlan0", Addrs: v4}, {Name: "wwan0", Addrs: v4}, {Name: "eth0", Addrs: v4},
		{Name: "lo", Kind: KindLoopback}, {Name: "v6only", Addrs: v6}}
	attachDNS(t.Context(), paths, DiscoverOptions{
		FlagDNS:   map[string][]netip.AddrPort{"wlan0": {flag}},
		ConfigDNS: map[string][]netip.AddrPort{"wlan0": {cfg}, "wwan0": {cfg}, "v6only": {cfg, cfg6}},
	})
	assert.Equal(t, []DNSServer{{Addr: cfg6, Source: DNSSourceConfig}}, paths[4].DNS,
		"an IPv6-only path keeps only the servers it can ask")
	for _, d := range paths[4].DNS {
		assert.True(t, d.Addr.Addr().Is6())
	}
	assert.Equal(t, []DNSServer{{Addr: flag, Source: DNSSourceFlag}}, paths[0].DNS, "flag beats config")
	assert.Equal(t, []DNSServer{{Addr: cfg, Source: DNSSourceConfig}}, paths[1].DNS, "config beats the OS")
	for _, d := range paths[2].DNS {
		assert.NotEqual(t, DNSSourceFlag, d.Source)
		assert.NotEqual(t, DNSSourceConfig, d.Source)
	}
	assert.Empty(t, paths[3].DNS, "loopback gets no shared resolvers")
}

func FuzzParseDNSServer(f *testing.F) {
	for _, s := range []string{"198.18.0.1", "[fd00::1]:53", "a#b", "fe80::1%eth0", "::ffff:1.2.3.4:99", "%", "#"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ap, err := ParseDNSServer(s)
		if err == nil && !ap.Addr().IsValid() {
			t.Fatalf("%q: no error but invalid address", s)
		}
		parseScutilDNS(s)
		parseNmcli(s)
		parseResolvConf(s)
		parseHardwarePorts(s)
	})
}
