package patterns

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/probe/doctor"
)

// TestHostRoles: MPTCP's backup roles are the host's endpoint flags, so
// --backup must agree with them (the fix is named), and without --backup
// the results carry the host's roles, never a role the kernel did not use.
func TestHostRoles(t *testing.T) {
	path := func(name, ip string) probe.Path {
		return probe.Path{Name: name, Addrs: []probe.Addr{{IP: netip.MustParseAddr(ip), PrefixLen: 24}}}
	}
	paths := []probe.Path{path("wlan0", "198.18.1.2"), path("wwan0", "198.18.2.2")}
	eps := []doctor.MPTCPEndpoint{{Address: "198.18.1.2", ID: 1, Subflow: true}, {Address: "198.18.2.2", ID: 2, Subflow: true, Backup: true}}

	got, problems := HostRoles([]string{"mptcp"}, nil, paths, eps)
	assert.Equal(t, []string{"wwan0"}, got, "no --backup: the host's roles")
	assert.Empty(t, problems)

	got, problems = HostRoles([]string{"tcp", "mptcp"}, []string{"wwan0"}, paths, eps)
	assert.Equal(t, []string{"wwan0"}, got)
	assert.Empty(t, problems, "--backup agrees with the host")

	_, problems = HostRoles([]string{"mptcp"}, []string{"wlan0"}, paths, eps)
	if assert.Len(t, problems, 2) {
		assert.Contains(t, problems[0], "wlan0 is not a backup path for MPTCP on this host: ip mptcp endpoint change id 1 backup")
		assert.Contains(t, problems[1], "wwan0 is a backup path for MPTCP on this host: ip mptcp endpoint change id 2 nobackup")
	}

	got, problems = HostRoles([]string{"tcp", "quic"}, []string{"wlan0"}, paths, eps)
	assert.Equal(t, []string{"wlan0"}, got, "no host-role transport: --backup as given")
	assert.Empty(t, problems)

	got, problems = HostRoles([]string{"mptcp"}, []string{"wlan0"}, paths, nil)
	assert.Equal(t, []string{"wlan0"}, got, "endpoints unreadable: --backup as given")
	assert.Empty(t, problems)
}

func TestWrongPaths(t *testing.T) {
	wlan := probe.Path{Name: "wlan0", Kind: probe.KindWiFi, Up: true,
		Addrs: []probe.Addr{{IP: netip.MustParseAddr("198.18.1.2"), PrefixLen: 24, Scope: probe.ScopeGlobal}}}
	wwan := probe.Path{Name: "wwan0", Kind: probe.KindCellular, Up: true,
		Addrs: []probe.Addr{{IP: netip.MustParseAddr("198.18.2.2"), PrefixLen: 24, Scope: probe.ScopeGlobal}}}
	lo := probe.Path{Name: "lo", Kind: probe.KindLoopback, Up: true}
	local := func(a netip.Addr) bool { return a == netip.MustParseAddr("198.18.1.2") }
	// Without source policy routing everything leaves by wlan0.
	route := func(_ context.Context, dst, src netip.Addr) (string, error) { return "wlan0", nil }
	paths := []probe.Path{wlan, wwan, lo}
	ctx := context.Background()

	got := WrongPaths(ctx, []string{"198.18.200.1"}, paths, []string{"tcp", "mptcp"}, local, route)
	require.Len(t, got, 1)
	assert.Contains(t, got[0], "leaves by wlan0: mptcp over wwan0 would measure wlan0")
	assert.Empty(t, WrongPaths(ctx, []string{"198.18.200.1"}, paths, []string{"tcp", "quic"}, local, route),
		"TCP and QUIC are bound to the device")
	assert.Empty(t, WrongPaths(ctx, []string{"test.example"}, paths, []string{"mptcp"}, local, route), "names are not checked here")

	// A server on this host: every non-loopback path is wrong, loopback is not.
	got = WrongPaths(ctx, []string{"198.18.1.2:8443", "127.0.0.1"}, paths, []string{"tcp"}, local, route)
	assert.Len(t, got, 4)
	assert.Contains(t, got[0], "server 198.18.1.2 is an address of this host: its traffic goes over loopback, not wlan0")
}

// A test whose server name resolved, on its path, to this host (or whose
// MPTCP route leaves by another interface) is relabelled wrong-path: never
// a success for a path the traffic did not take.
func TestCheckRecordRelabels(t *testing.T) {
	eth := probe.Path{Name: "eth9", Kind: probe.KindEthernet, Up: true,
		Addrs: []probe.Addr{{IP: netip.MustParseAddr("198.18.9.2"), PrefixLen: 24, Scope: probe.ScopeGlobal}}}
	route := func(_ context.Context, dst, src netip.Addr) (string, error) { return "wlan0", nil }
	check := CheckRecord(context.Background(), []probe.Path{eth}, func(netip.Addr) bool { return false }, route)
	rec := func(server, tr string) *Record {
		return &Record{Status: StatusSuccess,
			Config: TestConfig{Path: "eth9", Transport: tr, Server: netip.MustParseAddrPort(server)}}
	}
	r := rec("127.0.0.1:443", "tcp")
	check(r)
	assert.Equal(t, StatusWrongPath, r.Status)
	assert.Contains(t, r.Error, "not eth9")
	r = rec("198.18.200.1:443", "mptcp")
	check(r)
	assert.Equal(t, StatusWrongPath, r.Status)
	assert.Contains(t, r.Error, "leaves by wlan0")
	r = rec("198.18.200.1:443", "quic")
	check(r)
	assert.Equal(t, StatusSuccess, r.Status, "QUIC is bound to the device")
}

func TestServerHost(t *testing.T) {
	for in, want := range map[string]string{"198.18.200.1": "198.18.200.1", "198.18.200.1:8443": "198.18.200.1",
		"[fd00::1]:443": "fd00::1", "fd00::1": "fd00::1", "[fd00::1]": "fd00::1", "test.example:443": "test.example"} {
		assert.Equal(t, want, ServerHost(in), in)
	}
}
