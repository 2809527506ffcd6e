package analysis

import (
	"cmp"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"sort"
	"strings"
)

// The traffic patterns of study 000 §II compared per pattern × transport ×
// family × primary path, over every run given: status counts, then one row
// per metric (ping RTT: every request delay after the first, pooled; bulk
// completion time and goodput per test; iperf goodput and retransmissions
// per direction and test; interactive application delay per chunk, pooled,
// and the maximum application delay per test, 000 §IV-A), and the bytes
// each path carried.
func init() {
	register(30, "patterns", func() Section {
		return &patternSec{by: map[patKey]*patAgg{}, run: map[pairKey]*[2][]float64{}, ratios: map[pairKey]*Sample{}}
	})
}

type patKey struct {
	mode               string // "stable" or "mobile": never pooled together
	pattern, transport string
	family             int
	path               string
}

type patAgg struct {
	status  map[string]int
	metrics map[string]*Sample
	paths   map[pathSrc]*[2]uint64 // sent, received
	// Tests the metrics (successful ones) and the bytes per path sum.
	succeeded, withBytes int
}

type pathSrc struct{ path, source string }

type patternSec struct {
	by    map[patKey]*patAgg
	order []patKey
	// 000 Fig. 4 pairs: the current run's per-test values by family, then
	// every pair's IPv4/IPv6 ratio.
	cur    *Run
	run    map[pairKey]*[2][]float64
	ratios map[pairKey]*Sample
}

// pairKey is one comparable per-test metric of a pattern × transport ×
// path, across families.
type pairKey struct {
	mode, pattern, transport, path, metric string
}

type patternRecord struct {
	Config struct {
		Pattern   string `json:"pattern"`
		Transport string `json:"transport"`
		Path      string `json:"path"`
		Family    int    `json:"family"`
	} `json:"config"`
	Status string `json:"status"`
	Result *struct {
		// ping
		Delays []int64 `json:"delays_ns"`
		// bulk
		Completion *int64   `json:"completion_ns"`
		Goodput    *float64 `json:"goodput_bps"`
		// iperf and interactive
		Upload   *direction `json:"upload"`
		Download *direction `json:"download"`
	} `json:"result"`
	PathBytes []struct {
		Path     string `json:"path"`
		Sent     uint64 `json:"bytes_sent"`
		Received uint64 `json:"bytes_received"`
	} `json:"path_bytes"`
	PathShares []struct {
		Path     string `json:"path"`
		Sent     uint64 `json:"bytes_acked"`
		Received uint64 `json:"bytes_received"`
	} `json:"path_shares"`
}

type direction struct {
	GoodputBps      *float64 `json:"goodput_bps"` // iperf
	Retransmissions *uint64  `json:"retransmissions"`
	Delays          []int64  `json:"delays_ns"` // interactive
	Max             *int64   `json:"max_ns"`
}

func (s *patternSec) AppliesTo(cmd string) bool { return cmd == "run" }

func (*patternSec) Types() []string { return []string{"pattern_test"} }

