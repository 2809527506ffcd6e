package analysis

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// The fleet views of a collect store's runs: runs per probe
// per day, and per run its reachability (the share of pattern tests that
// succeeded, or of survey targets that answered) and its RTT (the median
// ping RTT of a run, or the median per-target RTT of a survey), over time.
// The section keeps one small row per run (O(runs)) and the current run's
// samples only, never the records. Figures are reduced with LTTB for
// display; the tables keep every run.
func init() { register(90, "fleet", func() Section { return &fleetSec{} }) }

// maxFleetSeries: more probes than this are drawn as one fleet series
// (a legend of 50 probes is unreadable); the tables name every probe.
const (
	maxFleetSeries = 8
	fleetPoints    = 600 // per series, after LTTB
)

type fleetRun struct {
	probe, id, command, status string
	start                      time.Time
	tests, ok                  int
	rtt                        float64
	hasRTT                     bool
}

type fleetSec struct {
	cur       *Run
	tests, ok int
	rtts      []float64
	runs      []fleetRun
	// A survey's cells (probe path / resolve path) per run, study 004's
	// view of reachability and RTT.
	cells    map[string]*fleetCellAgg
	cellRuns []fleetCellRun
}

type fleetCellAgg struct {
	tests, ok int
	rtts      []float64
}

type fleetCellRun struct {
	probe, id, cell string
	start           time.Time
	tests, ok       int
	rtt             float64
	hasRTT          bool
}

func (*fleetSec) fleetOnly() {}

func (*fleetSec) AppliesTo(cmd string) bool { return cmd == "run" || cmd == "survey" }

func (*fleetSec) Types() []string { return []string{"pattern_test", "probe"} }

type fleetTest struct {
	Config struct {
		Pattern string `json:"pattern"`
	} `json:"config"`
	Status string `json:"status"`
	Result *struct {
		Delays []int64 `json:"delays_ns"`
	} `json:"result"`
}

func (f *fleetSec) Add(rec Record) error {
	if rec.Run != f.cur {
		f.cur, f.tests, f.ok, f.rtts, f.cells = rec.Run, 0, 0, f.rtts[:0], nil
	}
	switch rec.Type {
	case "pattern_test":
		var t fleetTest
		if err := decode(rec, &t); err != nil {
			return err
		}
		f.tests++
		if t.Status == "success" {
			f.ok++
			if t.Result != nil && t.Config.Pattern == "ping" {
				for _, d := range t.Result.Delays {
					f.rtts = append(f.rtts, nsMs(d))
				}
			}
		}
	case "probe":
		r, err := decoded[probeRecord](rec)
		if err != nil {
			return err
		}
		if !r.Valid || r.HostOverloaded {
			return nil
		}
		f.tests++
		if r.Responsive {
			f.ok++
			f.rtts = append(f.rtts, r.median())
		}
		if f.cells == nil {
			f.cells = map[string]*fleetCellAgg{}
		}
		for _, rp := range r.resolvePaths() {
			c := f.cells[CellName(r.ProbePath, rp)]
			if c == nil {
				c = &fleetCellAgg{}
				f.cells[CellName(r.ProbePath, rp)] = c
			}
			c.tests++
			if r.Responsive {
				c.ok++
				c.rtts = append(c.rtts, r.median())
			}
		}
	}
	return nil
}

func (f *fleetSec) EndRun(r *Run) {
	fr := fleetRun{probe: r.Header.ProbeID, id: r.Header.RunID, command: r.Header.Command, start: r.Header.StartedAt.UTC(),
		status: string(r.Status)}
	switch {
	case r.Skipped != "":
		fr.status = "not read"
	case r.Truncated:
		fr.status = "truncated"
	}
	if r == f.cur {
		fr.tests, fr.ok = f.tests, f.ok
		if len(f.rtts) > 0 {
			sort.Float64s(f.rtts)
			fr.rtt, fr.hasRTT = Quantile(f.rtts, 0.5), true
		}
	}
	if r == f.cur {
		for cell, c := range f.cells {
			cr := fleetCellRun{probe: fr.probe, id: fr.id, cell: cell, start: fr.start, tests: c.tests, ok: c.ok}
			if len(c.rtts) > 0 {
				sort.Float64s(c.rtts)
				cr.rtt, cr.hasRTT = Quantile(c.rtts, 0.5), true
			}
			f.cellRuns = append(f.cellRuns, cr)
		}
	}
	f.cur, f.rtts, f.cells = nil, f.rtts[:0], nil
	f.runs = append(f.runs, fr)
}

func (f *fleetSec) sorted() []fleetRun {
	runs := slices.Clone(f.runs)
	slices.SortStableFunc(runs, func(a, b fleetRun) int {
		return cmp.Or(cmp.Compare(a.probe, b.probe), a.start.Compare(b.start), cmp.Compare(a.id, b.id))
	})
	return runs
}

