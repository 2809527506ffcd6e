// Package fleetfig holds the fleet's figures for Prometheus and writes
// them in the text exposition format: the collector serves them on
// /metrics/fleet (from its derived tables), a probe writes its own into a
// node_exporter textfile directory (agent --textfile). One writer, so a
// figure has one name and one unit wherever it is read.
//
// Names follow Prometheus' conventions (base units: _seconds, _ratio;
// _timestamp_seconds for Unix times). Labels are bounded: probe, the
// probe's paths and the study cell, transport, status (the run statuses'
// vocabulary), pattern and direction; never a target address or a run
// id. Per probe at most 3 + 3 + 8·P² + T·S + 5·T + 2·T series for P
// paths, T transports and S statuses seen in its last run: per cell its
// targets, reachable ratio, mean and five RTT quantiles; per transport up
// to five goodputs (bulk; iperf and interactive, each direction).
package fleetfig

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Figures are the figures of some probes.
type Figures struct {
	Probes []Probe
}

// Probe is one probe's figures; a nil part has no series.
type Probe struct {
	Name string
	// LastSeen is when the probe last reported (zero: never).
	LastSeen time.Time
	// Spool: results waiting in the probe's spool and dropped by its
	// quota since its last report (nil: unknown).
	Spool  *Spool
	Survey *Survey
	Run    *Run
	Mobile *Mobile
}

// Spool is what a probe said about its spool: its backlog, and how many
// results its quota dropped in all (nil where only a not-yet-reported
// count is known, which is no counter).
type Spool struct {
	Backlog int64
	Dropped *int64
}

// Survey is a probe's last survey.
type Survey struct {
	StartedAt time.Time
	Cells     []Cell
}

// Cell is one probing path x resolving path cell (study 004 §III); Study
// is its letters (WW, WL, LW, LL) or "" when the paths are not one Wi-Fi
// and one cellular path.
type Cell struct {
	ProbePath, ResolvePath, Study string
	Targets, Responsive           int64
	RTTMedian, RTTMean            time.Duration
	// RTTQuantiles are the other quantiles of the per-target RTTs, by
	// quantile (0.1, 0.25, 0.75, 0.9); absent ones have no series.
	RTTQuantiles []Quantile `json:",omitempty"`
}

// Quantile is one quantile of a distribution.
type Quantile struct {
	Q     float64
	Value time.Duration
}

// Run is a probe's last pattern run: its tests by transport and status,
// and the mean goodput of its successful tests by transport, pattern and
// direction.
type Run struct {
	StartedAt time.Time
	Tests     []TestCount
	Goodputs  []Goodput `json:",omitempty"`
}

// Goodput is the mean goodput of a run's successful tests of one
// transport, pattern and direction (over its paths and families).
type Goodput struct {
	Transport, Pattern, Direction string
	BytesPerSecond                float64
	Tests                         int64
}

// Test is one test of a pattern run as the figures need it: its
// transport, pattern and status, and its goodputs in bit/s as its record
// has them: a bulk download's, an iperf or interactive test's per
// direction (nil: none).
type Test struct {
	Transport, Pattern, Status string
	Invalid                    bool
	Bulk, Upload, Download     *float64
}

// NewRun is a run's figures from its tests in the run's order: the tests
// by transport and status (an invalid one as status "invalid"), and the
// mean goodputs of the successful valid ones. The collector (from its
// derived tables) and the probe (from its result files) both call it, so
// their figures for the same run are the same to the bit.
func NewRun(started time.Time, tests []Test) *Run {
	r := &Run{StartedAt: started}
	counts := map[[2]string]int64{}
	var ok []Test
	for _, t := range tests {
		st := t.Status
		if t.Invalid {
			st = "invalid"
		}
		counts[[2]string{t.Transport, st}]++
		if st == "success" {
			ok = append(ok, t)
		}
	}
	for k, n := range counts {
		r.Tests = append(r.Tests, TestCount{Transport: k[0], Status: k[1], Tests: n})
	}
	slices.SortFunc(r.Tests, func(a, b TestCount) int {
		return cmp.Or(strings.Compare(a.Transport, b.Transport), strings.Compare(a.Status, b.Status))
	})
	r.Goodputs = MeanGoodputs(ok)
	return r
}

