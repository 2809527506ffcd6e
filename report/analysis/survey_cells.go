package analysis

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The survey's cells (study 004 §III): a probe record measures one address
// from one probe path, and belongs to every cell (probe path, resolve path)
// whose resolve path resolved it. Table I counts unresponsive servers per
// cell; Fig. 2 plots the CDF of the per-target RTT per cell. The
// definitions are survey.Summary's: a target is responsive when any probe
// was answered, its RTT is the median of its probes, host-overloaded
// targets are neither responsive nor unresponsive, and runs combined pool
// their targets.
func init() { register(20, "cells", func() Section { return &cells{by: map[cellKey]*cellAgg{}} }) }

type probeRecord struct {
	ProbePath      string    `json:"probe_path"`
	ResolvePath    string    `json:"resolve_path"`
	ResolvePaths   []string  `json:"resolve_paths"`
	Address        string    `json:"address"`
	RTTsMs         []float64 `json:"rtts_ms"`
	Median         float64   `json:"median"`
	Responsive     bool      `json:"responsive"`
	Valid          bool      `json:"valid"`
	HostOverloaded bool      `json:"host_overloaded"`
	Bytes          int64     `json:"bytes"`
	Route          string    `json:"route"` // "via-nat64": probed through the probe path's NAT64
	NAT64Prefix    string    `json:"nat64_prefix"`
}

// routeViaNAT64 is survey.RouteViaNAT64 (the survey's record says it).
const routeViaNAT64 = "via-nat64"

// resolvePaths are the cells' resolve paths (resolve_path alone in a
// record without the list).
func (r *probeRecord) resolvePaths() []string {
	if len(r.ResolvePaths) == 0 && r.ResolvePath != "" {
		return []string{r.ResolvePath}
	}
	return r.ResolvePaths
}

// median is the target's RTT: the median of its samples, or the record's
// median when it carries no samples.
func (r *probeRecord) median() float64 {
	if len(r.RTTsMs) == 0 {
		return r.Median
	}
	s := slices.Clone(r.RTTsMs)
	sort.Float64s(s)
	return Quantile(s, 0.5)
}

type cellKey struct{ probe, resolve string }

type cellAgg struct {
	targets, responsive, overloaded, invalid int
	medians                                  Sample // one per responsive target probed directly, spilled past a bound
	// Targets probed through a NAT64 (route via-nat64): counted in
	// targets and responsive too, their RTTs kept apart in viaMedians.
	via, viaResponsive int
	viaMedians         Sample
}

// nat64Path is what one probe path's targets through a NAT64 gave.
type nat64Path struct {
	prefixes            []string
	targets, responsive int // unique per run and address: a record is one target
}

type cells struct {
	by    map[cellKey]*cellAgg
	nat64 map[string]*nat64Path // probe path -> its targets via NAT64
	order []string              // paths in first-seen header order
	kinds map[string]string     // path name -> kind ("wifi", "cellular", ...)
	// runs are the survey runs seen; stopped, per path, the runs whose
	// header says the path's part stopped at start (stopped_paths: a
	// captive portal), with the first reason given.
	runs    map[*Run]bool
	stopped map[string]*stoppedPath
}

// stoppedPath is a path the survey stopped in some runs.
type stoppedPath struct {
	runs int
	why  string
}

// noteRun reads a run's header once: the paths its survey stopped.
func (c *cells) noteRun(run *Run) error {
	if c.runs[run] {
		return nil
	}
	if c.runs == nil {
		c.runs = map[*Run]bool{}
	}
	c.runs[run] = true
	var cfg struct {
		Stopped map[string]string `json:"stopped_paths"`
	}
	if len(run.Header.Config) > 0 {
		if err := json.Unmarshal(run.Header.Config, &cfg); err != nil {
			return fmt.Errorf("survey header config: stopped_paths: %w", err)
		}
	}
	for p, why := range cfg.Stopped {
		if c.stopped == nil {
			c.stopped = map[string]*stoppedPath{}
		}
		sp := c.stopped[p]
		if sp == nil {
			sp = &stoppedPath{why: why}
			c.stopped[p] = sp
		}
		sp.runs++
	}
	return nil
}

func (c *cells) AppliesTo(cmd string) bool { return cmd == "survey" }

