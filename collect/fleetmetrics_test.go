package collect_test

import (
	"bytes"
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/fleetfig"
	"github.com/mptester/mptester/internal/pgtest"
)

// plantRun stores a run's index row and its derived rows, as ingest and
// the deriver would.
func plantRun(t testing.TB, st store.Store, probe, command string, started time.Time, paths []store.Path, d store.Derived) string {
	t.Helper()
	ctx := context.Background()
	id := uuid.NewString()
	_, _, err := st.PutRun(ctx, store.Run{RunID: id, ProbeID: probe, Command: command, SchemaVersion: "1", Status: "ok", Parsed: true,
		StartedAt: started, FinishedAt: started.Add(time.Minute), SHA256: id, RawPath: "x", ContentType: "application/json",
		StoredAt: started, Paths: paths}, store.Report{Probe: probe, Seen: started.Add(time.Minute), Backlog: 3, Dropped: 1})
	require.NoError(t, err)
	require.NoError(t, st.PutDerived(ctx, id, d))
	return id
}

// scrapeFleet gets /metrics/fleet and parses it with Prometheus' own
// text parser.
func scrapeFleet(t testing.TB, e *env, tok string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	a := e.get(t, "/metrics/fleet", tok)
	if a.code != http.StatusOK {
		return a.code, nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(a.body))
	require.NoError(t, err, "%s", a.body)
	return a.code, fams
}

// value is the gauge of name whose labels include every pair of labels.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		if m.Counter != nil {
			return m.GetCounter().GetValue(), true
		}
		return m.GetGauge().GetValue(), true
	}
	return 0, false
}

func f64(v float64) *float64 { return &v }

var wifiCell = []store.Path{{Name: "wlan0", Kind: "wifi"}, {Name: "wwan0", Kind: "cellular"}}