// MeanGoodputs averages samples (in the run's test order) per transport,
// pattern and direction, in bytes per second, ordered by transport,
// pattern and direction: the collector and the probe call it on the same
// tests in the same order, so their figures are equal to the bit.
func MeanGoodputs(samples []Test) []Goodput {
	type key struct{ t, p, d string }
	sum := map[key]float64{}
	n := map[key]int64{}
	add := func(k key, v *float64) {
		if v != nil && !math.IsNaN(*v) && !math.IsInf(*v, 0) {
			sum[k] += *v / 8
			n[k]++
		}
	}
	for _, s := range samples {
		add(key{s.Transport, s.Pattern, "download"}, s.Bulk)
		add(key{s.Transport, s.Pattern, "upload"}, s.Upload)
		add(key{s.Transport, s.Pattern, "download"}, s.Download)
	}
	var out []Goodput
	for k, c := range n {
		out = append(out, Goodput{Transport: k.t, Pattern: k.p, Direction: k.d, BytesPerSecond: sum[k] / float64(c), Tests: c})
	}
	slices.SortFunc(out, func(a, b Goodput) int {
		return cmp.Or(strings.Compare(a.Transport, b.Transport), strings.Compare(a.Pattern, b.Pattern), strings.Compare(a.Direction, b.Direction))
	})
	return out
}

// TestCount is how many tests of a transport ended with a status.
type TestCount struct {
	Transport, Status string
	Tests             int64
}

// Mobile is a probe's last mobile-mode run.
type Mobile struct {
	StartedAt time.Time
	Handovers []Handover
}

// Handover is one transport's largest chunk delay per direction.
type Handover struct {
	Transport          string
	MaxUpload, MaxDown time.Duration
}

// Study names a cell by the kinds of its paths as study 004 does (W Wi-Fi,
// L cellular, probing path first), given every path's kind; "" unless the
// run had exactly one path of each of the two kinds.
func Study(kinds map[string]string, probePath, resolvePath string) string {
	letter := map[string]string{"wifi": "W", "cellular": "L"}
	seen := map[string]int{}
	for _, k := range kinds {
		seen[letter[k]]++
	}
	if seen["W"] != 1 || seen["L"] != 1 {
		return ""
	}
	p, r := letter[kinds[probePath]], letter[kinds[resolvePath]]
	if p == "" || r == "" {
		return ""
	}
	return p + r
}

// family is one metric: its name, help, and samples in order.
type family struct {
	name, help string
	counter    bool // else a gauge
	samples    []sample
}

type sample struct {
	labels [][2]string
	value  float64
}

func (f *family) add(v float64, labels ...string) {
	s := sample{value: v}
	for i := 0; i+1 < len(labels); i += 2 {
		s.labels = append(s.labels, [2]string{labels[i], labels[i+1]})
	}
	f.samples = append(f.samples, s)
}

