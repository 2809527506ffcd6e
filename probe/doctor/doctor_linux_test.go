package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/probe"
)

// fakeSys is a planted system: /proc files and iproute2 outputs. It is a
// fake only to inject faults; the netns tests run the real thing.
type fakeSys struct {
	files map[string]string
	cmds  map[string]string // "ip -4 -j rule show" -> stdout
	paths []probe.Path
	euid  int
}

func (f *fakeSys) env() Env {
	euid := f.euid
	return Env{
		Paths: f.paths,
		ReadFile: func(name string) ([]byte, error) {
			s, ok := f.files[name]
			if !ok {
				return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
			}
			return []byte(s), nil
		},
		Command: func(_ context.Context, name string, args ...string) ([]byte, error) {
			key := name + " " + strings.Join(args, " ")
			s, ok := f.cmds[key]
			if !ok {
				return nil, fmt.Errorf("%s: exit status 255", key)
			}
			return []byte(s), nil
		},
		Executable: "/usr/bin/mptester",
		Euid:       &euid,
	}
}

func path(name string, index int, kind probe.Kind, addrs ...string) probe.Path {
	p := probe.Path{Name: name, Index: index, Kind: kind, Up: true, Flags: []string{"up"}}
	for _, a := range addrs {
		pfx := netip.MustParsePrefix(a)
		p.Addrs = append(p.Addrs, probe.Addr{IP: pfx.Addr(), PrefixLen: pfx.Bits(), Scope: probe.ScopeOf(pfx.Addr())})
	}
	return p
}

func dns(addr string, shared bool) probe.DNSServer {
	src := probe.DNSSourceSystemdResolved
	if shared {
		src = probe.DNSSourceResolvConf
	}
	return probe.DNSServer{Addr: netip.MustParseAddrPort(addr), Source: src, Shared: shared}
}

// healthy is a two-path host with everything set up: wlan0 primary
// (metric 100), wwan0 secondary (metric 200) with an MPTCP subflow
// endpoint and policy routing in table 102 for both families.
func healthy() *fakeSys {
	lo := path("lo", 1, probe.KindLoopback, "127.0.0.1/8", "::1/128")
	lo.Flags = []string{"up", "loopback"}
	wlan := path("wlan0", 2, probe.KindWiFi, "198.18.1.2/24", "fd00:1::2/64", "fe80::1/64")
	wlan.DNS = []probe.DNSServer{dns("198.18.1.1:53", false)}
	wlan.DefaultRoute = true
	wwan := path("wwan0", 3, probe.KindCellular, "198.18.2.2/24", "fd00:2::2/64")
	wwan.DNS = []probe.DNSServer{dns("198.18.2.1:53", false)}
	wwan.DefaultRoute = true
	return &fakeSys{
		euid:  0,
		paths: []probe.Path{lo, wlan, wwan},
		files: map[string]string{
			"/proc/self/status":                       "Name:\tmptester\nCapEff:\t000001ffffffffff\n",
			"/proc/sys/net/mptcp/enabled":             "1\n",
			"/proc/sys/net/core/rmem_max":             "7500000\n",
			"/proc/sys/net/ipv4/conf/all/rp_filter":   "0\n",
			"/proc/sys/net/ipv4/conf/wlan0/rp_filter": "1\n", // strict on the primary is harmless
			"/proc/sys/net/ipv4/conf/wwan0/rp_filter": "2\n",
		},
		cmds: map[string]string{
			"ip -j mptcp endpoint show": `[{"address":"198.18.2.2","id":1,"subflow":true,"dev":"wwan0"}]`,
			"ip -j mptcp limits show":   "add_addr_accepted 1 subflows 2 \n",
			"ip -4 -j rule show": `[{"priority":0,"src":"all","table":"local"},` +
				`{"priority":32765,"src":"198.18.2.2","table":"102"},` +
				`{"priority":32766,"src":"all","table":"main"},{"priority":32767,"src":"all","table":"default"}]`,
			"ip -6 -j rule show": `[{"priority":0,"src":"all","table":"local"},` +
				`{"priority":32765,"src":"fd00:2::","srclen":64,"table":"102"},` +
				`{"priority":32766,"src":"all","table":"main"}]`,
			"ip -4 -j route show table all": `[{"dst":"default","gateway":"198.18.2.1","dev":"wwan0","table":"102","flags":[]},` +
				`{"dst":"default","gateway":"198.18.1.1","dev":"wlan0","metric":100,"flags":[]},` +
				`{"dst":"default","gateway":"198.18.2.1","dev":"wwan0","metric":200,"flags":[]},` +
				`{"dst":"198.18.2.0/24","dev":"wwan0","protocol":"kernel","scope":"link","prefsrc":"198.18.2.2","flags":[]},` +
				`{"type":"local","dst":"198.18.2.2","dev":"wwan0","table":"local","protocol":"kernel","scope":"host","prefsrc":"198.18.2.2","flags":[]}]`,
			"ip -6 -j route show table all": `[{"dst":"default","gateway":"fd00:2::1","dev":"wwan0","table":"102","metric":1024,"flags":[]},` +
				`{"dst":"default","gateway":"fd00:1::1","dev":"wlan0","metric":100,"flags":[]},` +
				`{"dst":"default","gateway":"fd00:2::1","dev":"wwan0","metric":200,"flags":[]}]`,
		},
	}
}