func (fr fleetRun) reach() (float64, bool) {
	if fr.tests == 0 {
		return 0, false
	}
	return 100 * float64(fr.ok) / float64(fr.tests), true
}

type probeDay struct {
	probe string
	day   time.Time
}

func (f *fleetSec) Tables() []Table {
	if len(f.runs) == 0 {
		return nil
	}
	runs := f.sorted()
	days := Table{Name: "fleet-runs", Title: "Runs per probe per day (UTC)",
		Note:    "runs by the day their header says they started; by_status from each run's trailer",
		Columns: []string{"probe", "day", "runs", "by_command", "by_status"}}
	var order []probeDay
	cmds, sts := map[probeDay]map[string]int{}, map[probeDay]map[string]int{}
	for _, r := range runs {
		k := probeDay{r.probe, r.start.Truncate(24 * time.Hour)}
		if cmds[k] == nil {
			order = append(order, k)
			cmds[k], sts[k] = map[string]int{}, map[string]int{}
		}
		cmds[k][r.command]++
		sts[k][r.status]++
	}
	for _, k := range order {
		n := 0
		for _, c := range cmds[k] {
			n += c
		}
		days.Rows = append(days.Rows, []string{k.probe, k.day.Format(time.DateOnly), fmt.Sprint(n), counts(cmds[k]), counts(sts[k])})
	}
	series := Table{Name: "fleet-series", Title: "Reachability and RTT per run", Long: true,
		Note:    "reachable_pct: pattern tests that succeeded, or survey targets that answered (valid, not host-overloaded); rtt_median_ms: median ping RTT of the run, or median per-target RTT of the survey; every run, never downsampled",
		Columns: []string{"probe", "started_at", "run_id", "command", "status", "tests", "reachable_pct", "rtt_median_ms"}}
	for _, r := range runs {
		reach, rtt := "", ""
		if v, ok := r.reach(); ok {
			reach = fmt.Sprintf("%.2f", v)
		}
		if r.hasRTT {
			rtt = ms(r.rtt)
		}
		series.Rows = append(series.Rows, []string{r.probe, r.start.Format(time.RFC3339), r.id, r.command, r.status,
			fmt.Sprint(r.tests), reach, rtt})
	}
	cells := Table{Name: "fleet-cells", Title: "Reachability and RTT per survey cell and run", Long: true,
		Note:    "cell = probe path / resolve path (004 §III); reachable_pct: targets that answered (valid, not host-overloaded); rtt_median_ms: median per-target RTT",
		Columns: []string{"probe", "started_at", "run_id", "cell", "targets", "reachable_pct", "rtt_median_ms"}}
	for _, r := range f.sortedCells() {
		rtt := ""
		if r.hasRTT {
			rtt = ms(r.rtt)
		}
		cells.Rows = append(cells.Rows, []string{r.probe, r.start.Format(time.RFC3339), r.id, r.cell, fmt.Sprint(r.tests),
			fmt.Sprintf("%.2f", 100*float64(r.ok)/float64(max(1, r.tests))), rtt})
	}
	return []Table{days, series, cells}
}

func (f *fleetSec) sortedCells() []fleetCellRun {
	rs := slices.Clone(f.cellRuns)
	slices.SortStableFunc(rs, func(a, b fleetCellRun) int {
		return cmp.Or(cmp.Compare(a.probe, b.probe), cmp.Compare(a.cell, b.cell), a.start.Compare(b.start), cmp.Compare(a.id, b.id))
	})
	return rs
}