// Names of the metrics, for the dashboard, the docs and the tests.
const (
	LastSeen      = "mptester_fleet_probe_last_seen_timestamp_seconds"
	SpoolBacklog  = "mptester_fleet_probe_spool_backlog"
	SpoolDropped  = "mptester_fleet_probe_spool_dropped_total"
	SurveyTime    = "mptester_fleet_survey_timestamp_seconds"
	SurveyTargets = "mptester_fleet_survey_targets"
	SurveyReach   = "mptester_fleet_survey_reachable_ratio"
	SurveyRTT     = "mptester_fleet_survey_rtt_seconds"
	SurveyRTTMean = "mptester_fleet_survey_rtt_mean_seconds"
	RunTime       = "mptester_fleet_run_timestamp_seconds"
	RunTests      = "mptester_fleet_run_tests"
	RunGoodput    = "mptester_fleet_run_goodput_bytes_per_second"
	MobileTime    = "mptester_fleet_mobile_timestamp_seconds"
	HandoverDelay = "mptester_fleet_handover_max_delay_seconds"
	FiguresTime   = "mptester_fleet_figures_timestamp_seconds"
	FiguresProbes = "mptester_fleet_probes"
)

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// WriteText writes the figures in Prometheus' text exposition format
// (version 0.0.4), computed at `at`, every family with HELP and TYPE
// (gauges, and the spool's dropped counter), probes in name order.
func (f Figures) WriteText(w io.Writer, at time.Time) error {
	fams := []*family{
		{name: LastSeen, help: "Unix time the probe last reported to the collector."},
		{name: SpoolBacklog, help: "Results waiting in the probe's spool at its last report."},
		{name: SpoolDropped, help: "Results the probe's spool quota dropped, as the probe reported them.", counter: true},
		{name: SurveyTime, help: "Unix time the probe's last survey started."},
		{name: SurveyTargets, help: "Targets measured per cell (probing path x resolving path) of the last survey."},
		{name: SurveyReach, help: "Share of the cell's targets that answered (responsive / targets) in the last survey."},
		{name: SurveyRTT, help: "RTT quantiles of the cell's responsive targets in the last survey."},
		{name: SurveyRTTMean, help: "Mean RTT of the cell's responsive targets in the last survey."},
		{name: RunTime, help: "Unix time the probe's last pattern run started."},
		{name: RunTests, help: "Tests of the last pattern run by transport and status (success, a failure status, or invalid)."},
		{name: RunGoodput, help: "Mean goodput of the last pattern run's successful tests per transport, pattern and direction (over paths and families; bulk is a download)."},
		{name: MobileTime, help: "Unix time the probe's last mobile-mode run started."},
		{name: HandoverDelay, help: "Largest chunk delay per transport and direction in the last mobile-mode run (the handover's cost)."},
		{name: FiguresTime, help: "Unix time these figures were computed."},
		{name: FiguresProbes, help: "Probes with figures."},
	}
	byName := map[string]*family{}
	for _, fm := range fams {
		byName[fm.name] = fm
	}
	probes := slices.Clone(f.Probes)
	slices.SortFunc(probes, func(a, b Probe) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range probes {
		if !p.LastSeen.IsZero() {
			byName[LastSeen].add(unix(p.LastSeen), "probe", p.Name)
		}
		if p.Spool != nil {
			byName[SpoolBacklog].add(float64(p.Spool.Backlog), "probe", p.Name)
			if p.Spool.Dropped != nil {
				byName[SpoolDropped].add(float64(*p.Spool.Dropped), "probe", p.Name)
			}
		}
		if s := p.Survey; s != nil {
			byName[SurveyTime].add(unix(s.StartedAt), "probe", p.Name)
			for _, c := range s.Cells {
				l := []string{"probe", p.Name, "probe_path", c.ProbePath, "resolve_path", c.ResolvePath, "cell", c.Study}
				byName[SurveyTargets].add(float64(c.Targets), l...)
				ratio := math.NaN()
				if c.Targets > 0 {
					ratio = float64(c.Responsive) / float64(c.Targets)
				}
				byName[SurveyReach].add(ratio, l...)
				if c.Responsive > 0 {
					qs := append([]Quantile{{Q: 0.5, Value: c.RTTMedian}}, c.RTTQuantiles...)
					slices.SortStableFunc(qs, func(a, b Quantile) int { return cmpFloat(a.Q, b.Q) })
					for _, q := range qs {
						byName[SurveyRTT].add(q.Value.Seconds(), append(slices.Clone(l), "quantile", formatValue(q.Q))...)
					}
					byName[SurveyRTTMean].add(c.RTTMean.Seconds(), l...)
				}
			}
		}
		if r := p.Run; r != nil {
			byName[RunTime].add(unix(r.StartedAt), "probe", p.Name)
			for _, t := range r.Tests {
				byName[RunTests].add(float64(t.Tests), "probe", p.Name, "transport", t.Transport, "status", t.Status)
			}
			for _, g := range r.Goodputs {
				byName[RunGoodput].add(g.BytesPerSecond, "probe", p.Name, "transport", g.Transport, "pattern", g.Pattern, "direction", g.Direction)
			}
		}
		if m := p.Mobile; m != nil {
			byName[MobileTime].add(unix(m.StartedAt), "probe", p.Name)
			for _, h := range m.Handovers {
				byName[HandoverDelay].add(h.MaxUpload.Seconds(), "probe", p.Name, "transport", h.Transport, "direction", "upload")
				byName[HandoverDelay].add(h.MaxDown.Seconds(), "probe", p.Name, "transport", h.Transport, "direction", "download")
			}
		}
	}
	byName[FiguresTime].add(unix(at))
	byName[FiguresProbes].add(float64(len(probes)))

	bw := bufio.NewWriter(w)
	for _, fm := range fams {
		if len(fm.samples) == 0 {
			continue
		}
		typ := "gauge"
		if fm.counter {
			typ = "counter"
		}
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", fm.name, escapeHelp(fm.help), fm.name, typ)
		for _, s := range fm.samples {
			bw.WriteString(fm.name)
			if len(s.labels) > 0 {
				bw.WriteByte('{')
				for i, l := range s.labels {
					if i > 0 {
						bw.WriteByte(',')
					}
					fmt.Fprintf(bw, `%s="%s"`, l[0], escapeLabel(l[1]))
				}
				bw.WriteByte('}')
			}
			bw.WriteByte(' ')
			bw.WriteString(formatValue(s.value))
			bw.WriteByte('\n')
		}
	}
	return bw.Flush()
}

// The text format escapes a label value's backslash, double quote and
// line feed, and a HELP text's backslash and line feed.
var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
func escapeHelp(s string) string  { return helpEscaper.Replace(s) }

func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
