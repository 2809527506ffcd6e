package doctor

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/nstest"
)

// twoPathHost builds a namespace with wlan0 (198.18.1.2, fd00:1::2, default
// route metric 100) and wwan0 (198.18.2.2, fd00:2::2, metric 200), both
// veths into a gateway namespace. Nothing else is configured.
func twoPathHost(t *testing.T) *nstest.NS {
	ns := nstest.New(t)
	gw := nstest.New(t)
	for i, name := range []string{"wlan0", "wwan0"} {
		n := string(rune('1' + i))
		ns.Veth(name, gw, "gw"+n)
		ns.IP("addr", "add", "198.18."+n+".2/24", "dev", name)
		ns.IP("-6", "addr", "add", "fd00:"+n+"::2/64", "dev", name, "nodad")
		gw.IP("addr", "add", "198.18."+n+".1/24", "dev", "gw"+n)
		gw.IP("-6", "addr", "add", "fd00:"+n+"::1/64", "dev", "gw"+n, "nodad")
		metric := []string{"100", "200"}[i]
		ns.IP("route", "add", "default", "via", "198.18."+n+".1", "dev", name, "metric", metric)
		ns.IP("-6", "route", "add", "default", "via", "fd00:"+n+"::1", "dev", name, "metric", metric)
	}
	return ns
}

// TestNetnsEndpointCheck is the acceptance test: in a namespace with wlan0
// and wwan0, doctor reports the missing MPTCP endpoint for wwan0 and stops
// once one is added.
func TestNetnsEndpointCheck(t *testing.T) {
	ns := twoPathHost(t)
	if nstest.InNS(t, ns) {
		checks := Run(context.Background(), Env{})
		assert.Contains(t, byID(t, checks, "paths").Detail, "wlan0 (primary), wwan0")
		c := byID(t, checks, "mptcp.endpoint.wwan0")
		assert.NotEqual(t, StatusOK, c.Status, c.Detail)
		assert.Equal(t, "sudo ip mptcp endpoint add 198.18.2.2 dev wwan0 subflow", c.Fix)
		assert.NotContains(t, ids(checks), "mptcp.endpoint.wlan0", "the primary path needs no endpoint")
		return
	}
	ns.IP("mptcp", "endpoint", "add", "198.18.2.2", "dev", "wwan0", "subflow")
	if nstest.InNS(t, ns) {
		c := byID(t, Run(context.Background(), Env{}), "mptcp.endpoint.wwan0")
		assert.Equal(t, StatusOK, c.Status, c.Detail)
		assert.Empty(t, c.Fix)
	}
}

// TestNetnsFixesWork plants the multipath faults the namespace can hold
// (no endpoint, subflows limit 0, strict rp_filter, no policy routing),
// runs each fix doctor prints exactly as printed (minus sudo: we are root),
// and expects every check to turn ok.
func TestNetnsFixesWork(t *testing.T) {
	ns := twoPathHost(t)
	ns.IP("mptcp", "limits", "set", "subflows", "0", "add_addr_accepted", "0")
	ns.Run("sysctl", "-qw", "net.ipv4.conf.wwan0.rp_filter=1")
	if !nstest.InNS(t, ns) {
		return
	}
	ctx := context.Background()
	fixable := []string{"mptcp.limits", "mptcp.endpoint.wwan0", "rp_filter.wwan0", "route.wwan0.ipv4", "route.wwan0.ipv6"}
	before := Run(ctx, Env{})
	for _, id := range fixable {
		c := byID(t, before, id)
		require.NotEqual(t, StatusOK, c.Status, "%s should be broken: %s", id, c.Detail)
		require.NotEmpty(t, c.Fix, id)
		cmd := strings.ReplaceAll(c.Fix, "sudo ", "")
		out, err := exec.Command("sh", "-c", cmd).CombinedOutput()
		require.NoError(t, err, "fix for %s: %s: %s", id, cmd, out)
	}
	assert.Equal(t, StatusFail, byID(t, before, "rp_filter.wwan0").Status)
	after := Run(ctx, Env{})
	for _, id := range fixable {
		c := byID(t, after, id)
		assert.Equal(t, StatusOK, c.Status, "%s after its fix: %s", id, c.Detail)
	}
}
