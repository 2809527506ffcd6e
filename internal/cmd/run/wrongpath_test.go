package run

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/probe"
)

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

	got := wrongPaths(ctx, []string{"198.18.200.1"}, paths, []string{"tcp", "mptcp"}, local, route)
	require.Len(t, got, 1)
	assert.Contains(t, got[0], "leaves by wlan0: mptcp over wwan0 would measure wlan0")
	assert.Empty(t, wrongPaths(ctx, []string{"198.18.200.1"}, paths, []string{"tcp", "quic"}, local, route),
		"TCP and QUIC are bound to the device")
	assert.Empty(t, wrongPaths(ctx, []string{"test.example"}, paths, []string{"mptcp"}, local, route), "names are not checked here")

	// A server on this host: every non-loopback path is wrong, loopback is not.
	got = wrongPaths(ctx, []string{"198.18.1.2:8443", "127.0.0.1"}, paths, []string{"tcp"}, local, route)
	assert.Len(t, got, 4)
	assert.Contains(t, got[0], "server 198.18.1.2 is an address of this host: its traffic goes over loopback, not wlan0")
}

// run refuses a server on this host over a non-loopback path before it
// runs a test, exit 2 (it reported MPTCP success on eth0 over loopback).
func TestRunRefusesLocalServerOverOtherPath(t *testing.T) {
	eth := probe.Path{Name: "eth9", Kind: probe.KindEthernet, Up: true, DefaultRoute: true,
		Addrs: []probe.Addr{{IP: netip.MustParseAddr("198.18.9.2"), PrefixLen: 24, Scope: probe.ScopeGlobal}}}
	discover := func(context.Context) ([]probe.Path, error) { return []probe.Path{eth}, nil }
	out, _, err := execute(t, discover, "--server", "127.0.0.1", "--insecure")
	require.Error(t, err)
	assert.Equal(t, cmdutil.ExitUsage, cmdutil.ExitCode(err))
	assert.Contains(t, err.Error(), "server 127.0.0.1 is an address of this host: its traffic goes over loopback, not eth9")
	assert.Empty(t, out)
}

// A test whose server name resolved, on its path, to this host (or whose
// MPTCP route leaves by another interface) is relabelled wrong-path: never
// a success for a path the traffic did not take.
func TestCheckRecordRelabels(t *testing.T) {
	eth := probe.Path{Name: "eth9", Kind: probe.KindEthernet, Up: true,
		Addrs: []probe.Addr{{IP: netip.MustParseAddr("198.18.9.2"), PrefixLen: 24, Scope: probe.ScopeGlobal}}}
	route := func(_ context.Context, dst, src netip.Addr) (string, error) { return "wlan0", nil }
	check := checkRecord(context.Background(), []probe.Path{eth}, func(netip.Addr) bool { return false }, route)
	rec := func(server, tr string) *patterns.Record {
		return &patterns.Record{Status: patterns.StatusSuccess,
			Config: patterns.TestConfig{Path: "eth9", Transport: tr, Server: netip.MustParseAddrPort(server)}}
	}
	r := rec("127.0.0.1:443", "tcp")
	check(r)
	assert.Equal(t, statusWrongPath, r.Status)
	assert.Contains(t, r.Error, "not eth9")
	r = rec("198.18.200.1:443", "mptcp")
	check(r)
	assert.Equal(t, statusWrongPath, r.Status)
	assert.Contains(t, r.Error, "leaves by wlan0")
	r = rec("198.18.200.1:443", "quic")
	check(r)
	assert.Equal(t, patterns.StatusSuccess, r.Status, "QUIC is bound to the device")
}