func (*cells) Types() []string { return []string{"probe"} }

func (c *cells) Add(rec Record) error {
	if rec.Type != "probe" {
		return nil
	}
	for _, p := range rec.Run.Header.Paths {
		if !slices.Contains(c.order, p.Name) {
			c.order = append(c.order, p.Name)
		}
		if c.kinds == nil {
			c.kinds = map[string]string{}
		}
		if _, ok := c.kinds[p.Name]; !ok {
			c.kinds[p.Name] = p.Kind
		}
	}
	if err := c.noteRun(rec.Run); err != nil {
		return err
	}
	r, err := decoded[probeRecord](rec)
	if err != nil {
		return err
	}
	if r.ProbePath == "" {
		return fmt.Errorf("probe record without probe_path")
	}
	resolve := r.resolvePaths()
	if len(resolve) == 0 {
		return fmt.Errorf("probe record of %s without resolve_paths", r.Address)
	}
	med := r.median()
	if r.Route == routeViaNAT64 && r.Valid {
		if c.nat64 == nil {
			c.nat64 = map[string]*nat64Path{}
		}
		n := c.nat64[r.ProbePath]
		if n == nil {
			n = &nat64Path{}
			c.nat64[r.ProbePath] = n
		}
		if r.NAT64Prefix != "" && !slices.Contains(n.prefixes, r.NAT64Prefix) {
			n.prefixes = append(n.prefixes, r.NAT64Prefix)
		}
		n.targets++
		if r.Responsive {
			n.responsive++
		}
	}
	for _, rp := range resolve {
		k := cellKey{r.ProbePath, rp}
		a := c.by[k]
		if a == nil {
			a = &cellAgg{}
			c.by[k] = a
		}
		if !r.Valid { // measured while a path changed: counted apart, never pooled
			a.invalid++
			continue
		}
		a.targets++
		via := r.Route == routeViaNAT64
		if via {
			a.via++
		}
		switch {
		case r.Responsive && via:
			a.responsive++
			a.viaResponsive++
			a.viaMedians.Add(med)
		case r.Responsive:
			a.responsive++
			a.medians.Add(med)
		case r.HostOverloaded:
			a.overloaded++
		}
	}
	return nil
}

func (c *cells) keys() []cellKey {
	var probes, resolves []string
	for k := range c.by {
		if !slices.Contains(probes, k.probe) {
			probes = append(probes, k.probe)
		}
		if !slices.Contains(resolves, k.resolve) {
			resolves = append(resolves, k.resolve)
		}
	}
	pathOrder(c.order, probes)
	pathOrder(c.order, resolves)
	var ks []cellKey
	for _, p := range probes {
		for _, r := range resolves {
			if c.by[cellKey{p, r}] != nil {
				ks = append(ks, cellKey{p, r})
			}
		}
	}
	return ks
}

// CellName is "probe/resolve", as survey.Comparison names cells.
func CellName(probe, resolve string) string { return probe + "/" + resolve }

// studyLetter is how study 004 names a path by its kind: W for Wi-Fi, L
// for the cellular (LTE) one.
var studyLetter = map[string]string{"wifi": "W", "cellular": "L"}

// letters names a cell as study 004 §III does, probing path first and
// resolving path second (WL: probed over Wi-Fi, resolved on the cellular
// path's DNS), or "" when the paths are not one Wi-Fi and one cellular
// path each (two Wi-Fi paths would both be W).
func (c *cells) letters(k cellKey) string {
	used := map[string]string{}
	for name, kind := range c.kinds {
		l := studyLetter[kind]
		if l == "" {
			continue
		}
		if other, ok := used[l]; ok && other != name {
			return ""
		}
		used[l] = name
	}
	p, r := studyLetter[c.kinds[k.probe]], studyLetter[c.kinds[k.resolve]]
	if p == "" || r == "" {
		return ""
	}
	return p + r
}

// label is a cell's name for people: the study's letters, then the paths.
func (c *cells) label(k cellKey) string {
	if l := c.letters(k); l != "" {
		return l + " " + CellName(k.probe, k.resolve)
	}
	return CellName(k.probe, k.resolve)
}

