package cmd

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/internal/nstest"
	"github.com/mptester/mptester/probe"
)

// TestIPv6OnlyPathOneDNSChoice: on an IPv6-only path an IPv4 resolver
// cannot be asked; ifaces and survey make the same choice (the path lists
// no such server in either), and the survey still ends with a summary.
func TestIPv6OnlyPathOneDNSChoice(t *testing.T) {
	ns := nstest.New(t)
	gw := nstest.New(t)
	ns.Veth("wlan0", gw, "gw1")
	ns.IP("addr", "add", "198.18.1.2/24", "dev", "wlan0")
	gw.IP("addr", "add", "198.18.1.1/24", "dev", "gw1")
	ns.IP("route", "add", "default", "via", "198.18.1.1", "dev", "wlan0")
	ns.Veth("wwan0", gw, "gw2")
	ns.IP("addr", "add", "fd00:6::2/64", "dev", "wwan0", "nodad")
	gw.IP("addr", "add", "fd00:6::1/64", "dev", "gw2", "nodad")
	ns.IP("-6", "route", "add", "default", "via", "fd00:6::1", "dev", "wwan0")
	if !nstest.InNS(t, ns) {
		return
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("dns:\n  wlan0: [198.18.1.1]\n  wwan0: [198.18.1.1, 'fd00:6::1']\n"), 0o644))
	list := filepath.Join(dir, "list.csv")
	require.NoError(t, os.WriteFile(list, []byte("1,a.test\n2,b.test\n"), 0o644))

	ios, out, errOut := cmdutil.Test()
	require.Equal(t, 0, Run(context.Background(), ios, []string{"--config", cfg, "ifaces", "--json"}), errOut.String())
	var paths []probe.Path
	require.NoError(t, json.Unmarshal(out.Bytes(), &paths))
	ifacesDNS := dnsOf(t, paths, "wwan0")
	assert.Equal(t, []string{"[fd00:6::1]:53"}, ifacesDNS, "the IPv4 server is not listed for an IPv6-only path")

	// Named on the command line, such a server is a mistake to report.
	ios, _, errOut = cmdutil.Test()
	assert.Equal(t, cmdutil.ExitUsage, Run(context.Background(), ios, []string{"ifaces", "--dns", "wwan0=198.18.1.1"}))
	assert.Contains(t, errOut.String(), "--dns wwan0=198.18.1.1:53: wwan0 has no IPv4 address")

	jsonl := filepath.Join(dir, "s.jsonl")
	ios, _, errOut = cmdutil.Test()
	code := Run(context.Background(), ios, []string{"--config", cfg, "survey", "--list", list, "--paths", "wlan0,wwan0",
		"--method", "tcp-connect", "--count", "1", "--timeout", "100ms", "--dns-timeout", "100ms", "--dns-retries", "0", "-o", jsonl})
	assert.Contains(t, []int{cmdutil.ExitOK, cmdutil.ExitPartial}, code, errOut.String())
	b, err := os.ReadFile(jsonl)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var hdr struct {
		Paths []probe.Path `json:"paths"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &hdr))
	assert.Equal(t, ifacesDNS, dnsOf(t, hdr.Paths, "wwan0"), "survey uses the servers ifaces shows")
	require.GreaterOrEqual(t, len(lines), 2)
	assert.Contains(t, lines[len(lines)-2], `"type":"summary"`)
	assert.NotContains(t, errOut.String(), "no usable DNS server")
}

func dnsOf(t *testing.T, ps []probe.Path, name string) []string {
	t.Helper()
	p, err := probe.FindPath(ps, name)
	require.NoError(t, err)
	out := []string{}
	for _, d := range p.DNS {
		out = append(out, d.Addr.String())
	}
	return out
}