func (s *patternSec) Add(rec Record) error {
	if rec.Type != "pattern_test" {
		return nil
	}
	var r patternRecord
	if err := decode(rec, &r); err != nil {
		return err
	}
	c := r.Config
	if c.Pattern == "" || c.Transport == "" || r.Status == "" {
		return fmt.Errorf("pattern_test record without pattern, transport or status")
	}
	mode := runMode(rec.Run)
	k := patKey{mode, c.Pattern, c.Transport, c.Family, c.Path}
	a := s.by[k]
	if a == nil {
		a = &patAgg{status: map[string]int{}, metrics: map[string]*Sample{}, paths: map[pathSrc]*[2]uint64{}}
		s.by[k] = a
		s.order = append(s.order, k)
	}
	a.status[r.Status]++
	if r.Status == "success" {
		a.succeeded++
	}
	if len(r.PathShares)+len(r.PathBytes) > 0 {
		a.withBytes++
	}
	add := func(m string, v float64) {
		smp := a.metrics[m]
		if smp == nil {
			smp = &Sample{}
			a.metrics[m] = smp
		}
		smp.Add(v)
	}
	if rec.Run != s.cur {
		s.endRun()
		s.cur = rec.Run
	}
	perTest := func(m string, v float64) {
		fi := slices.Index([]int{4, 6}, c.Family)
		if fi < 0 {
			return
		}
		k := pairKey{mode, c.Pattern, c.Transport, c.Path, m}
		p := s.run[k]
		if p == nil {
			p = &[2][]float64{}
			s.run[k] = p
		}
		p[fi] = append(p[fi], v)
	}
	if res := r.Result; res != nil && r.Status == "success" {
		var ping []float64
		for _, d := range res.Delays {
			add("ping_rtt_ms", nsMs(d))
			ping = append(ping, nsMs(d))
		}
		if len(ping) > 0 {
			sort.Float64s(ping)
			perTest("ping_median_ms", Quantile(ping, 0.5))
		}
		if res.Completion != nil {
			add("completion_ms", nsMs(*res.Completion))
			perTest("completion_ms", nsMs(*res.Completion))
		}
		if res.Goodput != nil {
			add("goodput_mbps", *res.Goodput/1e6)
		}
		for name, d := range map[string]*direction{"up": res.Upload, "down": res.Download} {
			if d == nil {
				continue
			}
			if d.GoodputBps != nil {
				add(name+"_goodput_mbps", *d.GoodputBps/1e6)
			}
			if d.Retransmissions != nil {
				add(name+"_retransmissions", float64(*d.Retransmissions))
			}
			for _, v := range d.Delays {
				add(name+"_delay_ms", nsMs(v))
			}
			if d.Max != nil {
				add(name+"_max_delay_ms", nsMs(*d.Max))
				perTest(name+"_max_delay_ms", nsMs(*d.Max))
			}
		}
	}
	// Multipath transports report what each path carried (schema 1.1
	// path_shares); interface counters are every test's fallback.
	for _, p := range r.PathShares {
		a.addBytes(pathSrc{p.Path, "transport"}, p.Sent, p.Received)
	}
	for _, p := range r.PathBytes {
		a.addBytes(pathSrc{p.Path, "interface"}, p.Sent, p.Received)
	}
	return nil
}

// EndRun pairs the run's tests: the i-th IPv4 test of a pattern ×
// transport × path with its i-th IPv6 test, as 000 Fig. 4 compares one
// measurement's QUIC IPv4 and IPv6 completion times.
func (s *patternSec) EndRun(*Run) { s.endRun() }

func (s *patternSec) endRun() {
	for k, p := range s.run {
		for i := range min(len(p[0]), len(p[1])) {
			if p[1][i] > 0 {
				r := s.ratios[k]
				if r == nil {
					r = &Sample{}
					s.ratios[k] = r
				}
				r.Add(p[0][i] / p[1][i])
			}
		}
		delete(s.run, k)
	}
	s.cur = nil
}

func (a *patAgg) addBytes(k pathSrc, sent, recv uint64) {
	v := a.paths[k]
	if v == nil {
		v = &[2]uint64{}
		a.paths[k] = v
	}
	v[0] += sent
	v[1] += recv
}

func nsMs(ns int64) float64 { return float64(ns) / 1e6 }

func (k patKey) cells() []string {
	return []string{k.mode, k.pattern, k.transport, fmt.Sprintf("IPv%d", k.family), k.path}
}

// runMode is "mobile" for a run of mobile mode (its config carries the
// mobile options) and "stable" otherwise: a handover test's delays and
// bytes per path describe another experiment than a stable test's.
func runMode(r *Run) string {
	if r == nil || len(r.Header.Config) == 0 {
		return "stable"
	}
	var c struct {
		Mobile json.RawMessage `json:"mobile"`
	}
	if json.Unmarshal(r.Header.Config, &c) == nil && len(c.Mobile) > 0 && string(c.Mobile) != "null" {
		return "mobile"
	}
	return "stable"
}

func cmpKey(a, b patKey) int {
	return cmp.Or(cmp.Compare(a.mode, b.mode), cmp.Compare(a.pattern, b.pattern), cmp.Compare(a.transport, b.transport),
		cmp.Compare(a.family, b.family), cmp.Compare(a.path, b.path))
}

