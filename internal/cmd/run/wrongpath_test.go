package run

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/probe"
)

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
