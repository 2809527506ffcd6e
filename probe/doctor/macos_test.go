package doctor

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/probe"
)

func macPath(name string, kind probe.Kind, ip string) probe.Path {
	return probe.Path{Name: name, Up: true, Kind: kind, DefaultRoute: true,
		Addrs: []probe.Addr{{IP: netip.MustParseAddr(ip), PrefixLen: 24, Scope: probe.ScopeGlobal}}}
}

func checksByID(cs []Check) map[string]Check {
	m := map[string]Check{}
	for _, c := range cs {
		m[c.ID] = c
	}
	return m
}

// The macOS checks from planted facts: the version gate, the framework,
// each outward interface listed or not, one path only, the reminder.
func TestMacOSChecks(t *testing.T) {
	wifi, eth := macPath("en0", probe.KindWiFi, "198.18.0.2"), macPath("en7", probe.KindEthernet, "198.19.0.2")
	lo := probe.Path{Name: "lo0", Up: true, Kind: probe.KindLoopback}
	listed := func(name string) error {
		if name == "en7" {
			return errors.New("no interface en7")
		}
		return nil
	}
	cs := checksByID(macOSChecks(macOSFacts{Version: "14.5", Listed: listed}, []probe.Path{wifi, eth, lo}))
	assert.Equal(t, StatusOK, cs["macos.version"].Status)
	assert.Contains(t, cs["macos.version"].Detail, "not available on macOS")
	assert.Equal(t, StatusOK, cs["macos.network-framework"].Status)
	assert.Equal(t, StatusOK, cs["macos.interface.en0"].Status)
	assert.Equal(t, StatusFail, cs["macos.interface.en7"].Status)
	assert.NotContains(t, cs, "macos.interface.lo0")
	assert.NotContains(t, cs, "macos.multipath")
	assert.Contains(t, cs["macos.aggregate"].Detail, "developer")

	cs = checksByID(macOSChecks(macOSFacts{Version: "10.14.6", Framework: errors.New("nw_parameters_set_multipath_service missing")}, []probe.Path{wifi}))
	assert.Equal(t, StatusFail, cs["macos.version"].Status)
	assert.Equal(t, StatusFail, cs["macos.network-framework"].Status)
	assert.Equal(t, StatusWarn, cs["macos.interface.en0"].Status)
	assert.Equal(t, StatusWarn, cs["macos.multipath"].Status)

	cs = checksByID(macOSChecks(macOSFacts{VersionErr: errors.New("ENOENT")}, nil))
	assert.Equal(t, StatusWarn, cs["macos.version"].Status)
	assert.Equal(t, StatusWarn, cs["macos.interfaces"].Status)
	assert.Equal(t, StatusWarn, Worst(macOSChecks(macOSFacts{Version: "26.0", Listed: listed}, []probe.Path{wifi})))
}

func TestParseMacOSVersion(t *testing.T) {
	for in, want := range map[string][2]int{"10.15": {10, 15}, "14.5.1": {14, 5}, "11": {11, 0}, " 26.0\n": {26, 0}} {
		v, err := parseMacOSVersion(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, v, in)
	}
	for _, in := range []string{"", "x.1", "10.-1"} {
		_, err := parseMacOSVersion(in)
		assert.Error(t, err, in)
	}
}