// anyVia reports whether some target was probed through a NAT64: only
// then do the tables get their route columns (a survey without NAT64
// reads as before).
func (c *cells) anyVia() bool {
	for _, a := range c.by {
		if a.via > 0 {
			return true
		}
	}
	return false
}

// routeSample is a cell's RTT sample of one route.
type routeSample struct {
	name string
	s    *Sample
}

// routes are the RTT samples of cell a by route: direct, then via-nat64
// when there are targets through the translator.
func (c *cells) routes(a *cellAgg, via bool) []routeSample {
	out := []routeSample{{"direct", &a.medians}}
	if via && a.via > 0 {
		out = append(out, routeSample{routeViaNAT64, &a.viaMedians})
	}
	return out
}

func (c *cells) Tables() []Table {
	if len(c.by) == 0 {
		return nil
	}
	via := c.anyVia()
	un := Table{Name: "unresponsive", Title: "Unresponsive servers per cell (004 Table I)",
		Note:    "cell = probe path / resolve path (study_cell: 004's letters, W Wi-Fi, L cellular, probing path first); unresponsive % of targets measured (targets - host overloaded); invalid records (a path changed) are not counted",
		Columns: []string{"cell", "targets", "responsive", "unresponsive", "unresponsive_pct", "host_overloaded", "invalid", "study_cell"}}
	rtt := Table{Name: "rtt", Title: "RTT per cell, ms (004 Fig. 2)",
		Note:    "per-target median RTT of responsive targets; quantiles interpolate linearly between closest ranks",
		Columns: []string{"cell", "n", "min", "p10", "p25", "p50", "p75", "p90", "max", "mean", "study_cell"}}
	cdf := Table{Name: "rtt-cdf", Title: "RTT ECDF per cell (004 Fig. 2), exact", Long: true,
		Note:    "every distinct per-target median RTT with the share of the cell's responsive targets at or below it",
		Columns: []string{"cell", "rtt_ms", "cdf"}}
	if via {
		un.Note += "; via_nat64: targets probed through the probe path's NAT64 (in targets too), via_nat64_responsive: those that answered"
		un.Columns = append(un.Columns, "via_nat64", "via_nat64_responsive")
		rtt.Note += "; route: direct, or via-nat64 (through the probe path's NAT64: its RTTs kept apart)"
		rtt.Columns = append(rtt.Columns, "route")
		cdf.Columns = []string{"cell", "route", "rtt_ms", "cdf"}
	}
	keys := c.keys()
	for _, k := range keys {
		a := c.by[k]
		name := CellName(k.probe, k.resolve)
		row := []string{name, fmt.Sprint(a.targets), fmt.Sprint(a.responsive),
			fmt.Sprint(a.targets - a.responsive - a.overloaded), pct(a.targets-a.responsive-a.overloaded, a.targets-a.overloaded),
			fmt.Sprint(a.overloaded), fmt.Sprint(a.invalid), c.letters(k)}
		if via {
			row = append(row, fmt.Sprint(a.via), fmt.Sprint(a.viaResponsive))
		}
		un.Rows = append(un.Rows, row)
		for _, rt := range c.routes(a, via) {
			st := rt.s.Stats()
			row := []string{name, fmt.Sprint(rt.s.Len()), ms(st.Min), ms(st.P10), ms(st.P25),
				ms(st.P50), ms(st.P75), ms(st.P90), ms(st.Max), ms(st.Mean), c.letters(k)}
			if via {
				row = append(row, rt.name)
			}
			rtt.Rows = append(rtt.Rows, row)
		}
	}
	var parts []ecdfPart
	for _, k := range keys {
		for _, rt := range c.routes(c.by[k], via) {
			cells := []string{CellName(k.probe, k.resolve)}
			if via {
				cells = append(cells, rt.name)
			}
			parts = append(parts, ecdfPart{cells, rt.s})
		}
	}
	ecdfRows(&cdf, parts, ms)
	out := []Table{un, rtt, cdf}
	if via {
		out = append(out, c.nat64Table())
	}
	if len(c.stopped) > 0 {
		out = append(out, c.stoppedTable())
	}
	return out
}

