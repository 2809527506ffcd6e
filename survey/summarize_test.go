package survey

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ips(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// A hand-built two-path survey; every expected number below was computed
// by hand from the definitions in summary.go (numpy-linear percentiles).
func TestComputeSummaryHandBuilt(t *testing.T) {
	ok := func(a ...string) DomainResult {
		return DomainResult{Done: true, Status: StatusNoError, Addrs: ips(a...)}
	}
	fail := func(s string) DomainResult { return DomainResult{Done: true, Status: s} }
	up := func(ms float64) TargetResult { return TargetResult{Responsive: true, MedianMs: ms} }
	down := TargetResult{}
	a := netip.MustParseAddr
	in := summaryInput{
		Paths: []string{"A", "B"}, ResolvePaths: []string{"A", "B"}, Domains: 4,
		Res: map[string][]DomainResult{
			"A": {ok("1.1.1.1"), ok("2.2.2.2", "3.3.3.3"), fail(StatusNXDomain), ok("10.0.0.1")},
			"B": {ok("1.1.1.1"), ok("4.4.4.4"), ok("5.5.5.5"), fail(StatusTimeout)},
		},
		Probe: probeMap([]string{"A", "B"}, map[string]map[netip.Addr]TargetResult{
			"A": {a("1.1.1.1"): up(10), a("2.2.2.2"): up(20), a("3.3.3.3"): down, a("10.0.0.1"): up(5), a("4.4.4.4"): up(30), a("5.5.5.5"): up(40)},
			"B": {a("1.1.1.1"): up(12), a("2.2.2.2"): down, a("3.3.3.3"): up(50), a("4.4.4.4"): up(35), a("5.5.5.5"): down},
		}),
		Allowed: func(p, r string, x netip.Addr) bool { return p == r || !x.IsPrivate() },
		Skipped: map[skipKey]int{{"B", "A", SkipCrossPrivate}: 1},
	}
	s := computeSummary(in)
	assert.Equal(t, []PathResolution{
		{Path: "A", Domains: 4, Resolved: 3, Failed: 1, ByStatus: map[string]int{"NOERROR": 3, "NXDOMAIN": 1}},
		{Path: "B", Domains: 4, Resolved: 3, Failed: 1, ByStatus: map[string]int{"NOERROR": 3, "TIMEOUT": 1}},
	}, s.Resolution)
	o := s.Overlap
	assert.Equal(t, [3]int{4, 3, 1}, [3]int{o.IPsPathA, o.IPsPathB, o.IPsCommon})
	assert.InDelta(t, 100.0/6, o.OverlapPct, 1e-9)
	assert.InDelta(t, 25.0, o.DomainsDifferPct, 1e-9)
	assert.InDelta(t, 50.0, o.DomainsUnresolvedSomewherePct, 1e-9)

	want := []Cell{
		{ProbePath: "A", ResolvePath: "A", Targets: 4, Responsive: 3, Unresponsive: 1, UnresponsivePct: 25,
			RTTms: RTTStats{Min: 5, P10: 6, P25: 7.5, P50: 10, P75: 15, P90: 18, Max: 20, Mean: 35.0 / 3}},
		{ProbePath: "A", ResolvePath: "B", Targets: 3, Responsive: 3, Unresponsive: 0, UnresponsivePct: 0,
			RTTms: RTTStats{Min: 10, P10: 14, P25: 20, P50: 30, P75: 35, P90: 38, Max: 40, Mean: 80.0 / 3}},
		{ProbePath: "B", ResolvePath: "A", Targets: 3, Responsive: 2, Unresponsive: 1, UnresponsivePct: 100.0 / 3,
			RTTms: RTTStats{Min: 12, P10: 15.8, P25: 21.5, P50: 31, P75: 40.5, P90: 46.2, Max: 50, Mean: 31}},
		{ProbePath: "B", ResolvePath: "B", Targets: 3, Responsive: 2, Unresponsive: 1, UnresponsivePct: 100.0 / 3,
			RTTms: RTTStats{Min: 12, P10: 14.3, P25: 17.75, P50: 23.5, P75: 29.25, P90: 32.7, Max: 35, Mean: 23.5}},
	}
	require.Len(t, s.Cells, 4)
	for i, w := range want {
		g := s.Cells[i]
		assert.Equal(t, [6]any{w.ProbePath, w.ResolvePath, w.Targets, w.Responsive, w.Unresponsive, 0},
			[6]any{g.ProbePath, g.ResolvePath, g.Targets, g.Responsive, g.Unresponsive, 0}, "cell %d", i)
		assert.InDelta(t, w.UnresponsivePct, g.UnresponsivePct, 1e-9)
		for j, pair := range [][2]float64{{w.RTTms.Min, g.RTTms.Min}, {w.RTTms.P10, g.RTTms.P10}, {w.RTTms.P25, g.RTTms.P25},
			{w.RTTms.P50, g.RTTms.P50}, {w.RTTms.P75, g.RTTms.P75}, {w.RTTms.P90, g.RTTms.P90}, {w.RTTms.Max, g.RTTms.Max}, {w.RTTms.Mean, g.RTTms.Mean}} {
			assert.InDelta(t, pair[0], pair[1], 1e-9, "cell %d stat %d", i, j)
		}
	}
	wantCmp := []Comparison{
		{A: "A/A", B: "A/B", MeanDiffMs: -5, Domains: 2, ASlowerPct: 0},
		{A: "A/A", B: "B/A", MeanDiffMs: -16, Domains: 2, ASlowerPct: 0},
		{A: "A/A", B: "B/B", MeanDiffMs: -8.5, Domains: 2, ASlowerPct: 0},
		{A: "A/B", B: "B/A", MeanDiffMs: -11, Domains: 2, ASlowerPct: 0},
		{A: "A/B", B: "B/B", MeanDiffMs: -3.5, Domains: 2, ASlowerPct: 0},
		{A: "B/A", B: "B/B", MeanDiffMs: 7.5, Domains: 2, ASlowerPct: 50},
	}
	assert.Equal(t, wantCmp, s.Comparisons)
	assert.Equal(t, []SkippedCount{{ProbePath: "B", ResolvePath: "A", Reason: SkipCrossPrivate, Count: 1}}, s.Skipped)
}

func TestPercentileNumpyLinear(t *testing.T) {
	s := []float64{1, 2, 3, 4}
	// numpy.percentile([1,2,3,4], [0,10,50,90,100]) = 1, 1.3, 2.5, 3.7, 4
	for q, want := range map[float64]float64{0: 1, 10: 1.3, 50: 2.5, 90: 3.7, 100: 4} {
		assert.InDelta(t, want, percentileSorted(s, q), 1e-12, "q=%v", q)
	}
	assert.Equal(t, 0.0, percentileSorted(nil, 50))
	assert.Equal(t, 7.0, percentileSorted([]float64{7}, 90))
	st := statsOf([]float64{2, 4, 4, 4, 5, 5, 7, 9})
	assert.Equal(t, ProbeStats{Min: 2, Median: 4.5, Mean: 5, Max: 9, Stddev: 2}, st)
}

// A domain counts as slower in A only when its RTT there exceeds B's by more
// than SlowerMarginMs; smaller differences are ties (measurement noise).
func TestSlowerMargin(t *testing.T) {
	doms := []DomainResult{}
	probeA, probeB := map[netip.Addr]TargetResult{}, map[netip.Addr]TargetResult{}
	// A-B differences: +0.4 (tie), +0.6 (slower), -0.6 (B slower), 0 (tie).
	for i, d := range []float64{0.4, 0.6, -0.6, 0} {
		ad := netip.AddrFrom4([4]byte{198, 18, 0, byte(i + 1)})
		doms = append(doms, DomainResult{Done: true, Status: StatusNoError, Addrs: []netip.Addr{ad}})
		probeA[ad] = TargetResult{Responsive: true, MedianMs: 20 + d}
		probeB[ad] = TargetResult{Responsive: true, MedianMs: 20}
	}
	s := computeSummary(summaryInput{Paths: []string{"A", "B"}, ResolvePaths: []string{"A"}, Domains: 4,
		Res: map[string][]DomainResult{"A": doms}, Probe: probeMap([]string{"A", "B"}, map[string]map[netip.Addr]TargetResult{"A": probeA, "B": probeB}),
		Allowed: func(string, string, netip.Addr) bool { return true }})
	require.Len(t, s.Comparisons, 1)
	c := s.Comparisons[0]
	assert.Equal(t, [2]string{"A/A", "B/A"}, [2]string{c.A, c.B})
	assert.Equal(t, 4, c.Domains)
	assert.InDelta(t, 25.0, c.ASlowerPct, 1e-9)
	assert.InDelta(t, 0.1, c.MeanDiffMs, 1e-9)
}

// probeMap serves summaryInput.Probe from per-path maps.
func probeMap(paths []string, m map[string]map[netip.Addr]TargetResult) func(int, netip.Addr) (TargetResult, bool) {
	return func(i int, a netip.Addr) (TargetResult, bool) {
		tr, ok := m[paths[i]][a]
		return tr, ok
	}
}

// The streaming summary equals the in-memory reference on random
// three-path surveys (overlaps, differing sets, failures, unprobed and
// overloaded targets, a policy), with comparisons done in small chunks.
func TestSummaryStreamingEqualsInMemory(t *testing.T) {
	defer func(c int) { summaryChunk = c }(summaryChunk)
	rng := rand.New(rand.NewPCG(1, 2))
	statuses := []string{StatusNoError, StatusNoError, StatusNoError, StatusNXDomain, StatusTimeout, StatusServFail}
	for trial := range 40 {
		summaryChunk = 1 + rng.IntN(50)
		paths := []string{"A", "B", "C"}
		nd := 1 + rng.IntN(300)
		pool := make([]netip.Addr, 1+rng.IntN(200))
		for i := range pool {
			pool[i] = netip.AddrFrom4([4]byte{byte(10 + 180*rng.IntN(2)), 0, byte(i >> 8), byte(i)})
		}
		res := map[string][]DomainResult{}
		probes := map[string]map[netip.Addr]TargetResult{}
		for _, p := range paths {
			rs := make([]DomainResult, nd)
			for d := range rs {
				if rng.IntN(10) == 0 {
					continue // not resolved
				}
				st := statuses[rng.IntN(len(statuses))]
				rs[d] = DomainResult{Done: true, Status: st}
				if st == StatusNoError {
					for range 1 + rng.IntN(3) {
						a := pool[rng.IntN(len(pool))]
						if !slices.Contains(rs[d].Addrs, a) {
							rs[d].Addrs = append(rs[d].Addrs, a)
						}
					}
				}
			}
			res[p] = rs
			m := map[netip.Addr]TargetResult{}
			for _, a := range pool {
				switch rng.IntN(6) {
				case 0: // not probed
				case 1:
					m[a] = TargetResult{}
				case 2:
					m[a] = TargetResult{HostOverloaded: true}
				default:
					m[a] = TargetResult{Responsive: true, MedianMs: float64(rng.IntN(2000)) / 10}
				}
			}
			probes[p] = m
		}
		rps := paths[:1+rng.IntN(3)]
		in := summaryInput{Paths: paths, ResolvePaths: rps, Domains: nd, Res: res, Probe: probeMap(paths, probes),
			Allowed: func(p, r string, x netip.Addr) bool { return p == r || !x.IsPrivate() },
			Skipped: map[skipKey]int{{"B", "A", SkipCrossPrivate}: 3, {"A", "A", SkipMaxBytes}: 1}}
		require.Equal(t, computeSummaryRef(in), computeSummary(in), "trial %d", trial)
	}
}

// On a NAT64 path a domain's translated RTT (its IPv4 address probed
// through the translator) is never compared with a direct one: the direct
// comparisons use direct targets only, and the cells that both have
// targets via a NAT64 get their own comparison of translated RTTs.
func TestComparisonsKeepRoutesApart(t *testing.T) {
	a := netip.MustParseAddr
	up := func(ms float64) TargetResult { return TargetResult{Responsive: true, MedianMs: ms} }
	// Domain 0: IPv4 and IPv6; domain 1: IPv4 only; domain 2: IPv6 only.
	res := []DomainResult{
		{Done: true, Status: StatusNoError, Addrs: ips("198.19.0.1", "fd00:ff::1")},
		{Done: true, Status: StatusNoError, Addrs: ips("198.19.0.2")},
		{Done: true, Status: StatusNoError, Addrs: ips("fd00:ff::3")},
	}
	in := summaryInput{Paths: []string{"W", "L"}, ResolvePaths: []string{"W", "L"}, Domains: 3,
		Res: map[string][]DomainResult{"W": res, "L": res},
		Probe: probeMap([]string{"W", "L"}, map[string]map[netip.Addr]TargetResult{
			"W": {a("198.19.0.1"): up(30), a("fd00:ff::1"): up(31), a("198.19.0.2"): up(40), a("fd00:ff::3"): up(50)},
			// L is IPv6-only behind a NAT64: its IPv4 targets are
			// translated, 10 ms faster than any direct RTT there.
			"L": {a("198.19.0.1"): up(60), a("fd00:ff::1"): up(70), a("198.19.0.2"): up(65), a("fd00:ff::3"): up(80)},
		}),
		Allowed: func(string, string, netip.Addr) bool { return true },
		Via:     func(i int, x netip.Addr) bool { return i == 1 && x.Is4() },
	}
	s := computeSummary(in)
	byPair := map[[3]string]Comparison{}
	for _, c := range s.Comparisons {
		byPair[[3]string{c.A, c.B, c.Route}] = c
	}
	// Direct: W/W's best per domain 30, 40, 50; L/W's direct only 70 (d0)
	// and 80 (d2): d1 has no direct RTT on L.
	c := byPair[[3]string{"W/W", "L/W", ""}]
	assert.Equal(t, 2, c.Domains)
	assert.InDelta(t, -35.0, c.MeanDiffMs, 1e-9, "(30-70 + 50-80)/2")
	// Translated: L/W vs L/L over d0 (60, 60) and d1 (65, 65).
	v, ok := byPair[[3]string{"L/W", "L/L", RouteViaNAT64}]
	require.True(t, ok, "%+v", s.Comparisons)
	assert.Equal(t, 2, v.Domains)
	assert.InDelta(t, 0.0, v.MeanDiffMs, 1e-9)
	_, mixed := byPair[[3]string{"W/W", "L/W", RouteViaNAT64}]
	assert.False(t, mixed, "W's cells have no translated targets: no via-nat64 comparison with them")
	assert.Len(t, s.Comparisons, 6+1)
}
