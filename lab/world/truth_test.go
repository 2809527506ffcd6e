package world

import (
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/mptester/mptester/survey"
)

func TestPercentileNumpyLinear(t *testing.T) {
	// Values from numpy.percentile(xs, p) (default method "linear").
	xs := []float64{1, 2, 4, 8, 16}
	for _, c := range []struct{ p, want float64 }{
		{0, 1}, {10, 1.4}, {25, 2}, {50, 4}, {75, 8}, {90, 12.8}, {100, 16}, {33, 2.64},
	} {
		if got := Percentile(xs, c.p); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Percentile(%v, %v) = %v, want %v", xs, c.p, got, c.want)
		}
	}
	if got := Percentile([]float64{7}, 90); got != 7 {
		t.Errorf("single value: %v", got)
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Error("empty: want NaN")
	}
	st := Stats([]float64{30, 25, 30})
	want := survey.RTTStats{Min: 25, P10: 26, P25: 27.5, P50: 30, P75: 30, P90: 30, Max: 30, Mean: 85.0 / 3}
	if !near(st, want) {
		t.Errorf("Stats = %+v, want %+v", st, want)
	}
	if Stats(nil) != (survey.RTTStats{}) {
		t.Error("Stats(nil) not zero")
	}
}

func near(a, b any) bool { return diff(a, b) == "" }

// diff compares two values through their JSON form, floats within 1e-9.
func diff(a, b any) string {
	var x, y any
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	_ = json.Unmarshal(ja, &x)
	_ = json.Unmarshal(jb, &y)
	return walkDiff("", x, y)
}

func walkDiff(at string, x, y any) string {
	switch xv := x.(type) {
	case map[string]any:
		yv, ok := y.(map[string]any)
		if !ok || len(xv) != len(yv) {
			return fmt.Sprintf("%s: %v != %v", at, x, y)
		}
		for k := range xv {
			if d := walkDiff(at+"."+k, xv[k], yv[k]); d != "" {
				return d
			}
		}
		return ""
	case []any:
		yv, ok := y.([]any)
		if !ok || len(xv) != len(yv) {
			return fmt.Sprintf("%s: %v != %v", at, x, y)
		}
		for i := range xv {
			if d := walkDiff(fmt.Sprintf("%s[%d]", at, i), xv[i], yv[i]); d != "" {
				return d
			}
		}
		return ""
	case float64:
		yv, ok := y.(float64)
		if !ok || math.Abs(xv-yv) > 1e-9 {
			return fmt.Sprintf("%s: %v != %v", at, x, y)
		}
		return ""
	}
	if fmt.Sprint(x) != fmt.Sprint(y) {
		return fmt.Sprintf("%s: %v != %v", at, x, y)
	}
	return ""
}

// handWorld is a tiny world whose summary is computed by hand in
// TestSummaryHandComputed.
func handWorld(t *testing.T) *World {
	t.Helper()
	a := netip.MustParseAddr
	A1, A2, A3, A4, P1, V1 := a("198.19.0.1"), a("198.19.0.2"), a("198.19.0.3"), a("198.19.0.4"), a("198.19.128.1"), a("fd00:ff::1")
	ms := time.Millisecond
	w := &World{
		Options: Options{Paths: DefaultPaths, BaseDelay: map[string]time.Duration{"wlan0": 10 * ms, "wwan0": 30 * ms}},
		Targets: map[netip.Addr]*Target{
			A1: {ExtraDelay: 10 * ms},
			V1: {ExtraDelay: 10 * ms},
			A2: {ExtraDelay: 5 * ms},
			A3: {ExtraDelay: 20 * ms, UnreachableFrom: []string{"wlan0"}},
			A4: {UnreachableFrom: []string{"wlan0", "wwan0"}},
			P1: {ExtraDelay: 2 * ms, UnreachableFrom: []string{"wlan0"}},
		},
	}
	ok := func(as ...netip.Addr) View {
		var v View
		v.Status = StatusNoError
		for _, x := range as {
			if x.Is4() {
				v.A = append(v.A, x)
			} else {
				v.AAAA = append(v.AAAA, x)
			}
		}
		return v
	}
	st := func(s string) View { return View{Status: s} }
	dom := func(name, cat string, v0, v1 View) Domain {
		v0.Path, v1.Path = "wlan0", "wwan0"
		return Domain{Name: name, Category: cat, Views: []View{v0, v1}}
	}
	w.Domains = []Domain{
		dom("a1.example", CatSame, ok(A1, V1), ok(A1, V1)),
		dom("b2.example", CatDiffer, ok(A2), ok(A3)),
		dom("c3.example", CatOnePath, ok(A4), st(StatusNXDomain)),
		dom("d4.example", CatPrivate, ok(A2), ok(P1)),
		dom("e5.example", CatTimeout, st(StatusTimeout), st(StatusTimeout)),
		dom("f6.example", CatSame, ok(A3, A1), ok(A3, A1)),
	}
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	return w
}