// cellFigures: per probe and cell, reachability and median RTT over time,
// one panel a probe (its cells, four with two paths).
func (f *fleetSec) cellFigures() []Figure {
	reach := Figure{Name: "fleet-cell-reachability", Title: "Reachability per survey cell", Kind: KindLines, TimeX: true,
		XLabel: "time (UTC)", YLabel: "reachable (%)", After: "fleet-cells"}
	rtt := Figure{Name: "fleet-cell-rtt", Title: "Median RTT per survey cell", Kind: KindLines, TimeX: true,
		XLabel: "time (UTC)", YLabel: "RTT (ms)", After: "fleet-cells"}
	var probes []string
	for _, r := range f.cellRuns {
		if !slices.Contains(probes, r.probe) {
			probes = append(probes, r.probe)
		}
	}
	if len(probes) > maxFleetSeries {
		return nil // the table holds them; a plot of hundreds of panels helps no one
	}
	var cur *[2]Series
	key := ""
	for _, r := range f.sortedCells() {
		if k := r.probe + " " + r.cell; k != key {
			if cur != nil {
				reach.Series, rtt.Series = append(reach.Series, cur[0]), append(rtt.Series, cur[1])
			}
			key = k
			cur = &[2]Series{{Name: k, Group: r.probe}, {Name: k, Group: r.probe}}
		}
		t := float64(r.start.UnixNano()) / 1e9
		cur[0].X, cur[0].Y = append(cur[0].X, t), append(cur[0].Y, 100*float64(r.ok)/float64(max(1, r.tests)))
		if r.hasRTT {
			cur[1].X, cur[1].Y = append(cur[1].X, t), append(cur[1].Y, r.rtt)
		}
	}
	if cur != nil {
		reach.Series, rtt.Series = append(reach.Series, cur[0]), append(rtt.Series, cur[1])
	}
	var out []Figure
	for _, fig := range []Figure{reach, rtt} {
		fig.Series = slices.DeleteFunc(fig.Series, func(s Series) bool { return len(s.X) == 0 })
		for i, s := range fig.Series {
			if x, y := LTTB(s.X, s.Y, fleetPoints); len(x) < len(s.X) {
				fig.Series[i].X, fig.Series[i].Y, fig.Downsampled = x, y, true
			}
		}
		if len(fig.Series) > 0 {
			out = append(out, fig)
		}
	}
	return out
}

func counts(m map[string]int) string {
	var s []string
	for k, v := range m {
		s = append(s, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

// Figures: runs per day, reachability and RTT over time, per probe (or the
// whole fleet as one series past maxFleetSeries probes).
func (f *fleetSec) Figures() []Figure {
	if len(f.runs) == 0 {
		return nil
	}
	runs := f.sorted()
	var probes []string
	for _, r := range runs {
		if len(probes) == 0 || probes[len(probes)-1] != r.probe {
			probes = append(probes, r.probe)
		}
	}
	one := len(probes) > maxFleetSeries
	name := func(p string) string {
		if one {
			return fmt.Sprintf("all %d probes", len(probes))
		}
		return p
	}
	perDay := Figure{Name: "fleet-runs", Title: "Runs per day", Kind: KindLines, TimeX: true, XLabel: "day (UTC)", YLabel: "runs"}
	reach := Figure{Name: "fleet-reachability", Title: "Reachability per run", Kind: KindPoints, TimeX: true, XLabel: "time (UTC)", YLabel: "reachable (%)"}
	rtt := Figure{Name: "fleet-rtt", Title: "Median RTT per run", Kind: KindPoints, TimeX: true, XLabel: "time (UTC)", YLabel: "RTT (ms)"}
	type xy struct{ x, y []float64 }
	dayN := map[string]map[int64]float64{}
	rs, ts := map[string]*xy{}, map[string]*xy{}
	var names []string
	for _, r := range runs {
		n := name(r.probe)
		if dayN[n] == nil {
			names = append(names, n)
			dayN[n], rs[n], ts[n] = map[int64]float64{}, &xy{}, &xy{}
		}
		dayN[n][r.start.Truncate(24*time.Hour).Unix()]++
		t := float64(r.start.UnixNano()) / 1e9
		if v, ok := r.reach(); ok {
			rs[n].x, rs[n].y = append(rs[n].x, t), append(rs[n].y, v)
		}
		if r.hasRTT {
			ts[n].x, ts[n].y = append(ts[n].x, t), append(ts[n].y, r.rtt)
		}
	}
	for _, n := range names {
		var s Series
		s.Name = n
		ds := make([]int64, 0, len(dayN[n]))
		for d := range dayN[n] {
			ds = append(ds, d)
		}
		slices.Sort(ds)
		for _, d := range ds {
			s.X, s.Y = append(s.X, float64(d)), append(s.Y, dayN[n][d])
		}
		perDay.Series = append(perDay.Series, s)
		for _, p := range []struct {
			fig *Figure
			v   *xy
		}{{&reach, rs[n]}, {&rtt, ts[n]}} {
			if len(p.v.x) == 0 {
				continue
			}
			// One probe's runs are time-sorted; the pooled fleet is not.
			idx := make([]int, len(p.v.x))
			for i := range idx {
				idx[i] = i
			}
			sort.SliceStable(idx, func(a, b int) bool { return p.v.x[idx[a]] < p.v.x[idx[b]] })
			x, y := make([]float64, len(idx)), make([]float64, len(idx))
			for i, j := range idx {
				x[i], y[i] = p.v.x[j], p.v.y[j]
			}
			dx, dy := LTTB(x, y, fleetPoints)
			if len(dx) < len(x) {
				p.fig.Downsampled = true
			}
			p.fig.Series = append(p.fig.Series, Series{Name: n, X: dx, Y: dy})
		}
	}
	return append([]Figure{perDay, reach, rtt}, f.cellFigures()...)
}
