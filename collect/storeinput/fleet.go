package storeinput

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/report/analysis"
)

// The fleet views from the roll-ups: what they cost grows with the
// window's probes and days, never with the runs stored. Counts and shares
// are exact; quantiles come from sketches (store.SketchRelErr).

// DefaultDays is the fleet views' window when none is asked for: the
// last 7 UTC days, today included.
const DefaultDays = 7

// Window is a fleet view's span: buckets of Width starting in [Since,
// Until), of one probe if Probe is set.
type Window struct {
	Since, Until time.Time
	Width        time.Duration
	Probe        string
}

// DefaultWindow is the last DefaultDays UTC days, today included.
func DefaultWindow(now time.Time) Window {
	end := now.UTC().Truncate(store.Day).Add(store.Day)
	return Window{Since: end.Add(-DefaultDays * store.Day), Until: end, Width: store.Day}
}

// Bounds fills in a window's unset bounds: until the end of today (UTC),
// since DefaultDays before until.
func Bounds(since, until, now time.Time) (time.Time, time.Time) {
	if until.IsZero() {
		until = DefaultWindow(now).Until
	}
	if since.IsZero() {
		since = until.Add(-DefaultDays * store.Day)
	}
	return since, until
}

// ParseWhen reads a window bound: RFC 3339, a UTC date, or a span back
// from now ("7d", "36h").
func ParseWhen(s string, now time.Time) (time.Time, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if d, err := strconv.Atoi(n); err == nil && d > 0 && d <= 3660 {
			return now.Add(-time.Duration(d) * store.Day), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 && strings.HasSuffix(s, "h") {
		return now.Add(-d), nil
	}
	t, err := ParseTime(s)
	if err != nil {
		return t, fmt.Errorf("%q: want RFC 3339 (2026-11-01T00:00:00Z), a date (2026-11-01) or a span back from now (7d, 36h)", s)
	}
	return t, nil
}

// NewWindow snaps [since, until) outward to the buckets the roll-ups
// keep: UTC hours when the window is within the hours kept
// (store.HourRetention) and at most two days long, UTC days otherwise.
// Zero bounds take DefaultWindow's.
func NewWindow(since, until time.Time, probe string, now time.Time) (Window, error) {
	since, until = Bounds(since, until, now)
	if !until.After(since) {
		return Window{}, fmt.Errorf("until must be after since")
	}
	w := Window{Width: store.Day, Probe: probe}
	// An hour bucket is kept for a run started within HourRetention; the
	// oldest whole hour surely kept starts one hour later.
	if until.Sub(since) <= 2*store.Day && !since.Before(now.Add(-store.HourRetention).Truncate(store.Hour).Add(store.Hour)) {
		w.Width = store.Hour
	}
	w.Since = since.UTC().Truncate(w.Width)
	w.Until = until.UTC().Truncate(w.Width)
	if w.Until.Before(until) {
		w.Until = w.Until.Add(w.Width)
	}
	return w, nil
}

// Days is the window's length in days (whole or not).
func (w Window) Days() float64 { return w.Until.Sub(w.Since).Hours() / 24 }

// FleetLinks make the views' drill-down links: the exact per-run report of
// one probe over the window, or of the fleet over one bucket. Nil: no links
// (a file has nowhere to point).
type FleetLinks func(probe string, since, until time.Time) string

// fleetAgg adds up roll-up rows of one group.
type fleetAgg struct {
	runs, tests, ok, invalid int64
	status                   map[string]int64
	surveyTests, surveyOK    int64
	rtt, targetRTT           store.Sketch
	probes                   map[string]bool
}

func (a *fleetAgg) add(r *store.Rollup) {
	if r.Cell == store.RunCell {
		a.runs += r.Runs
		if a.status == nil {
			a.status = map[string]int64{}
		}
		a.status[cmp.Or(r.Pattern, "unknown")] += r.Runs
		if r.Command == "survey" {
			a.surveyTests += r.Tests
			a.surveyOK += r.OK
		} else {
			a.tests += r.Tests
			a.ok += r.OK
			a.invalid += r.Invalid
		}
		if a.probes == nil {
			a.probes = map[string]bool{}
		}
		a.probes[r.Probe] = true
		return
	}
	if s := r.Sketches[store.MetricRTT]; s != nil {
		if r.Command == "survey" {
			a.targetRTT.Merge(s)
		} else if r.Pattern == "ping" {
			a.rtt.Merge(s)
		}
	}
}

func pct(ok, n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", 100*float64(ok)/float64(n))
}

func q(s *store.Sketch, p float64) string {
	if s == nil || s.N == 0 {
		return ""
	}
	return strconv.FormatFloat(s.Quantile(p), 'f', 3, 64)
}

func statusCounts(m map[string]int64) string {
	var s []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s = append(s, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(s, " ")
}

// maxProbeDays bounds the per-probe-per-bucket table (the window's other
// tables hold every probe and every bucket).
const maxProbeDays = 2000

// Fleet is the fleet views over a window.
type Fleet struct {
	Tables  []analysis.Table
	Figures []analysis.Figure
	// Failing are the probes' buckets with runs that did not end ok,
	// newest first (where to look for the recent failures in the index).
	Failing []ProbeBucket
}

// ProbeBucket is one probe's bucket of a window.
type ProbeBucket struct {
	Probe  string
	Bucket time.Time
}

// FleetViews are the fleet's tables and figures over w, from the
// roll-ups only.
func FleetViews(ctx context.Context, st store.Store, w Window, link FleetLinks) (Fleet, error) {
	type pb = ProbeBucket
	type key struct{ command, cell, transport, pattern string }
	buckets := map[time.Time]*fleetAgg{}
	probes := map[string]*fleetAgg{}
	probeBuckets := map[pb]*fleetAgg{}
	keys := map[key]*store.Rollup{}
	nrows := 0
	get := func(m map[string]*fleetAgg, k string) *fleetAgg {
		a := m[k]
		if a == nil {
			a = &fleetAgg{}
			m[k] = a
		}
		return a
	}
	err := st.Rollups(ctx, store.RollupFilter{Probe: w.Probe, Width: w.Width, Since: w.Since, Until: w.Until}, func(r store.Rollup) error {
		nrows++
		b := buckets[r.Bucket]
		if b == nil {
			b = &fleetAgg{}
			buckets[r.Bucket] = b
		}
		b.add(&r)
		get(probes, r.Probe).add(&r)
		k := pb{Probe: r.Probe, Bucket: r.Bucket}
		if probeBuckets[k] == nil {
			probeBuckets[k] = &fleetAgg{}
		}
		probeBuckets[k].add(&r)
		if r.Cell != store.RunCell {
			kk := key{r.Command, r.Cell, r.Transport, r.Pattern}
			if keys[kk] == nil {
				keys[kk] = &store.Rollup{RollupKey: store.RollupKey{Command: r.Command, Cell: r.Cell, Transport: r.Transport, Pattern: r.Pattern}}
			}
			keys[kk].Merge(&r)
		}
		return nil
	})
	if err != nil {
		return Fleet{}, err
	}
	unit := "day"
	if w.Width == store.Hour {
		unit = "hour"
	}
	layout := time.DateOnly
	if w.Width == store.Hour {
		layout = "2006-01-02T15:04Z"
	}
	errNote := fmt.Sprintf("quantiles from sketches: within %.0f%% of the sample value at their rank (the exact quantile lies between it and the next sample); counts and shares exact", 100*store.SketchRelErr)
	scope := "the fleet"
	if w.Probe != "" {
		scope = "probe " + w.Probe
	}
	win := analysis.Table{Name: "fleet-window", Title: "Window",
		Note:    fmt.Sprintf("%s from the roll-ups (never the raw uploads), in whole UTC %ss; %s; runs the server could not parse are not counted", scope, unit, errNote),
		Columns: []string{"since", "until", "bucket", "probe", "rollup_rows", "quantile_error"}}
	win.Rows = [][]string{{w.Since.Format(time.RFC3339), w.Until.Format(time.RFC3339), unit, cmp.Or(w.Probe, "all"), strconv.Itoa(nrows),
		fmt.Sprintf("±%.0f%%", 100*store.SketchRelErr)}}

	cols := []string{"runs", "by_status", "tests", "reachable_pct", "invalid", "ping_rtt_p50_ms", "ping_rtt_p90_ms",
		"survey_targets", "responsive_pct", "target_rtt_p50_ms", "target_rtt_p90_ms"}
	aggRow := func(a *fleetAgg) []string {
		return []string{fmt.Sprint(a.runs), statusCounts(a.status), fmt.Sprint(a.tests), pct(a.ok, a.tests), fmt.Sprint(a.invalid),
			q(&a.rtt, 0.5), q(&a.rtt, 0.9), fmt.Sprint(a.surveyTests), pct(a.surveyOK, a.surveyTests), q(&a.targetRTT, 0.5), q(&a.targetRTT, 0.9)}
	}
	days := analysis.Table{Name: "fleet-buckets", Title: "The fleet per UTC " + unit,
		Note:    "tests: pattern tests (reachable: succeeded); survey targets: valid and not host-overloaded (responsive: answered); ping RTT from ping tests, target RTT each target's median (once per cell it is in); each " + unit + " links to its exact per-run report",
		Columns: append([]string{unit, "probes"}, cols...)}
	for _, b := range slices.SortedFunc(maps.Keys(buckets), time.Time.Compare) {
		a := buckets[b]
		days.Rows = append(days.Rows, append([]string{b.Format(layout), fmt.Sprint(len(a.probes))}, aggRow(a)...))
		if link != nil {
			days.Href = append(days.Href, link(w.Probe, b, b.Add(w.Width)))
		}
	}
	pt := analysis.Table{Name: "fleet-probe-window", Title: "Per probe over the window",
		Note:    "as above, per probe; each probe links to the exact per-run report of its runs in the window",
		Columns: append([]string{"probe"}, cols...)}
	names := slices.Sorted(maps.Keys(probes))
	for _, p := range names {
		pt.Rows = append(pt.Rows, append([]string{p}, aggRow(probes[p])...))
		if link != nil {
			pt.Href = append(pt.Href, link(p, w.Since, w.Until))
		}
	}
	kt := analysis.Table{Name: "fleet-figures", Title: "Per survey cell, or per path, transport and pattern",
		Note:    "cell = probe path / resolve path (004 §III); ok_pct: tests that succeeded, targets that answered; figures of successful tests; " + errNote,
		Columns: []string{"command", "cell_or_path", "transport", "pattern", "tests", "ok_pct", "invalid", "figure", "n", "p10", "p50", "p90", "p99", "max"}}
	for _, k := range slices.SortedFunc(maps.Keys(keys), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.command, b.command), cmp.Compare(a.cell, b.cell), cmp.Compare(a.transport, b.transport), cmp.Compare(a.pattern, b.pattern))
	}) {
		r := keys[k]
		base := []string{k.command, k.cell, k.transport, k.pattern, fmt.Sprint(r.Tests), pct(r.OK, r.Tests), fmt.Sprint(r.Invalid)}
		if len(r.Sketches) == 0 {
			kt.Rows = append(kt.Rows, append(slices.Clone(base), "", "", "", "", "", "", ""))
		}
		for _, m := range slices.Sorted(maps.Keys(r.Sketches)) {
			s := r.Sketches[m]
			kt.Rows = append(kt.Rows, append(slices.Clone(base), m, fmt.Sprint(s.N), q(s, 0.1), q(s, 0.5), q(s, 0.9), q(s, 0.99), q(s, 1)))
		}
	}
	tables := []analysis.Table{win, days, pt, kt}
	if len(probeBuckets) <= maxProbeDays {
		pd := analysis.Table{Name: "fleet-probe-buckets", Title: "Per probe per UTC " + unit,
			Note:    "each row links to the exact per-run report of that probe and " + unit,
			Columns: append([]string{"probe", unit}, cols...)}
		for _, k := range slices.SortedFunc(maps.Keys(probeBuckets), func(a, b pb) int {
			return cmp.Or(cmp.Compare(a.Probe, b.Probe), a.Bucket.Compare(b.Bucket))
		}) {
			pd.Rows = append(pd.Rows, append([]string{k.Probe, k.Bucket.Format(layout)}, aggRow(probeBuckets[k])...))
			if link != nil {
				pd.Href = append(pd.Href, link(k.Probe, k.Bucket, k.Bucket.Add(w.Width)))
			}
		}
		tables = append(tables, pd)
	} else {
		win.Note += fmt.Sprintf("; the per-probe-per-%s table is left out past %d rows (choose a probe or a shorter window)", unit, maxProbeDays)
		tables[0] = win
	}
	perProbe := map[string]map[time.Time]*fleetAgg{}
	var failing []ProbeBucket
	for k, a := range probeBuckets {
		if perProbe[k.Probe] == nil {
			perProbe[k.Probe] = map[time.Time]*fleetAgg{}
		}
		perProbe[k.Probe][k.Bucket] = a
		for st, n := range a.status {
			if st != "ok" && n > 0 {
				failing = append(failing, k)
				break
			}
		}
	}
	slices.SortFunc(failing, func(a, b ProbeBucket) int { return cmp.Or(b.Bucket.Compare(a.Bucket), cmp.Compare(a.Probe, b.Probe)) })
	return Fleet{Tables: tables, Figures: fleetFigures(names, perProbe, buckets, unit), Failing: failing}, nil
}

