package probe_test

import (
	"bufio"
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/netns"
	"github.com/mptester/mptester/internal/nstest"
	"github.com/mptester/mptester/probe"
)

// twoPathHost builds a client namespace with veths named wlan0 and wwan0
// (as on a Wi-Fi + LTE host) and a server namespace behind both, with
// default routes (wlan0 preferred) and per-path source policy rules.
type twoPathHost struct {
	client, server *nstest.NS
}

var (
	srv4 = netip.MustParseAddr("198.18.3.1")
	srv6 = netip.MustParseAddr("fd00:3::1")
	// path -> family -> client address
	pathAddr = map[string]map[probe.Family]netip.Addr{
		"wlan0": {probe.Family4: netip.MustParseAddr("198.18.1.2"), probe.Family6: netip.MustParseAddr("fd00:1::2")},
		"wwan0": {probe.Family4: netip.MustParseAddr("198.18.2.2"), probe.Family6: netip.MustParseAddr("fd00:2::2")},
	}
)

func newTwoPathHost(t *testing.T, policyRules bool) *twoPathHost {
	h := &twoPathHost{client: nstest.New(t), server: nstest.New(t)}
	c, s := h.client, h.server
	for i, name := range []string{"wlan0", "wwan0"} {
		n := strconv.Itoa(i + 1)
		c.Veth(name, s, "gw"+n)
		c.IP("addr", "add", "198.18."+n+".2/24", "dev", name)
		c.IP("-6", "addr", "add", "fd00:"+n+"::2/64", "dev", name, "nodad")
		s.IP("addr", "add", "198.18."+n+".1/24", "dev", "gw"+n)
		s.IP("-6", "addr", "add", "fd00:"+n+"::1/64", "dev", "gw"+n, "nodad")
		metric := strconv.Itoa(100 * (i + 1))
		c.IP("route", "add", "default", "via", "198.18."+n+".1", "dev", name, "metric", metric)
		c.IP("-6", "route", "add", "default", "via", "fd00:"+n+"::1", "dev", name, "metric", metric)
		if policyRules {
			for _, args := range policyRuleCmds(name, n) {
				c.IP(args...)
			}
		}
	}
	s.IP("addr", "add", srv4.String()+"/32", "dev", "lo")
	s.IP("-6", "addr", "add", srv6.String()+"/128", "dev", "lo", "nodad")
	return h
}

// policyRuleCmds are the `ip` arguments of source-address policy routing
// for one path: what a multihomed host needs for source-bound (MPTCP)
// traffic to leave through the path that owns the source address.
func policyRuleCmds(name, n string) [][]string {
	table := "10" + n
	return [][]string{
		{"rule", "add", "from", "198.18." + n + ".2", "table", table},
		{"route", "add", "default", "via", "198.18." + n + ".1", "dev", name, "table", table},
		{"-6", "rule", "add", "from", "fd00:" + n + "::2", "table", table},
		{"-6", "route", "add", "default", "via", "fd00:" + n + "::1", "dev", name, "table", table},
	}
}

// listenIn opens a listener inside namespace ns from this process: the
// socket lives in ns while the rest of the process stays where it was.
func listenIn(t *testing.T, ns, network, addr string, mptcp bool) net.Listener {
	t.Helper()
	var l net.Listener
	require.NoError(t, netns.Do(ns, func() (err error) {
		lc := net.ListenConfig{}
		lc.SetMultipathTCP(mptcp)
		l, err = lc.Listen(context.Background(), network, addr)
		return err
	}))
	t.Cleanup(func() { l.Close() })
	return l
}

// serveRemoteAddr answers every connection with the address it came from,
// so the client can check which source address the server really saw.
func serveRemoteAddr(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		mp := false
		if tc, ok := c.(*net.TCPConn); ok {
			mp, _ = tc.MultipathTCP()
		}
		c.Write([]byte(c.RemoteAddr().String() + " mptcp=" + strconv.FormatBool(mp) + "\n"))
		c.Close()
	}
}