// stoppedTable: per path whose part of a survey stopped at start, in how
// many of the runs and why (the survey's own words).
func (c *cells) stoppedTable() Table {
	t := Table{Name: "stopped-paths", Title: "Paths the survey stopped",
		Note:    "paths whose part of a survey stopped at start (header stopped_paths, e.g. a captive portal): no cell probes or resolves through them in those runs; why is the first run's reason",
		Columns: []string{"path", "runs", "of_runs", "why"}}
	var paths []string
	for p := range c.stopped {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	pathOrder(c.order, paths)
	for _, p := range paths {
		t.Rows = append(t.Rows, []string{p, fmt.Sprint(c.stopped[p].runs), fmt.Sprint(len(c.runs)), c.stopped[p].why})
	}
	return t
}

// nat64Table: per probe path that probed through a NAT64, its prefix and
// its IPv4 targets reached through the translator.
func (c *cells) nat64Table() Table {
	t := Table{Name: "nat64", Title: "Probe paths behind a NAT64",
		Note:    "IPv4 targets probed from an IPv6-only path through its NAT64 (RFC 7050 prefix, RFC 6052 synthesis): route via-nat64; targets are (run, address) records",
		Columns: []string{"path", "nat64_prefix", "targets", "responsive", "responsive_pct"}}
	var paths []string
	for p := range c.nat64 {
		paths = append(paths, p)
	}
	pathOrder(c.order, paths)
	for _, p := range paths {
		n := c.nat64[p]
		t.Rows = append(t.Rows, []string{p, strings.Join(n.prefixes, " "), fmt.Sprint(n.targets), fmt.Sprint(n.responsive), pct(n.responsive, n.targets)})
	}
	return t
}

// Close removes the spilled samples.
func (c *cells) Close() {
	for _, a := range c.by {
		a.medians.Close()
		a.viaMedians.Close()
	}
}

// Err is the first spill error.
func (c *cells) Err() error {
	for _, a := range c.by {
		if err := a.medians.Err(); err != nil {
			return err
		}
		if err := a.viaMedians.Err(); err != nil {
			return err
		}
	}
	return nil
}

// Stats summarises a sample as survey.RTTStats does.
type Stats struct{ Min, P10, P25, P50, P75, P90, Max, Mean float64 }

// StatsOf returns the stats of xs (zero for none).
func StatsOf(xs []float64) Stats {
	if len(xs) == 0 {
		return Stats{}
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	return Stats{Min: s[0], P10: Quantile(s, .1), P25: Quantile(s, .25), P50: Quantile(s, .5), P75: Quantile(s, .75),
		P90: Quantile(s, .9), Max: s[len(s)-1], Mean: sum / float64(len(s))}
}

// Figures: 004 Fig. 2 (the RTT ECDF of every cell, exact) and Table I as
// bars.
func (c *cells) Figures() []Figure {
	if len(c.by) == 0 {
		return nil
	}
	cdf := Figure{Name: "rtt-cdf", Title: "RTT per cell (004 Fig. 2)", Kind: KindECDF, XLabel: "per-target median RTT (ms)", YLabel: "ECDF"}
	un := Figure{Name: "unresponsive", Title: "Unresponsive servers per cell (004 Table I)", Kind: KindBars, YLabel: "unresponsive (%)"}
	bars := Series{Name: "unresponsive %"}
	for _, k := range c.keys() {
		a := c.by[k]
		name := c.label(k)
		if a.medians.Len() > 0 {
			ser, thin := a.medians.Series(name)
			cdf.Series = append(cdf.Series, ser)
			cdf.Downsampled = cdf.Downsampled || thin
		}
		if a.viaMedians.Len() > 0 {
			ser, thin := a.viaMedians.Series(name + " " + routeViaNAT64)
			cdf.Series = append(cdf.Series, ser)
			cdf.Downsampled = cdf.Downsampled || thin
		}
		measured := a.targets - a.overloaded
		v := 0.0
		if measured > 0 {
			v = 100 * float64(a.targets-a.responsive-a.overloaded) / float64(measured)
		}
		bars.Labels = append(bars.Labels, name)
		bars.Y = append(bars.Y, v)
	}
	un.Series = []Series{bars}
	var figs []Figure
	if len(cdf.Series) > 0 {
		figs = append(figs, cdf)
	}
	return append(figs, un)
}