func (s *patternSec) Tables() []Table {
	if len(s.order) == 0 {
		return nil
	}
	keys := slices.Clone(s.order)
	slices.SortStableFunc(keys, cmpKey)
	group := []string{"mode", "pattern", "transport", "family", "path"}
	st := Table{Name: "pattern-status", Title: "Pattern tests by status (000 §II)",
		Note:    "one row per mode × pattern × transport × family × primary path, every run of that mode combined (stable and mobile tests never share a row)",
		Columns: append(slices.Clone(group), "tests", "by_status")}
	mt := Table{Name: "pattern-metrics", Title: "Pattern metrics (000 §II, §IV-A)",
		Note:    "successful tests only (tests: how many); ping RTT and interactive delays pooled over requests/chunks (n: samples), the rest one value per test; quantiles interpolate linearly",
		Columns: append(slices.Clone(group), "tests", "metric", "n", "min", "p10", "p25", "median", "p75", "p90", "max", "mean")}
	pb := Table{Name: "path-bytes", Title: "Bytes per path",
		Note:    "source transport: the multipath transport's own per-path counters; interface: the path's interface counters over the test; tests: how many tests the row sums",
		Columns: append(slices.Clone(group), "tests", "source", "carried_by", "bytes_sent", "bytes_received", "share_pct")}
	for _, k := range keys {
		a := s.by[k]
		n := 0
		var sts []string
		for name, c := range a.status {
			n += c
			sts = append(sts, fmt.Sprintf("%s=%d", name, c))
		}
		sort.Strings(sts)
		st.Rows = append(st.Rows, append(k.cells(), fmt.Sprint(n), strings.Join(sts, " ")))
		var names []string
		for m := range a.metrics {
			names = append(names, m)
		}
		sort.Strings(names)
		for _, m := range names {
			xs := a.metrics[m]
			q := xs.Stats()
			mt.Rows = append(mt.Rows, append(k.cells(), fmt.Sprint(a.succeeded), m, fmt.Sprint(xs.Len()), ms(q.Min), ms(q.P10), ms(q.P25), ms(q.P50),
				ms(q.P75), ms(q.P90), ms(q.Max), ms(q.Mean)))
		}
		var srcs []pathSrc
		total := map[string]uint64{}
		for ps, v := range a.paths {
			srcs = append(srcs, ps)
			total[ps.source] += v[0] + v[1]
		}
		slices.SortFunc(srcs, func(a, b pathSrc) int { return cmp.Or(-cmp.Compare(a.source, b.source), cmp.Compare(a.path, b.path)) })
		for _, ps := range srcs {
			v := a.paths[ps]
			share := "0.00"
			if t := total[ps.source]; t > 0 {
				share = fmt.Sprintf("%.2f", 100*float64(v[0]+v[1])/float64(t))
			}
			pb.Rows = append(pb.Rows, append(k.cells(), fmt.Sprint(a.withBytes), ps.source, ps.path, fmt.Sprint(v[0]), fmt.Sprint(v[1]), share))
		}
	}
	return append([]Table{st, mt, pb, familyRatios(keys, s.by)}, s.pairTables()...)
}

func (s *patternSec) pairKeys() []pairKey {
	var ks []pairKey
	for k := range s.ratios {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b pairKey) int {
		return cmp.Or(cmp.Compare(a.mode, b.mode), cmp.Compare(a.pattern, b.pattern), cmp.Compare(a.transport, b.transport), cmp.Compare(a.path, b.path), cmp.Compare(a.metric, b.metric))
	})
	return ks
}

func (k pairKey) name() string {
	return k.mode + " " + k.pattern + " " + k.transport + " " + k.path + " " + k.metric
}

// pairTables: 000 Fig. 4 per pair of tests (the ratio's share above 1 is
// how often IPv6 was faster, for times), and its exact ECDF.
func (s *patternSec) pairTables() []Table {
	sum := Table{Name: "family-pairs", Title: "IPv4 / IPv6 per pair of tests (000 Fig. 4)",
		Note:    "the i-th IPv4 test of a run paired with its i-th IPv6 test of the same pattern × transport × path; ratio = IPv4 value / IPv6 value (for times, above 1: IPv6 was faster)",
		Columns: []string{"mode", "pattern", "transport", "path", "metric", "pairs", "ratio_p25", "ratio_median", "ratio_p75", "above_1_pct"}}
	cdf := Table{Name: "family-pairs-cdf", Title: "IPv4 / IPv6 ratio ECDF per pair (000 Fig. 4), exact", Long: true,
		Note:    "every distinct per-pair ratio with the share of pairs at or below it",
		Columns: []string{"mode", "pattern", "transport", "path", "metric", "ratio", "cdf"}}
	for _, k := range s.pairKeys() {
		r := s.ratios[k]
		st := r.Stats()
		above := 0
		for v := range r.Sorted() {
			if v > 1 {
				above++
			}
		}
		sum.Rows = append(sum.Rows, []string{k.mode, k.pattern, k.transport, k.path, k.metric, fmt.Sprint(r.Len()),
			fmt.Sprintf("%.3f", st.P25), fmt.Sprintf("%.3f", st.P50), fmt.Sprintf("%.3f", st.P75), pct(above, r.Len())})
	}
	var parts []ecdfPart
	for _, k := range s.pairKeys() {
		parts = append(parts, ecdfPart{[]string{k.mode, k.pattern, k.transport, k.path, k.metric}, s.ratios[k]})
	}
	ecdfRows(&cdf, parts, func(v float64) string { return fmt.Sprintf("%.6f", v) })
	return []Table{sum, cdf, s.interactiveCDF()}
}