// TestFleetMetrics: /metrics/fleet (admin token only) gives per probe the
// figures of its last survey, pattern run and mobile run as planted in
// the derived tables, its last report, in Prometheus' names and units;
// the page is cached for FleetMetricsTTL.
func TestFleetMetrics(t *testing.T) {
	var now atomic.Int64
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	now.Store(t0.UnixNano())
	e := newEnvWith(t, func(c *collect.Config) { c.Now = func() time.Time { return time.Unix(0, now.Load()) } })

	old := t0.Add(-48 * time.Hour)
	plantRun(t, e.st, "pi1", "survey", old, wifiCell, store.Derived{Cells: []store.SurveyCell{
		{ProbePath: "wlan0", ResolvePath: "wlan0", Targets: 10, Responsive: 1, RTTP50ms: 900, RTTMeanms: 900}}})
	last := t0.Add(-time.Hour)
	plantRun(t, e.st, "pi1", "survey", last, wifiCell, store.Derived{Cells: []store.SurveyCell{
		{ProbePath: "wlan0", ResolvePath: "wlan0", Targets: 200, Responsive: 150, Unresponsive: 50, UnresponsivePct: 25, RTTP50ms: 12.5, RTTMeanms: 20,
			RTTP10ms: f64(8), RTTP25ms: f64(10.25), RTTP75ms: f64(30), RTTP90ms: f64(61.5)},
		{ProbePath: "wlan0", ResolvePath: "wwan0", Targets: 200, Responsive: 100, RTTP50ms: 14, RTTMeanms: 22.5},
		{ProbePath: "wwan0", ResolvePath: "wlan0", Targets: 100, Responsive: 0},
		{ProbePath: "wwan0", ResolvePath: "wwan0", Targets: 100, Responsive: 80, RTTP50ms: 45.25, RTTMeanms: 60}}})
	plantRun(t, e.st, "pi1", "run", old, wifiCell, store.Derived{Tests: []store.PatternTest{
		{Index: 0, Pattern: "bulk", Transport: "tcp", Path: "wlan0", Status: "success", Result: &store.TestResult{Goodput: f64(1e6)}}}})
	plantRun(t, e.st, "pi1", "run", last, wifiCell, store.Derived{Tests: []store.PatternTest{
		{Index: 0, Pattern: "bulk", Transport: "mptcp", Path: "wlan0", Status: "success", Result: &store.TestResult{Goodput: f64(40e6)}},
		{Index: 1, Pattern: "ping", Transport: "mptcp", Path: "wlan0", Status: "success", Result: &store.TestResult{Delays: []int64{1e7}}},
		{Index: 2, Pattern: "ping", Transport: "quic", Path: "wwan0", Status: "timeout"},
		{Index: 3, Pattern: "bulk", Transport: "quic", Path: "wlan0", Status: "success", Invalid: true, Result: &store.TestResult{Goodput: f64(99e6)}},
		{Index: 4, Pattern: "bulk", Transport: "mptcp", Path: "wwan0", Status: "success", Result: &store.TestResult{Goodput: f64(20e6)}},
		{Index: 5, Pattern: "iperf", Transport: "mptcp", Path: "wlan0", Status: "success", Result: &store.TestResult{
			Upload: &store.TestDirection{GoodputBps: f64(8e6)}, Download: &store.TestDirection{GoodputBps: f64(16e6)}}},
		{Index: 6, Pattern: "iperf", Transport: "quic", Path: "wlan0", Status: "timeout", Result: &store.TestResult{
			Upload: &store.TestDirection{GoodputBps: f64(1e6)}}}}})
	plantRun(t, e.st, "pi1", "run", last.Add(time.Minute), wifiCell, store.Derived{Mobile: []store.MobileSummary{
		{Index: 0, Transport: "mptcp", Upload: store.Delays{Max: 1271000000}, Download: store.Delays{Max: 1072000000}},
		{Index: 1, Transport: "mpquic", Upload: store.Delays{Max: 81000000}, Download: store.Delays{Max: 61000000}}}})

	code, _ := scrapeFleet(t, e, e.probeTok)
	require.Equal(t, http.StatusForbidden, code, "a probe token reads the fleet's figures")
	code, _ = scrapeFleet(t, e, "")
	require.Equal(t, http.StatusUnauthorized, code)
	_, fams := scrapeFleet(t, e, e.adminTok)

	type want struct {
		name   string
		labels []string
		v      float64
	}
	cell := func(p, r, study string) []string {
		return []string{"probe", "pi1", "probe_path", p, "resolve_path", r, "cell", study}
	}
	for _, w := range []want{
		{fleetfig.LastSeen, []string{"probe", "pi1"}, float64(last.Add(2 * time.Minute).Unix())},
		{fleetfig.SpoolBacklog, []string{"probe", "pi1"}, 3},
		{fleetfig.SpoolDropped, []string{"probe", "pi1"}, 5}, // the probes' reports add up
		{fleetfig.SurveyTime, []string{"probe", "pi1"}, float64(last.Unix())},
		{fleetfig.SurveyTargets, cell("wlan0", "wwan0", "WL"), 200},
		{fleetfig.SurveyReach, cell("wlan0", "wlan0", "WW"), 0.75},
		{fleetfig.SurveyReach, cell("wlan0", "wwan0", "WL"), 0.5},
		{fleetfig.SurveyReach, cell("wwan0", "wlan0", "LW"), 0},
		{fleetfig.SurveyReach, cell("wwan0", "wwan0", "LL"), 0.8},
		{fleetfig.SurveyRTT, append(cell("wlan0", "wlan0", "WW"), "quantile", "0.5"), 0.0125},
		{fleetfig.SurveyRTT, append(cell("wwan0", "wwan0", "LL"), "quantile", "0.5"), 0.04525},
		{fleetfig.SurveyRTTMean, cell("wlan0", "wwan0", "WL"), 0.0225},
		{fleetfig.RunTime, []string{"probe", "pi1"}, float64(last.Unix())},
		{fleetfig.SurveyRTT, append(cell("wlan0", "wlan0", "WW"), "quantile", "0.1"), 0.008},
		{fleetfig.SurveyRTT, append(cell("wlan0", "wlan0", "WW"), "quantile", "0.25"), 0.01025},
		{fleetfig.SurveyRTT, append(cell("wlan0", "wlan0", "WW"), "quantile", "0.75"), 0.03},
		{fleetfig.SurveyRTT, append(cell("wlan0", "wlan0", "WW"), "quantile", "0.9"), 0.0615},
		{fleetfig.RunTests, []string{"probe", "pi1", "transport", "mptcp", "status", "success"}, 4},
		{fleetfig.RunTests, []string{"probe", "pi1", "transport", "quic", "status", "timeout"}, 2},
		// Bulk: the mean of the two successful mptcp tests' 40 and 20 Mbit/s.
		{fleetfig.RunGoodput, []string{"probe", "pi1", "transport", "mptcp", "pattern", "bulk", "direction", "download"}, 30e6 / 8},
		{fleetfig.RunGoodput, []string{"probe", "pi1", "transport", "mptcp", "pattern", "iperf", "direction", "upload"}, 1e6},
		{fleetfig.RunGoodput, []string{"probe", "pi1", "transport", "mptcp", "pattern", "iperf", "direction", "download"}, 2e6},
		{fleetfig.RunTests, []string{"probe", "pi1", "transport", "quic", "status", "invalid"}, 1},
		{fleetfig.MobileTime, []string{"probe", "pi1"}, float64(last.Add(time.Minute).Unix())},
		{fleetfig.HandoverDelay, []string{"probe", "pi1", "transport", "mptcp", "direction", "upload"}, 1.271},
		{fleetfig.HandoverDelay, []string{"probe", "pi1", "transport", "mpquic", "direction", "download"}, 0.061},
		{fleetfig.FiguresProbes, nil, 1},
		{fleetfig.FiguresTime, nil, float64(t0.Unix())},
	} {
		got, ok := value(fams, w.name, w.labels...)
		if assert.True(t, ok, "no %s%v", w.name, w.labels) {
			assert.InDelta(t, w.v, got, 1e-9, "%s%v", w.name, w.labels)
		}
	}
	// The older runs are not counted; an unanswered cell has no RTT.
	_, ok := value(fams, fleetfig.RunTests, "transport", "tcp")
	assert.False(t, ok, "the older run's test is counted")
	_, ok = value(fams, fleetfig.SurveyRTT, "probe_path", "wwan0", "resolve_path", "wlan0")
	assert.False(t, ok, "an RTT for a cell without answers")
	assert.Len(t, fams[fleetfig.SurveyReach].Metric, 4)
	assert.Len(t, fams[fleetfig.RunTests].Metric, 3)
	// Neither an invalid, a failed, an older nor a goodput-less test has a goodput.
	assert.Len(t, fams[fleetfig.RunGoodput].Metric, 3)
	// Quantiles only where derived: 5 for WW, the median for WL and LL.
	assert.Len(t, fams[fleetfig.SurveyRTT].Metric, 7)
	for name, f := range fams {
		if name == fleetfig.SpoolDropped {
			assert.Equal(t, dto.MetricType_COUNTER, f.GetType(), name)
		} else {
			assert.Equal(t, dto.MetricType_GAUGE, f.GetType(), name)
		}
		assert.NotEmpty(t, f.GetHelp(), name)
	}

	// Cached: a new survey shows after the TTL, not before.
	plantRun(t, e.st, "pi1", "survey", t0, wifiCell, store.Derived{Cells: []store.SurveyCell{
		{ProbePath: "wlan0", ResolvePath: "wlan0", Targets: 4, Responsive: 1, RTTP50ms: 1, RTTMeanms: 1}}})
	_, fams = scrapeFleet(t, e, e.adminTok)
	v, _ := value(fams, fleetfig.SurveyReach, "probe_path", "wlan0", "resolve_path", "wlan0")
	assert.Equal(t, 0.75, v, "refreshed before the TTL")
	now.Add(int64(collect.FleetMetricsTTL))
	_, fams = scrapeFleet(t, e, e.adminTok)
	v, _ = value(fams, fleetfig.SurveyReach, "probe_path", "wlan0", "resolve_path", "wlan0")
	assert.Equal(t, 0.25, v, "not refreshed after the TTL")
	assert.Len(t, fams[fleetfig.SurveyReach].Metric, 1, "cells of an older survey still shown")
}

