//go:build !race

package collect_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect/store"
)

// Not under the race detector: planting 2,000 runs takes 40 s there
// (4 s without); CI's non-race pass runs it.

// TestFleetMetricsCardinality: 1,000 probes with two paths, a survey and
// a run over six transports each stay within the stated bound of
// series per probe (fleetfig's doc: 3 + 3 + 8·P² + T·S + 5·T + 2·T).
func TestFleetMetricsCardinality(t *testing.T) {
	if testing.Short() {
		t.Skip("plants 2,000 runs")
	}
	e := newEnv(t, nil)
	const probes, paths, transports, statuses = 1000, 2, 6, 2
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	trs := []string{"tcp", "mptcp", "quic", "mpquic", "quic-handover", "mphttp"}
	for i := range probes {
		name := fmt.Sprintf("probe-%04d", i)
		var cells []store.SurveyCell
		for _, p := range []string{"wlan0", "wwan0"} {
			for _, r := range []string{"wlan0", "wwan0"} {
				cells = append(cells, store.SurveyCell{ProbePath: p, ResolvePath: r, Targets: 100, Responsive: int64(i%100) + 1, RTTP50ms: 10, RTTMeanms: 11,
					RTTP10ms: f64(5), RTTP25ms: f64(7), RTTP75ms: f64(20), RTTP90ms: f64(40)})
			}
		}
		plantRun(t, e.st, name, "survey", t0, wifiCell, store.Derived{Cells: cells})
		var tests []store.PatternTest
		for j, tr := range trs {
			st := "success"
			if (i+j)%3 == 0 {
				st = "timeout"
			}
			tests = append(tests, store.PatternTest{Index: int64(3 * j), Pattern: "ping", Transport: tr, Path: "wlan0", Status: st},
				store.PatternTest{Index: int64(3*j + 1), Pattern: "bulk", Transport: tr, Path: "wlan0", Status: "success",
					Result: &store.TestResult{Goodput: f64(1e7)}},
				store.PatternTest{Index: int64(3*j + 2), Pattern: "iperf", Transport: tr, Path: "wlan0", Status: "success",
					Result: &store.TestResult{Upload: &store.TestDirection{GoodputBps: f64(1e7)}, Download: &store.TestDirection{GoodputBps: f64(2e7)}}})
		}
		plantRun(t, e.st, name, "run", t0, wifiCell, store.Derived{Tests: tests})
	}
	start := time.Now()
	a := e.get(t, "/metrics/fleet", e.adminTok)
	took := time.Since(start)
	require.Equal(t, http.StatusOK, a.code)
	t.Logf("uncached /metrics/fleet over %d probes took %v (SQLite; a figure, not a bound)", probes, took)
	series := bytes.Count(a.body, []byte("\n")) - bytes.Count(a.body, []byte("\n#"))
	perProbe := 3 + 3 + 8*paths*paths + transports*statuses + 5*transports + 2*transports
	bound := probes*perProbe + 2
	t.Logf("%d probes: %d series (bound %d), %d bytes", probes, series, bound, len(a.body))
	assert.LessOrEqual(t, series, bound)
	// Every probe (planted without a report of its own): its survey (1 +
	// 4 cells x 8), its run (1, tests of at least 6 transports, 3 goodputs
	// of each).
	assert.GreaterOrEqual(t, series, probes*(1+4*8+1+6+6*3), "figures missing")
}