func byID(t *testing.T, checks []Check, id string) Check {
	t.Helper()
	for _, c := range checks {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no check %q in %v", id, ids(checks))
	return Check{}
}

func ids(checks []Check) []string {
	var out []string
	for _, c := range checks {
		out = append(out, c.ID)
	}
	return out
}

func TestHealthyHostAllOK(t *testing.T) {
	checks := Run(context.Background(), healthy().env())
	for _, c := range checks {
		assert.Equal(t, StatusOK, c.Status, "%s: %s", c.ID, c.Detail)
		assert.Empty(t, c.Fix, c.ID)
	}
	assert.Equal(t, []string{"privileges", "paths", "mptcp.enabled", "mptcp.limits", "mptcp.endpoint.wwan0",
		"rp_filter.wwan0", "route.wwan0.ipv4", "route.wwan0.ipv6", "dns.wlan0", "dns.wwan0", "udp.rmem_max"}, ids(checks))
	assert.Equal(t, StatusOK, Worst(checks))
}

// TestChecks plants one fault per case and expects exactly that check to
// change, with the exact fix.
func TestChecks(t *testing.T) {
	tests := []struct {
		name   string
		plant  func(f *fakeSys)
		id     string
		status Status
		fix    string
		detail string // substring
	}{
		{"no raw sockets", func(f *fakeSys) {
			f.euid = 1000
			f.files["/proc/self/status"] = "CapEff:\t0000000000000000\n"
		}, "privileges", StatusWarn, "sudo setcap cap_net_raw+ep /usr/bin/mptester", "neither root"},
		{"CAP_NET_RAW without root", func(f *fakeSys) {
			f.euid = 1000
			f.files["/proc/self/status"] = "CapEff:\t0000000000002000\n"
		}, "privileges", StatusOK, "", "CAP_NET_RAW"},
		{"root without CAP_NET_RAW", func(f *fakeSys) {
			f.files["/proc/self/status"] = "CapEff:\t0000000000001000\n"
		}, "privileges", StatusWarn, "sudo setcap cap_net_raw+ep /usr/bin/mptester", ""},
		{"mptcp disabled", func(f *fakeSys) { f.files["/proc/sys/net/mptcp/enabled"] = "0\n" },
			"mptcp.enabled", StatusWarn, "sudo sysctl -w net.mptcp.enabled=1", "= 0"},
		{"kernel without mptcp", func(f *fakeSys) { delete(f.files, "/proc/sys/net/mptcp/enabled") },
			"mptcp.enabled", StatusWarn, "", "without MPTCP"},
		{"subflows limit 0", func(f *fakeSys) { f.cmds["ip -j mptcp limits show"] = "add_addr_accepted 0 subflows 0\n" },
			"mptcp.limits", StatusWarn, "sudo ip mptcp limits set subflows 1 add_addr_accepted 1", "subflows 0"},
		{"limits as JSON", func(f *fakeSys) { f.cmds["ip -j mptcp limits show"] = `{"add_addr_accepted":3,"subflows":0}` },
			"mptcp.limits", StatusWarn, "sudo ip mptcp limits set subflows 1 add_addr_accepted 3", ""},
		{"limits unreadable", func(f *fakeSys) { delete(f.cmds, "ip -j mptcp limits show") },
			"mptcp.limits", StatusWarn, "", "cannot read"},
		{"endpoint missing", func(f *fakeSys) { f.cmds["ip -j mptcp endpoint show"] = "[]" },
			"mptcp.endpoint.wwan0", StatusWarn, "sudo ip mptcp endpoint add 198.18.2.2 dev wwan0 subflow", "no MPTCP endpoint"},
		{"endpoint list empty output", func(f *fakeSys) { f.cmds["ip -j mptcp endpoint show"] = "" },
			"mptcp.endpoint.wwan0", StatusWarn, "sudo ip mptcp endpoint add 198.18.2.2 dev wwan0 subflow", ""},
		{"endpoint on another device", func(f *fakeSys) {
			f.cmds["ip -j mptcp endpoint show"] = `[{"address":"198.18.1.2","id":1,"subflow":true,"dev":"wlan0"}]`
		}, "mptcp.endpoint.wwan0", StatusWarn, "sudo ip mptcp endpoint add 198.18.2.2 dev wwan0 subflow", ""},
		{"endpoint signal only", func(f *fakeSys) {
			f.cmds["ip -j mptcp endpoint show"] = `[{"address":"198.18.2.2","id":5,"signal":true,"dev":"wwan0"}]`
		}, "mptcp.endpoint.wwan0", StatusWarn, "sudo ip mptcp endpoint delete id 5 && sudo ip mptcp endpoint add 198.18.2.2 dev wwan0 subflow", "lacks the subflow flag"},
		{"endpoint by address without dev", func(f *fakeSys) {
			f.cmds["ip -j mptcp endpoint show"] = `[{"address":"fd00:2::2","id":2,"subflow":true}]`
		}, "mptcp.endpoint.wwan0", StatusOK, "", ""},
		{"rp_filter strict on all", func(f *fakeSys) {
			f.files["/proc/sys/net/ipv4/conf/all/rp_filter"] = "1\n"
			f.files["/proc/sys/net/ipv4/conf/wwan0/rp_filter"] = "0\n"
		},
			"rp_filter.wwan0", StatusFail, "sudo sysctl -w net.ipv4.conf.wwan0.rp_filter=2", "effective 1"},
		{"rp_filter strict on iface", func(f *fakeSys) { f.files["/proc/sys/net/ipv4/conf/wwan0/rp_filter"] = "1\n" },
			"rp_filter.wwan0", StatusFail, "sudo sysctl -w net.ipv4.conf.wwan0.rp_filter=2", ""},
		{"rp_filter all strict but iface loose", func(f *fakeSys) { f.files["/proc/sys/net/ipv4/conf/all/rp_filter"] = "1\n" },
			"rp_filter.wwan0", StatusOK, "", "effective 2"},
		{"rp_filter unreadable", func(f *fakeSys) { delete(f.files, "/proc/sys/net/ipv4/conf/wwan0/rp_filter") },
			"rp_filter.wwan0", StatusWarn, "", "cannot read"},
		{"no policy rule, main default exists", func(f *fakeSys) {
			f.cmds["ip -4 -j rule show"] = `[{"priority":0,"src":"all","table":"local"},{"priority":32766,"src":"all","table":"main"}]`
		}, "route.wwan0.ipv4", StatusWarn, "sudo ip rule add from 198.18.2.2 table 103 && sudo ip route add default via 198.18.2.1 dev wwan0 table 103", "default dev wlan0"},
		{"rule ignored when it selects on fwmark", func(f *fakeSys) {
			f.cmds["ip -4 -j rule show"] = `[{"priority":100,"src":"198.18.2.2","fwmark":"0x1","table":"102"},{"priority":32766,"src":"all","table":"main"}]`
		}, "route.wwan0.ipv4", StatusWarn, "sudo ip rule add from 198.18.2.2 table 103 && sudo ip route add default via 198.18.2.1 dev wwan0 table 103", ""},
		{"no usable route at all", func(f *fakeSys) {
			f.cmds["ip -4 -j rule show"] = `[{"priority":32766,"src":"all","table":"main"}]`
			f.cmds["ip -4 -j route show table all"] = `[{"dst":"default","gateway":"198.18.1.1","dev":"wlan0","metric":100}]`
		}, "route.wwan0.ipv4", StatusFail, "sudo ip rule add from 198.18.2.2 table 103 && sudo ip route add default dev wwan0 table 103", "no default route in the main table"},
		{"unreachable rule", func(f *fakeSys) {
			f.cmds["ip -4 -j rule show"] = `[{"priority":50,"src":"198.18.2.0","srclen":24,"action":"unreachable"},{"priority":32766,"src":"all","table":"main"}]`
			f.cmds["ip -4 -j route show table all"] = `[{"dst":"default","gateway":"198.18.1.1","dev":"wlan0","metric":100},{"dst":"default","gateway":"198.18.2.1","dev":"wwan0","table":"7"}]`
		}, "route.wwan0.ipv4", StatusFail, "sudo ip rule add from 198.18.2.2 table 103 && sudo ip route add default via 198.18.2.1 dev wwan0 table 103", "rule 50 (unreachable)"},
		{"suppressed main lookup falls through to table", func(f *fakeSys) {
			f.cmds["ip -4 -j rule show"] = `[{"priority":10,"src":"all","table":"main","suppress_prefixlen":0},{"priority":20,"src":"198.18.2.2","table":"102"},{"priority":32766,"src":"all","table":"main"}]`
		}, "route.wwan0.ipv4", StatusOK, "", "rule 20"},
		{"table number taken", func(f *fakeSys) {
			f.cmds["ip -4 -j rule show"] = `[{"priority":32000,"src":"198.18.9.9","table":"103"},{"priority":32766,"src":"all","table":"main"}]`
		}, "route.wwan0.ipv4", StatusWarn, "sudo ip rule add from 198.18.2.2 table 104 && sudo ip route add default via 198.18.2.1 dev wwan0 table 104", ""},
		{"ipv6 policy missing", func(f *fakeSys) { f.cmds["ip -6 -j rule show"] = `[{"priority":32766,"src":"all","table":"main"}]` },
			"route.wwan0.ipv6", StatusWarn, "sudo ip -6 rule add from fd00:2::2 table 103 && sudo ip -6 route add default via fd00:2::1 dev wwan0 table 103", ""},
		{"routes unreadable", func(f *fakeSys) { delete(f.cmds, "ip -6 -j route show table all") },
			"route.wwan0.ipv6", StatusWarn, "", "cannot read"},
		{"no dns for path", func(f *fakeSys) { f.paths[2].DNS = nil },
			"dns.wwan0", StatusWarn, "mptester survey --dns wwan0=RESOLVER_ADDR", "no DNS server"},
		{"only shared dns", func(f *fakeSys) { f.paths[2].DNS = []probe.DNSServer{dns("198.18.0.53:53", true)} },
			"dns.wwan0", StatusWarn, "mptester survey --dns wwan0=RESOLVER_ADDR", "system-wide"},
		{"rmem too small", func(f *fakeSys) { f.files["/proc/sys/net/core/rmem_max"] = "212992\n" },
			"udp.rmem_max", StatusWarn, "sudo sysctl -w net.core.rmem_max=7500000", "212992"},
		{"rmem garbage", func(f *fakeSys) { f.files["/proc/sys/net/core/rmem_max"] = "lots\n" },
			"udp.rmem_max", StatusWarn, "", "not a number"},
		{"single path", func(f *fakeSys) { f.paths = f.paths[:2] },
			"paths", StatusWarn, "", "only one path"},
		{"no path", func(f *fakeSys) { f.paths = f.paths[:1] },
			"paths", StatusFail, "", "no interface"},
		{"interface without default route ignored", func(f *fakeSys) {
			f.paths = append(f.paths, path("docker0", 9, probe.KindEthernet, "172.17.0.1/16"))
		}, "paths", StatusOK, "", "ignored (no default route in any table): docker0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := healthy()
			tt.plant(f)
			checks := Run(context.Background(), f.env())
			c := byID(t, checks, tt.id)
			assert.Equal(t, tt.status, c.Status, c.Detail)
			assert.Equal(t, tt.fix, c.Fix)
			assert.Contains(t, c.Detail, tt.detail)
			// Every other check stays as healthy as before.
			for _, o := range checks {
				if tt.name == "no path" { // nothing left to check
					break
				}
				if o.ID != tt.id && o.ID != "paths" && !strings.HasPrefix(o.ID, strings.SplitN(tt.id, ".", 2)[0]) {
					assert.Equal(t, StatusOK, o.Status, "%s changed too: %s", o.ID, o.Detail)
				}
			}
		})
	}
}