func TestSummaryHandComputed(t *testing.T) {
	w := handWorld(t)
	tr, err := w.Truth(ExpectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	third := 100.0 / 3
	want := survey.Summary{
		Type: "summary", Status: "ok",
		Resolution: []survey.PathResolution{
			{Path: "wlan0", Domains: 6, Resolved: 5, Failed: 1, ByStatus: map[string]int{"NOERROR": 5, "TIMEOUT": 1}},
			{Path: "wwan0", Domains: 6, Resolved: 4, Failed: 2, ByStatus: map[string]int{"NOERROR": 4, "NXDOMAIN": 1, "TIMEOUT": 1}},
		},
		Overlap: survey.Overlap{PathA: "wlan0", PathB: "wwan0", IPsPathA: 5, IPsPathB: 4, IPsCommon: 3,
			OverlapPct: 50, DomainsDifferPct: third, DomainsUnresolvedSomewherePct: third},
		Cells: []survey.Cell{
			{ProbePath: "wlan0", ResolvePath: "wlan0", Targets: 5, Responsive: 3, Unresponsive: 2, UnresponsivePct: 40,
				RTTms: survey.RTTStats{Min: 25, P10: 26, P25: 27.5, P50: 30, P75: 30, P90: 30, Max: 30, Mean: 85.0 / 3}},
			{ProbePath: "wlan0", ResolvePath: "wwan0", Targets: 3, Responsive: 2, Unresponsive: 1, UnresponsivePct: third,
				RTTms: survey.RTTStats{Min: 30, P10: 30, P25: 30, P50: 30, P75: 30, P90: 30, Max: 30, Mean: 30}},
			{ProbePath: "wwan0", ResolvePath: "wlan0", Targets: 5, Responsive: 4, Unresponsive: 1, UnresponsivePct: 20,
				RTTms: survey.RTTStats{Min: 65, P10: 66.5, P25: 68.75, P50: 70, P75: 72.5, P90: 77, Max: 80, Mean: 71.25}},
			{ProbePath: "wwan0", ResolvePath: "wwan0", Targets: 4, Responsive: 4, Unresponsive: 0, UnresponsivePct: 0,
				RTTms: survey.RTTStats{Min: 62, P10: 64.4, P25: 68, P50: 70, P75: 72.5, P90: 77, Max: 80, Mean: 70.5}},
		},
		Comparisons: []survey.Comparison{
			{A: "wlan0/wlan0", B: "wlan0/wwan0", MeanDiffMs: 0, Domains: 2, ASlowerPct: 0},
			{A: "wlan0/wlan0", B: "wwan0/wlan0", MeanDiffMs: -40, Domains: 4, ASlowerPct: 0},
			{A: "wlan0/wlan0", B: "wwan0/wwan0", MeanDiffMs: -43, Domains: 4, ASlowerPct: 0},
			{A: "wlan0/wwan0", B: "wwan0/wlan0", MeanDiffMs: -40, Domains: 2, ASlowerPct: 0},
			{A: "wlan0/wwan0", B: "wwan0/wwan0", MeanDiffMs: -40, Domains: 2, ASlowerPct: 0},
			{A: "wwan0/wlan0", B: "wwan0/wwan0", MeanDiffMs: -3, Domains: 4, ASlowerPct: 25},
		},
		Skipped: []survey.SkippedCount{{ProbePath: "wlan0", ResolvePath: "wwan0", Reason: "cross-path-private", Count: 1}},
	}
	if d := diff(tr.Summary, want); d != "" {
		t.Errorf("summary differs at %s", d)
	}

	// Per-path truth of a few domains and RTTs.
	if r := tr.Domains[2].Paths["wwan0"]; r.Status != StatusNXDomain || len(r.Addrs) != 0 {
		t.Errorf("c3 on wwan0: %+v", r)
	}
	if got := tr.ExpectedRTTms["wwan0"][netip.MustParseAddr("198.19.128.1")]; got != 62 {
		t.Errorf("RTT wwan0 P1 = %v, want 62", got)
	}
	if _, ok := tr.ExpectedRTTms["wlan0"][netip.MustParseAddr("198.19.0.3")]; ok {
		t.Error("unreachable A3 has an RTT on wlan0")
	}
	if got := fmt.Sprint(tr.Unreachable["wlan0"]); got != "[198.19.0.3 198.19.0.4 198.19.128.1]" {
		t.Errorf("unreachable from wlan0: %s", got)
	}

	// IPv4 only: the v6 address of a1 disappears from the W and L sets.
	tr4, _ := w.Truth(ExpectOptions{Family: 4})
	if c := tr4.Summary.Cells[0]; c.Targets != 4 || c.Responsive != 2 {
		t.Errorf("family 4, WW: %+v", c)
	}
	if o := tr4.Summary.Overlap; o.IPsCommon != 2 || math.Abs(o.OverlapPct-40) > 1e-9 {
		t.Errorf("family 4 overlap: %+v", o)
	}
	// IPv6 only: only a1 resolves, on both paths.
	tr6, _ := w.Truth(ExpectOptions{Family: 6})
	if r := tr6.Summary.Resolution[0]; r.Resolved != 1 || r.ByStatus[StatusNoAnswer] != 4 || r.ByStatus[StatusTimeout] != 1 {
		t.Errorf("family 6, wlan0 resolution: %+v", r)
	}
	// Cross-path private allowed: P1 is a WL target, unresponsive.
	trx, _ := w.Truth(ExpectOptions{AllowCrossPrivate: true})
	if c := trx.Summary.Cells[1]; c.Targets != 4 || c.Responsive != 2 || len(trx.Summary.Skipped) != 0 {
		t.Errorf("cross private WL: %+v, skipped %+v", c, trx.Summary.Skipped)
	}
	// One path only: one cell, no comparisons, no overlap.
	tr1, _ := w.Truth(ExpectOptions{Paths: []string{"wwan0"}})
	if len(tr1.Summary.Cells) != 1 || len(tr1.Summary.Comparisons) != 0 || tr1.Summary.Overlap.PathA != "" {
		t.Errorf("one path: %+v", tr1.Summary)
	}
	if _, err := w.Truth(ExpectOptions{Paths: []string{"eth0"}}); err == nil {
		t.Error("unknown path accepted")
	}
	if _, err := w.Truth(ExpectOptions{Family: 5}); err == nil {
		t.Error("family 5 accepted")
	}
}

func TestResolveView(t *testing.T) {
	a4, a6 := netip.MustParseAddr("198.19.0.9"), netip.MustParseAddr("fd00:ff::9")
	v6only := &View{Status: StatusNoError, AAAA: []netip.Addr{a6}, CNAMEs: []string{"h1.x.cdn.example"}}
	for _, c := range []struct {
		v      *View
		fam    int
		status string
		n      int
	}{
		{v6only, 0, StatusNoError, 1},
		{v6only, 4, StatusNoAnswer, 0},
		{v6only, 6, StatusNoError, 1},
		{&View{Status: StatusNoError, A: []netip.Addr{a4}, AAAA: []netip.Addr{a6}}, 0, StatusNoError, 2},
		{&View{Status: StatusServFail}, 0, StatusServFail, 0},
		{&View{Status: StatusTimeout}, 4, StatusTimeout, 0},
		{&View{Status: StatusNXDomain}, 6, StatusNXDomain, 0},
		{&View{Status: StatusNoAnswer}, 0, StatusNoAnswer, 0},
	} {
		r := ResolveView(c.v, c.fam)
		if r.Status != c.status || len(r.Addrs) != c.n {
			t.Errorf("ResolveView(%+v, %d) = %+v, want %s with %d addresses", c.v, c.fam, r, c.status, c.n)
		}
	}
}

// compare counts A as slower only beyond survey.SlowerMarginMs, as the
// survey does; NaN (no RTT in a cell) leaves the domain out.
func TestCompareSlowerMargin(t *testing.T) {
	nan := math.NaN()
	c := compare("a", "b", []float64{20.4, 20.6, 19.4, 20, nan}, []float64{20, 20, 20, 20, 20})
	if c.Domains != 4 || c.ASlowerPct != 25 || math.Abs(c.MeanDiffMs-0.1) > 1e-9 {
		t.Fatalf("compare = %+v, want 4 domains, 25%% slower, mean diff 0.1 ms", c)
	}
}