// plantFleet plants a small fleet: a probe with two surveys, two runs and
// a mobile run, and one with a survey only.
func plantFleet(t testing.TB, st store.Store) {
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	for i, cells := range [][]store.SurveyCell{
		{{ProbePath: "wlan0", ResolvePath: "wlan0", Targets: 10, Responsive: 1, RTTP50ms: 900, RTTMeanms: 900}},
		{{ProbePath: "wlan0", ResolvePath: "wlan0", Targets: 200, Responsive: 150, RTTP50ms: 12.5, RTTMeanms: 20,
			RTTP10ms: f64(1.5), RTTP25ms: f64(3), RTTP75ms: f64(40.125), RTTP90ms: f64(80)},
			{ProbePath: "wwan0", ResolvePath: "wlan0", Targets: 100, Responsive: 0}},
	} {
		plantRun(t, st, "pi1", "survey", t0.Add(time.Duration(i)*time.Hour), wifiCell, store.Derived{Cells: cells})
	}
	plantRun(t, st, "pi1", "run", t0, wifiCell, store.Derived{Tests: []store.PatternTest{{Pattern: "bulk", Transport: "tcp", Path: "wlan0", Status: "timeout"}}})
	plantRun(t, st, "pi1", "run", t0.Add(time.Hour), wifiCell, store.Derived{Tests: []store.PatternTest{
		{Index: 0, Pattern: "bulk", Transport: "mptcp", Path: "wlan0", Status: "success", Result: &store.TestResult{Goodput: f64(12.5e6)}},
		{Index: 1, Pattern: "ping", Transport: "mptcp", Path: "wlan0", Status: "success"},
		{Index: 2, Pattern: "bulk", Transport: "quic", Path: "wlan0", Status: "success", Invalid: true},
		{Index: 3, Pattern: "iperf", Transport: "mptcp", Path: "wwan0", Status: "success", Result: &store.TestResult{
			Upload: &store.TestDirection{GoodputBps: f64(3e6)}, Download: &store.TestDirection{GoodputBps: f64(7e6)}}},
		{Index: 4, Pattern: "iperf", Transport: "mptcp", Path: "wlan0", Status: "success", Result: &store.TestResult{
			Upload: &store.TestDirection{GoodputBps: f64(5e6)}}}}})
	plantRun(t, st, "pi1", "run", t0.Add(2*time.Hour), wifiCell, store.Derived{Mobile: []store.MobileSummary{
		{Transport: "mptcp", Upload: store.Delays{Max: 1271000000}, Download: store.Delays{Max: 1072000000}}}})
	plantRun(t, st, "pi2", "survey", t0, []store.Path{{Name: "eth0", Kind: "ethernet"}}, store.Derived{Cells: []store.SurveyCell{
		{ProbePath: "eth0", ResolvePath: "eth0", Targets: 5, Responsive: 5, RTTP50ms: 3, RTTMeanms: 4}}})
}

