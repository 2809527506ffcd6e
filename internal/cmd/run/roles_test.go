package run

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

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

	got, problems := hostRoles([]string{"mptcp"}, nil, paths, eps)
	assert.Equal(t, []string{"wwan0"}, got, "no --backup: the host's roles")
	assert.Empty(t, problems)

	got, problems = hostRoles([]string{"tcp", "mptcp"}, []string{"wwan0"}, paths, eps)
	assert.Equal(t, []string{"wwan0"}, got)
	assert.Empty(t, problems, "--backup agrees with the host")

	_, problems = hostRoles([]string{"mptcp"}, []string{"wlan0"}, paths, eps)
	if assert.Len(t, problems, 2) {
		assert.Contains(t, problems[0], "wlan0 is not a backup path for MPTCP on this host: ip mptcp endpoint change id 1 backup")
		assert.Contains(t, problems[1], "wwan0 is a backup path for MPTCP on this host: ip mptcp endpoint change id 2 nobackup")
	}

	got, problems = hostRoles([]string{"tcp", "quic"}, []string{"wlan0"}, paths, eps)
	assert.Equal(t, []string{"wlan0"}, got, "no host-role transport: --backup as given")
	assert.Empty(t, problems)

	got, problems = hostRoles([]string{"mptcp"}, []string{"wlan0"}, paths, nil)
	assert.Equal(t, []string{"wlan0"}, got, "endpoints unreadable: --backup as given")
	assert.Empty(t, problems)
}