// seenSource parses the address serveRemoteAddr reports.
func seenSource(t *testing.T, line string) netip.Addr {
	ap, err := netip.ParseAddrPort(strings.Fields(line)[0])
	require.NoError(t, err)
	return ap.Addr().Unmap()
}

func txPackets(t *testing.T, iface string) int {
	b, err := os.ReadFile("/sys/class/net/" + iface + "/statistics/tx_packets")
	require.NoError(t, err)
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	return n
}

func TestBindingLeavesThroughChosenPath(t *testing.T) {
	// No policy rules at first: the default route prefers wlan0, so only the
	// device binding can make TCP/UDP traffic leave through wwan0.
	h := newTwoPathHost(t, false)
	if !nstest.IsChild() {
		for _, network := range []string{"tcp4", "tcp6"} {
			host := srv4.String()
			if network == "tcp6" {
				host = "[" + srv6.String() + "]"
			}
			go serveRemoteAddr(listenIn(t, h.server.Name, network, host+":8443", false))
			go serveRemoteAddr(listenIn(t, h.server.Name, network, host+":8444", true))
		}
	}
	if !nstest.InNS(t, h.client) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	paths, err := probe.Discover(ctx, probe.DiscoverOptions{})
	require.NoError(t, err)

	for _, name := range []string{"wlan0", "wwan0"} {
		p, err := probe.FindPath(paths, name)
		require.NoError(t, err)
		other := map[string]string{"wlan0": "wwan0", "wwan0": "wlan0"}[name]
		for _, fam := range []probe.Family{probe.Family4, probe.Family6} {
			want := pathAddr[name][fam]
			dst := netip.AddrPortFrom(srv4, 0)
			if fam == probe.Family6 {
				dst = netip.AddrPortFrom(srv6, 0)
			}
			t.Run(name+"/"+strconv.Itoa(int(fam)), func(t *testing.T) {
				check := func(kind string, c net.Conn, wantMPTCP bool) {
					local, err := netip.ParseAddrPort(c.LocalAddr().String()) // getsockname
					require.NoError(t, err)
					assert.Equal(t, want, local.Addr().Unmap(), "%s local address", kind)
					if wantMPTCP || kind == "tcp" {
						line, err := bufio.NewReader(c).ReadString('\n')
						require.NoError(t, err)
						assert.Equal(t, want, seenSource(t, line), "%s: server saw another source", kind)
						assert.Contains(t, line, "mptcp="+strconv.FormatBool(wantMPTCP), kind)
					}
				}
				beforeP, beforeO := txPackets(t, name), txPackets(t, other)

				c, err := probe.DialContext(ctx, p, "tcp", netip.AddrPortFrom(dst.Addr(), 8443).String())
				require.NoError(t, err)
				check("tcp", c, false)
				c.Close()

				u, err := probe.DialContext(ctx, p, "udp", netip.AddrPortFrom(dst.Addr(), 53).String())
				require.NoError(t, err)
				check("udp", u, false)
				_, err = u.Write([]byte("x"))
				require.NoError(t, err)
				u.Close()

				lu, err := probe.ListenUDP(ctx, p, fam)
				require.NoError(t, err)
				check("udp-listen", lu, false)
				lu.Close()

				dP, dO := txPackets(t, name)-beforeP, txPackets(t, other)-beforeO
				assert.GreaterOrEqual(t, dP, 4, "packets sent through %s", name)
				assert.Less(t, dO, dP, "packets leaked through %s", other)

			})
		}
	}

	// MPTCP is bound by source address only (SO_BINDTODEVICE would be copied
	// to every subflow), so it relies on the host's source policy rules.
	for i, name := range []string{"wlan0", "wwan0"} {
		for _, args := range policyRuleCmds(name, strconv.Itoa(i+1)) {
			out, err := exec.Command("ip", args...).CombinedOutput()
			require.NoError(t, err, "ip %v: %s", args, out)
		}
	}
	for _, name := range []string{"wlan0", "wwan0"} {
		p, _ := probe.FindPath(paths, name)
		other := map[string]string{"wlan0": "wwan0", "wwan0": "wlan0"}[name]
		for _, fam := range []probe.Family{probe.Family4, probe.Family6} {
			want := pathAddr[name][fam]
			dst := srv4
			if fam == probe.Family6 {
				dst = srv6
			}
			beforeP, beforeO := txPackets(t, name), txPackets(t, other)
			m, err := probe.DialMPTCP(ctx, p, "tcp", netip.AddrPortFrom(dst, 8444).String())
			require.NoError(t, err)
			assert.True(t, m.Negotiated, "MPTCP must be negotiated with an MPTCP server")
			local, err := netip.ParseAddrPort(m.LocalAddr().String())
			require.NoError(t, err)
			assert.Equal(t, want, local.Addr().Unmap(), "mptcp local address via %s", name)
			line, err := bufio.NewReader(m).ReadString('\n')
			require.NoError(t, err)
			assert.Equal(t, want, seenSource(t, line), "server saw another source")
			assert.Contains(t, line, "mptcp=true")
			m.Close()
			dP, dO := txPackets(t, name)-beforeP, txPackets(t, other)-beforeO
			assert.GreaterOrEqual(t, dP, 2, "MPTCP packets sent through %s", name)
			assert.Less(t, dO, dP, "MPTCP packets leaked through %s", other)
		}
	}

	// MPTCP to a plain TCP server falls back; the result must say so.
	p, _ := probe.FindPath(paths, "wlan0")
	m, err := probe.DialMPTCP(ctx, p, "tcp", netip.AddrPortFrom(srv4, 8443).String())
	require.NoError(t, err)
	assert.False(t, m.Negotiated, "fallback to TCP must be reported")
	m.Close()
}