// interactiveKeys are the pattern keys with interactive delays.
func (s *patternSec) delayKeys() []patKey {
	var ks []patKey
	for _, k := range s.order {
		a := s.by[k]
		if a.metrics["up_delay_ms"].Len()+a.metrics["down_delay_ms"].Len() > 0 {
			ks = append(ks, k)
		}
	}
	slices.SortStableFunc(ks, cmpKey)
	return ks
}

// interactiveCDF: the exact ECDF of the interactive pattern's application
// delay per chunk, per direction (000 §II-A; Fig. 7 plots its maximum).
func (s *patternSec) interactiveCDF() Table {
	t := Table{Name: "interactive-cdf", Title: "Interactive delay ECDF per direction (000 §II-A), exact", Long: true,
		Note:    "every distinct per-chunk application delay of successful tests, with the share at or below it",
		Columns: []string{"mode", "pattern", "transport", "family", "path", "direction", "delay_ms", "cdf"}}
	var parts []ecdfPart
	for _, k := range s.delayKeys() {
		for _, dir := range []string{"up", "down"} {
			if smp := s.by[k].metrics[dir+"_delay_ms"]; smp != nil {
				parts = append(parts, ecdfPart{append(k.cells(), dir), smp})
			}
		}
	}
	ecdfRows(&t, parts, ms)
	return t
}

// Figures: the interactive delay ECDFs, and the per-pair IPv4/IPv6 ratio
// ECDFs (log x: ratios).
func (s *patternSec) Figures() []Figure {
	inter := Figure{Name: "interactive-cdf", Title: "Interactive application delay (000 §II-A)", Kind: KindECDF, XLabel: "delay (ms)", YLabel: "ECDF", LogX: true}
	for _, k := range s.delayKeys() {
		for _, dir := range []string{"up", "down"} {
			if xs := s.by[k].metrics[dir+"_delay_ms"]; xs.Len() > 0 {
				ser, thin := xs.Series(strings.Join(append([]string{k.mode}, k.cells()[2:]...), " ") + " " + dir)
				ser.Group = k.mode + " " + k.transport
				inter.Series = append(inter.Series, ser)
				inter.Downsampled = inter.Downsampled || thin
			}
		}
	}
	pairs := Figure{Name: "family-pairs-cdf", Title: "IPv4 / IPv6 per pair of tests (000 Fig. 4)", Kind: KindECDF, XLabel: "IPv4 / IPv6", YLabel: "ECDF", LogX: true}
	for _, k := range s.pairKeys() {
		ser, thin := s.ratios[k].Series(k.name())
		ser.Group = k.mode + " " + k.transport
		pairs.Series = append(pairs.Series, ser)
		pairs.Downsampled = pairs.Downsampled || thin
	}
	return append([]Figure{inter, pairs}, s.transportFigures()...)
}