// maxFleetSeries: past this many probes the figures draw the fleet as
// one series (as the report's fleet section does).
const maxFleetSeries = 8

func fleetFigures(names []string, perProbe map[string]map[time.Time]*fleetAgg, fleet map[time.Time]*fleetAgg, unit string) []analysis.Figure {
	if len(fleet) == 0 {
		return nil
	}
	runs := analysis.Figure{Name: "fleet-runs", Title: "Runs per " + unit, Kind: analysis.KindLines, TimeX: true,
		XLabel: unit + " (UTC)", YLabel: "runs", After: "fleet-buckets"}
	reach := analysis.Figure{Name: "fleet-reachability", Title: "Reachability per " + unit, Kind: analysis.KindLines, TimeX: true,
		XLabel: unit + " (UTC)", YLabel: "reachable (%)", After: "fleet-buckets"}
	rtt := analysis.Figure{Name: "fleet-rtt", Title: "Median ping RTT per " + unit, Kind: analysis.KindLines, TimeX: true,
		XLabel: unit + " (UTC)", YLabel: "RTT (ms)", After: "fleet-buckets"}
	series := map[string]map[time.Time]*fleetAgg{}
	order := names
	if len(names) > maxFleetSeries {
		all := fmt.Sprintf("all %d probes", len(names))
		series[all], order = fleet, []string{all}
	} else {
		series = perProbe
	}
	for _, n := range order {
		var sr, sx, st analysis.Series
		sr.Name, sx.Name, st.Name = n, n, n
		for _, b := range slices.SortedFunc(maps.Keys(series[n]), time.Time.Compare) {
			a, x := series[n][b], float64(b.Unix())
			sr.X, sr.Y = append(sr.X, x), append(sr.Y, float64(a.runs))
			if a.tests > 0 {
				sx.X, sx.Y = append(sx.X, x), append(sx.Y, 100*float64(a.ok)/float64(a.tests))
			}
			if a.rtt.N > 0 {
				st.X, st.Y = append(st.X, x), append(st.Y, a.rtt.Quantile(0.5))
			}
		}
		runs.Series = append(runs.Series, sr)
		if len(sx.X) > 0 {
			reach.Series = append(reach.Series, sx)
		}
		if len(st.X) > 0 {
			rtt.Series = append(rtt.Series, st)
		}
	}
	out := []analysis.Figure{runs}
	for _, f := range []analysis.Figure{reach, rtt} {
		if len(f.Series) > 0 {
			out = append(out, f)
		}
	}
	return out
}
