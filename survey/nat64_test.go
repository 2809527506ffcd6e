package survey

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/probe"
)

// TestPolicyNAT64: an IPv4 target on an IPv6-only path with a NAT64
// prefix is allowed and sent to its synthesized address; without the
// prefix (or on a path with IPv4, or without IPv6) it stays
// no-source-address or direct; AAAA answers inside the resolution path's
// prefix map to their IPv4, others (and other paths' answers) do not.
func TestPolicyNAT64(t *testing.T) {
	a, pf := netip.MustParseAddr, netip.MustParsePrefix
	v6only := probe.Path{Name: "wwan0", Addrs: []probe.Addr{{IP: a("fd00:2::2"), PrefixLen: 64, Scope: probe.ScopeGlobal}}}
	dual := probe.Path{Name: "wlan0", Addrs: []probe.Addr{{IP: a("198.18.1.2"), PrefixLen: 24, Scope: probe.ScopeGlobal},
		{IP: a("fd00:1::2"), PrefixLen: 64, Scope: probe.ScopeGlobal}}}
	v4only := probe.Path{Name: "eth0", Addrs: []probe.Addr{{IP: a("198.18.3.2"), PrefixLen: 24, Scope: probe.ScopeGlobal}}}
	pol := Policy{Public: []netip.Prefix{pf("198.18.0.0/15"), pf("fd00::/8")}}
	target := a("198.18.200.7")

	assert.Equal(t, SkipNoSource, pol.Check(v6only, v6only, target), "no prefix: skipped as before")
	_, via := pol.ViaNAT64(v6only, target)
	assert.False(t, via)

	pol.NAT64 = map[string]netip.Prefix{"wwan0": pf("fd00:64::/96"), "wlan0": pf("64:ff9b::/96"), "eth0": pf("fd00:65::/96")}
	assert.Empty(t, pol.Check(v6only, dual, target), "through the translator")
	d, via := pol.ViaNAT64(v6only, target)
	assert.True(t, via)
	assert.Equal(t, a("fd00:64::c612:c807"), d)
	_, via = pol.ViaNAT64(dual, target)
	assert.False(t, via, "a path with IPv4 probes it directly")
	assert.Equal(t, SkipNoSource, pol.Check(v4only, v4only, a("2001:db8::1")), "no IPv6 source: nothing to synthesize for")
	_, via = pol.ViaNAT64(v4only, target)
	assert.False(t, via)
	_, via = pol.ViaNAT64(v6only, a("fd00:ff::1"))
	assert.False(t, via, "IPv6 targets go directly")
	pol.NAT64["wwan0"] = pf("fd00:64::/80") // not an RFC 6052 length
	assert.Equal(t, SkipNoSource, pol.Check(v6only, v6only, target))
	pol.NAT64["wwan0"] = pf("fd00:64::/96")

	assert.Equal(t, target, pol.Unsynthesize("wwan0", a("fd00:64::c612:c807")))
	assert.Equal(t, a("fd00:65::c612:c807"), pol.Unsynthesize("wwan0", a("fd00:65::c612:c807")), "outside the path's prefix")
	assert.Equal(t, a("fd00:64::c612:c807"), pol.Unsynthesize("lo", a("fd00:64::c612:c807")), "a path without prefix")
	assert.Equal(t, target, pol.Unsynthesize("wwan0", target))
	assert.Equal(t, target, pol.Unsynthesize("wlan0", a("64:ff9b::c612:c807")))

	// The runner maps a path's answers, keeps the others' and the order.
	r := &runner{cfg: Config{Policy: pol}, names: []string{"wlan0", "wwan0"}}
	in := []netip.Addr{a("198.18.0.1"), a("fd00:64::c612:1"), a("fd00:ff::1")}
	assert.Equal(t, []netip.Addr{a("198.18.0.1"), a("198.18.0.1"), a("fd00:ff::1")}, r.unsynthesize(1, in))
	assert.Equal(t, in, r.unsynthesize(0, in))
	r.cfg.Family = probe.Family6
	assert.Equal(t, in, r.unsynthesize(1, in), "an IPv6-only survey keeps them")
}

// TestSummaryViaNAT64: targets probed through a NAT64 count in their
// cell's targets and responsive, and apart in via_nat64 with their own
// RTT statistics; rtt_ms is of the direct ones only.
func TestSummaryViaNAT64(t *testing.T) {
	a := netip.MustParseAddr
	up := func(ms float64) TargetResult { return TargetResult{Responsive: true, MedianMs: ms} }
	in := summaryInput{
		Paths: []string{"L"}, ResolvePaths: []string{"L"}, Domains: 3,
		Res: map[string][]DomainResult{"L": {
			{Done: true, Status: StatusNoError, Addrs: []netip.Addr{a("1.1.1.1"), a("fd00::1")}},
			{Done: true, Status: StatusNoError, Addrs: []netip.Addr{a("2.2.2.2")}},
			{Done: true, Status: StatusNoError, Addrs: []netip.Addr{a("3.3.3.3")}},
		}},
		Probe: probeMap([]string{"L"}, map[string]map[netip.Addr]TargetResult{
			"L": {a("1.1.1.1"): up(50), a("fd00::1"): up(10), a("2.2.2.2"): up(70), a("3.3.3.3"): {}}}),
		Allowed: func(string, string, netip.Addr) bool { return true },
		Via:     func(_ int, x netip.Addr) bool { return x.Is4() },
	}
	c := computeSummary(in).Cells[0]
	assert.Equal(t, [5]int{4, 3, 1, 3, 2}, [5]int{c.Targets, c.Responsive, c.Unresponsive, c.ViaNAT64, c.ViaNAT64Responsive})
	assert.Equal(t, 10.0, c.RTTms.Max, "direct RTTs only")
	require.NotNil(t, c.RTTViaNAT64ms)
	assert.Equal(t, [3]float64{50, 60, 70}, [3]float64{c.RTTViaNAT64ms.Min, c.RTTViaNAT64ms.Mean, c.RTTViaNAT64ms.Max})

	in.Via = nil
	c = computeSummary(in).Cells[0]
	assert.Zero(t, c.ViaNAT64)
	assert.Nil(t, c.RTTViaNAT64ms)
	assert.Equal(t, 70.0, c.RTTms.Max)
}