// TestFleetPostgresAgrees: the fleet queries give the same figures on
// PostgreSQL as on SQLite.
func TestFleetPostgresAgrees(t *testing.T) {
	ctx := context.Background()
	page := func(dsn string) string {
		st, err := store.Open(ctx, dsn)
		require.NoError(t, err)
		defer st.Close()
		plantFleet(t, st)
		f, err := st.Fleet(ctx)
		require.NoError(t, err)
		var b bytes.Buffer
		require.NoError(t, collect.FleetFigures(f).WriteText(&b, time.Unix(0, 0)))
		return b.String()
	}
	lite := page(t.TempDir() + "/fleet.db")
	require.Contains(t, lite, `mptester_fleet_run_tests{probe="pi1",transport="quic",status="invalid"} 1`)
	require.Contains(t, lite, `mptester_fleet_survey_reachable_ratio{probe="pi2",probe_path="eth0",resolve_path="eth0",cell=""} 1`)
	require.Contains(t, lite, `mptester_fleet_survey_rtt_seconds{probe="pi1",probe_path="wlan0",resolve_path="wlan0",cell="WW",quantile="0.75"} 0.040125`)
	require.Contains(t, lite, `mptester_fleet_run_goodput_bytes_per_second{probe="pi1",transport="mptcp",pattern="iperf",direction="upload"} 500000`)
	assert.Equal(t, lite, page(pgtest.DSN(t)))
}