func TestDiscoverTwoPaths(t *testing.T) {
	h := newTwoPathHost(t, true)
	if !nstest.InNS(t, h.client) {
		return
	}
	ctx := context.Background()
	paths, err := probe.Discover(ctx, probe.DiscoverOptions{
		FlagDNS: map[string][]netip.AddrPort{"wwan0": {netip.MustParseAddrPort("198.18.2.53:53")}},
	})
	require.NoError(t, err)
	names := []string{}
	for _, p := range paths {
		names = append(names, p.Name)
	}
	assert.ElementsMatch(t, []string{"lo", "wlan0", "wwan0"}, names)

	kinds := map[string]probe.Kind{"lo": probe.KindLoopback, "wlan0": probe.KindWiFi, "wwan0": probe.KindCellular}
	for _, p := range paths {
		assert.Equal(t, kinds[p.Name], p.Kind, p.Name)
		if p.Name == "lo" {
			assert.False(t, p.DefaultRoute)
			continue
		}
		assert.True(t, p.Up, p.Name)
		assert.True(t, p.DefaultRoute, "%s has a default route", p.Name)
		for fam, want := range pathAddr[p.Name] {
			got, ok := p.SourceAddr(fam)
			assert.True(t, ok, "%s has an IPv%d address", p.Name, fam)
			assert.Equal(t, want, got, p.Name)
		}
		assert.True(t, p.HasAddr(pathAddr[p.Name][probe.Family4]))
	}
	wwan, _ := probe.FindPath(paths, "wwan0")
	require.NotEmpty(t, wwan.DNS)
	assert.Equal(t, probe.DNSServer{Addr: netip.MustParseAddrPort("198.18.2.53:53"), Source: probe.DNSSourceFlag}, wwan.DNS[0])
	wlan, _ := probe.FindPath(paths, "wlan0")
	for _, d := range wlan.DNS {
		assert.NotEqual(t, probe.DNSSourceFlag, d.Source, "--dns wwan0=... must not touch wlan0")
	}
}