// TestPrimaryIsLowestMetric swaps the metrics: wwan0 becomes primary and
// wlan0 the path that needs an endpoint.
func TestPrimaryIsLowestMetric(t *testing.T) {
	f := healthy()
	f.cmds["ip -4 -j route show table all"] = `[{"dst":"default","gateway":"198.18.1.1","dev":"wlan0","metric":300},` +
		`{"dst":"default","gateway":"198.18.2.1","dev":"wwan0","metric":200}]`
	checks := Run(context.Background(), f.env())
	assert.Contains(t, byID(t, checks, "paths").Detail, "wwan0 (primary), wlan0")
	c := byID(t, checks, "mptcp.endpoint.wlan0")
	assert.Equal(t, "sudo ip mptcp endpoint add 198.18.1.2 dev wlan0 subflow", c.Fix)
	assert.NotContains(t, ids(checks), "mptcp.endpoint.wwan0")
}

func TestWorst(t *testing.T) {
	assert.Equal(t, StatusOK, Worst(nil))
	assert.Equal(t, StatusWarn, Worst([]Check{{Status: StatusOK}, {Status: StatusWarn}}))
	assert.Equal(t, StatusFail, Worst([]Check{{Status: StatusWarn}, {Status: StatusFail}, {Status: StatusOK}}))
}

func TestSysctlName(t *testing.T) {
	assert.Equal(t, "net.ipv4.conf.eth0/100.rp_filter", sysctlName("net", "ipv4", "conf", "eth0.100", "rp_filter"))
}

func TestDiscoverError(t *testing.T) {
	// Run never panics on a broken environment: every reader failing gives
	// warnings, not a crash.
	env := Env{Paths: healthy().paths,
		ReadFile: func(string) ([]byte, error) { return nil, errors.New("boom") },
		Command:  func(context.Context, string, ...string) ([]byte, error) { return nil, errors.New("boom") }}
	checks := Run(context.Background(), env)
	require.NotEmpty(t, checks)
	for _, c := range checks {
		assert.NotEmpty(t, c.Status, c.ID)
	}
}