// transportFigures compare the transports of each mode and pattern: per
// transport the best median (over families and paths) of goodput and of
// completion time, the same values the findings state.
func (s *patternSec) transportFigures() []Figure {
	type group struct{ mode, pattern string }
	type best struct {
		v     float64
		where string
	}
	metrics := []struct{ name, title, label string }{
		{"goodput_mbps", "goodput", "median goodput (Mbit/s)"},
		{"up_goodput_mbps", "upload goodput", "median goodput (Mbit/s)"},
		{"down_goodput_mbps", "download goodput", "median goodput (Mbit/s)"},
		{"completion_ms", "completion time", "median completion time (ms)"},
	}
	bests := map[group]map[string]map[string]best{} // group -> metric -> transport
	var groups []group
	for _, k := range s.order {
		g := group{k.mode, k.pattern}
		for _, m := range metrics {
			xs := s.by[k].metrics[m.name]
			if xs.Len() == 0 {
				continue
			}
			if bests[g] == nil {
				bests[g] = map[string]map[string]best{}
				groups = append(groups, g)
			}
			if bests[g][m.name] == nil {
				bests[g][m.name] = map[string]best{}
			}
			v := xs.Stats().P50
			b, ok := bests[g][m.name][k.transport]
			better := v > b.v
			if m.name == "completion_ms" {
				better = v < b.v
			}
			if !ok || better {
				bests[g][m.name][k.transport] = best{v, fmt.Sprintf("IPv%d %s", k.family, k.path)}
			}
		}
	}
	slices.SortFunc(groups, func(a, b group) int { return cmp.Or(cmp.Compare(a.mode, b.mode), cmp.Compare(a.pattern, b.pattern)) })
	var figs []Figure
	for _, g := range groups {
		for _, m := range metrics {
			by := bests[g][m.name]
			if len(by) == 0 {
				continue
			}
			trs := make([]string, 0, len(by))
			for tr := range by {
				trs = append(trs, tr)
			}
			slices.Sort(trs)
			ser := Series{Name: m.title}
			for _, tr := range trs {
				ser.Labels = append(ser.Labels, tr)
				ser.Y = append(ser.Y, by[tr].v)
			}
			figs = append(figs, Figure{Name: "transports-" + g.mode + "-" + g.pattern + "-" + strings.ReplaceAll(m.name, "_", "-"),
				Title: fmt.Sprintf("%s: %s per transport (%s)", g.pattern, m.title, g.mode), Kind: KindBars, YLabel: m.label,
				Series: []Series{ser}, After: "pattern-metrics"})
		}
	}
	return figs
}

// familyRatios compares IPv4 with IPv6 for every pattern × transport ×
// path measured over both (000 Fig. 4 plots the IPv4/IPv6 completion-time
// ratio of QUIC): the ratio of the two families' medians per metric.
func familyRatios(keys []patKey, by map[patKey]*patAgg) Table {
	t := Table{Name: "family-ratio", Title: "IPv4 / IPv6 (000 Fig. 4)",
		Note:    "ratio of the IPv4 median to the IPv6 median of each metric, for every pattern × transport × path measured over both families",
		Columns: []string{"mode", "pattern", "transport", "path", "metric", "ipv4_n", "ipv4_median", "ipv6_n", "ipv6_median", "ratio"}}
	for _, k := range keys {
		if k.family != 4 {
			continue
		}
		k6 := k
		k6.family = 6
		a4, a6 := by[k], by[k6]
		if a6 == nil {
			continue
		}
		var names []string
		for m := range a4.metrics {
			if a6.metrics[m].Len() > 0 {
				names = append(names, m)
			}
		}
		sort.Strings(names)
		for _, m := range names {
			m4, m6 := a4.metrics[m].Stats().P50, a6.metrics[m].Stats().P50
			ratio := "-"
			if m6 != 0 {
				ratio = fmt.Sprintf("%.3f", m4/m6)
			}
			t.Rows = append(t.Rows, []string{k.mode, k.pattern, k.transport, k.path, m, fmt.Sprint(a4.metrics[m].Len()), ms(m4),
				fmt.Sprint(a6.metrics[m].Len()), ms(m6), ratio})
		}
	}
	return t
}

// samples are every sample the section holds.
func (s *patternSec) samples() iter.Seq[*Sample] {
	return func(yield func(*Sample) bool) {
		for _, a := range s.by {
			for _, m := range a.metrics {
				if !yield(m) {
					return
				}
			}
		}
		for _, r := range s.ratios {
			if !yield(r) {
				return
			}
		}
	}
}

// Close removes the spilled samples.
func (s *patternSec) Close() {
	for m := range s.samples() {
		m.Close()
	}
}

// Err is the first spill error.
func (s *patternSec) Err() error {
	for m := range s.samples() {
		if err := m.Err(); err != nil {
			return err
		}
	}
	return nil
}
