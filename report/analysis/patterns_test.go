package analysis_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/report"
	"github.com/mptester/mptester/report/analysis"
)

// runDoc writes a run document holding recs.
func runDoc(t *testing.T, dir, name string, recs ...string) string {
	t.Helper()
	id := fmt.Sprintf("22222222-2222-4333-8444-%012x", len(name)*1000+int(name[0]))
	d := report.Document{Header: report.Header{SchemaVersion: "1.1", RunID: id, ProbeID: "m",
		Command: "run", Tool: report.Tool{Name: "mptester", Version: "test"}, StartedAt: time.Unix(1e9, 0)}, Status: report.StatusPartial}
	for _, r := range recs {
		d.Records = append(d.Records, json.RawMessage(r))
	}
	b, err := json.Marshal(d)
	require.NoError(t, err)
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

func rowsOf(t *testing.T, rep *analysis.Report, name string) [][]string {
	t.Helper()
	tb, ok := rep.Table(name)
	require.True(t, ok, name)
	return slices.Collect(tb.All())
}

// TestPatternTablesEqualPlantedValues: planted delays, completion times,
// goodputs and per-path bytes come out exactly (ms to three decimals),
// failed tests count in the status table only, two runs combine, and the
// IPv4/IPv6 ratio is that of the planted medians.
func TestPatternTablesEqualPlantedValues(t *testing.T) {
	dir := t.TempDir()
	cfgFam := func(p, tr string, fam int) string {
		return `"config":{"pattern":"` + p + `","transport":"` + tr + `","path":"wlan0","family":` + fmt.Sprint(fam) + `}`
	}
	cfg := func(p, tr string) string { return cfgFam(p, tr, 4) }
	a := runDoc(t, dir, "a.json",
		`{"type":"pattern_test",`+cfg("ping", "tcp")+`,"status":"success","result":{"delays_ns":[10000000,20000000]}}`,
		`{"type":"pattern_test",`+cfg("bulk", "mptcp")+`,"status":"success","result":{"completion_ns":100000000,"goodput_bps":8e6},`+
			`"path_shares":[{"path":"wlan0","bytes_acked":3000,"bytes_received":1000},{"path":"wwan0","bytes_acked":1000,"bytes_received":0}],`+
			`"path_bytes":[{"path":"wlan0","bytes_sent":4100,"bytes_received":1100}]}`,
		`{"type":"pattern_test",`+cfg("bulk", "mptcp")+`,"status":"timeout","result":null}`,
		`{"type":"pattern_test",`+cfg("iperf", "quic")+`,"status":"success","result":{"upload":{"goodput_bps":5e6,"retransmissions":7},"download":{"goodput_bps":9e6}}}`,
		`{"type":"pattern_test",`+cfg("interactive", "tcp")+`,"status":"success","result":{"upload":{"delays_ns":[1000000,3000000],"max_ns":3000000}}}`,
	)
	b := runDoc(t, dir, "b.json",
		`{"type":"pattern_test",`+cfg("ping", "tcp")+`,"status":"success","result":{"delays_ns":[30000000,40000000]}}`,
		`{"type":"pattern_test",`+cfg("bulk", "mptcp")+`,"status":"success","result":{"completion_ns":300000000,"goodput_bps":4e6}}`,
		`{"type":"pattern_test",`+cfgFam("bulk", "mptcp", 6)+`,"status":"success","result":{"completion_ns":80000000,"goodput_bps":1e7}}`,
	)
	rep, err := analysis.Analyze(analysis.Files(a, b))
	require.NoError(t, err)
	assert.Equal(t, [][]string{
		{"stable", "bulk", "mptcp", "IPv4", "wlan0", "3", "success=2 timeout=1"},
		{"stable", "bulk", "mptcp", "IPv6", "wlan0", "1", "success=1"},
		{"stable", "interactive", "tcp", "IPv4", "wlan0", "1", "success=1"},
		{"stable", "iperf", "quic", "IPv4", "wlan0", "1", "success=1"},
		{"stable", "ping", "tcp", "IPv4", "wlan0", "2", "success=2"},
	}, rowsOf(t, rep, "pattern-status"))
	//                                           n    min       p10       p25       median    p75       p90       max       mean
	assert.Equal(t, [][]string{
		{"stable", "bulk", "mptcp", "IPv4", "wlan0", "2", "completion_ms", "2", "100.000", "120.000", "150.000", "200.000", "250.000", "280.000", "300.000", "200.000"},
		{"stable", "bulk", "mptcp", "IPv4", "wlan0", "2", "goodput_mbps", "2", "4.000", "4.400", "5.000", "6.000", "7.000", "7.600", "8.000", "6.000"},
		{"stable", "bulk", "mptcp", "IPv6", "wlan0", "1", "completion_ms", "1", "80.000", "80.000", "80.000", "80.000", "80.000", "80.000", "80.000", "80.000"},
		{"stable", "bulk", "mptcp", "IPv6", "wlan0", "1", "goodput_mbps", "1", "10.000", "10.000", "10.000", "10.000", "10.000", "10.000", "10.000", "10.000"},
		{"stable", "interactive", "tcp", "IPv4", "wlan0", "1", "up_delay_ms", "2", "1.000", "1.200", "1.500", "2.000", "2.500", "2.800", "3.000", "2.000"},
		{"stable", "interactive", "tcp", "IPv4", "wlan0", "1", "up_max_delay_ms", "1", "3.000", "3.000", "3.000", "3.000", "3.000", "3.000", "3.000", "3.000"},
		{"stable", "iperf", "quic", "IPv4", "wlan0", "1", "down_goodput_mbps", "1", "9.000", "9.000", "9.000", "9.000", "9.000", "9.000", "9.000", "9.000"},
		{"stable", "iperf", "quic", "IPv4", "wlan0", "1", "up_goodput_mbps", "1", "5.000", "5.000", "5.000", "5.000", "5.000", "5.000", "5.000", "5.000"},
		{"stable", "iperf", "quic", "IPv4", "wlan0", "1", "up_retransmissions", "1", "7.000", "7.000", "7.000", "7.000", "7.000", "7.000", "7.000", "7.000"},
		{"stable", "ping", "tcp", "IPv4", "wlan0", "2", "ping_rtt_ms", "4", "10.000", "13.000", "17.500", "25.000", "32.500", "37.000", "40.000", "25.000"},
	}, rowsOf(t, rep, "pattern-metrics"))
	assert.Equal(t, [][]string{
		{"stable", "bulk", "mptcp", "IPv4", "wlan0", "1", "transport", "wlan0", "3000", "1000", "80.00"},
		{"stable", "bulk", "mptcp", "IPv4", "wlan0", "1", "transport", "wwan0", "1000", "0", "20.00"},
		{"stable", "bulk", "mptcp", "IPv4", "wlan0", "1", "interface", "wlan0", "4100", "1100", "100.00"},
	}, rowsOf(t, rep, "path-bytes"))
	// IPv4 medians 200 ms and 6 Mb/s against IPv6's 80 ms and 10 Mb/s.
	assert.Equal(t, [][]string{
		{"stable", "bulk", "mptcp", "wlan0", "completion_ms", "2", "200.000", "1", "80.000", "2.500"},
		{"stable", "bulk", "mptcp", "wlan0", "goodput_mbps", "2", "6.000", "1", "10.000", "0.600"},
	}, rowsOf(t, rep, "family-ratio"))
	// Per pair (000 Fig. 4): only run b has both families, 300 ms / 80 ms.
	assert.Equal(t, [][]string{{"stable", "bulk", "mptcp", "wlan0", "completion_ms", "1", "3.750", "3.750", "3.750", "100.00"}},
		rowsOf(t, rep, "family-pairs"))
	assert.Equal(t, [][]string{
		{"stable", "interactive", "tcp", "IPv4", "wlan0", "up", "1.000", "0.500000"},
		{"stable", "interactive", "tcp", "IPv4", "wlan0", "up", "3.000", "1.000000"},
	}, rowsOf(t, rep, "interactive-cdf"))
}

// TestFamilyPairsEqualPlanted: the i-th IPv4 test of a run pairs with its
// i-th IPv6 test (an unpaired third IPv4 test is left out), never across
// runs; a ping test counts by its median delay; the ECDF is exact.
func TestFamilyPairsEqualPlanted(t *testing.T) {
	dir := t.TempDir()
	ping := func(fam int, delays string) string {
		return `{"type":"pattern_test","config":{"pattern":"ping","transport":"quic","path":"wlan0","family":` + fmt.Sprint(fam) +
			`},"status":"success","result":{"delays_ns":[` + delays + `]}}`
	}
	a := runDoc(t, dir, "a.json",
		ping(4, "10000000,30000000,20000000"), // median 20 ms
		ping(6, "10000000"),                   // 10 ms: ratio 2
		ping(4, "5000000"),                    // 5 ms
		ping(6, "20000000,20000000"),          // 20 ms: ratio 0.25
		ping(4, "7000000"),                    // no IPv6 partner
	)
	b := runDoc(t, dir, "bb.json", ping(6, "8000000"), ping(4, "12000000")) // 1.5
	rep, err := analysis.Analyze(analysis.Files(a, b))
	require.NoError(t, err)
	assert.Equal(t, [][]string{{"stable", "ping", "quic", "wlan0", "ping_median_ms", "3", "0.875", "1.500", "1.750", "66.67"}},
		rowsOf(t, rep, "family-pairs"))
	assert.Equal(t, [][]string{
		{"stable", "ping", "quic", "wlan0", "ping_median_ms", "0.250000", "0.333333"},
		{"stable", "ping", "quic", "wlan0", "ping_median_ms", "1.500000", "0.666667"},
		{"stable", "ping", "quic", "wlan0", "ping_median_ms", "2.000000", "1.000000"},
	}, rowsOf(t, rep, "family-pairs-cdf"))
	fig, ok := rep.Figure("family-pairs-cdf")
	require.True(t, ok)
	assert.Equal(t, []float64{0.25, 1.5, 2}, fig.Series[0].X)
}

// TestMixedCommandsCombine: a survey and a run given together each fill
// their own sections; record types no section reads are listed, not lost.
func TestMixedCommandsCombine(t *testing.T) {
	rep, err := analysis.Analyze(analysis.Files("../testdata/v1.0/run.json", "../testdata/stream.jsonl"))
	require.NoError(t, err)
	assert.Len(t, rowsOf(t, rep, "inputs"), 2)
	assert.Equal(t, [][]string{{"run", "pattern_test", "4", "patterns network-causes"}, {"survey", "dns", "1", "(none)"}, {"survey", "rtt", "1", "(none)"}},
		rowsOf(t, rep, "records"))
}

// TestStableAndMobileNeverShareARow: a mobile-mode run's tests (its config
// carries the mobile options) are counted apart from a stable run's of the
// same pattern × transport × family × path, in every pattern table, and
// each row says how many tests it sums.
func TestStableAndMobileNeverShareARow(t *testing.T) {
	dir := t.TempDir()
	rec := func(goodput, wlan, wwan string) string {
		return `{"type":"pattern_test","config":{"pattern":"interactive","transport":"mpquic","path":"wlan0","family":4},"status":"success",` +
			`"result":{"upload":{"delays_ns":[` + goodput + `],"max_ns":` + goodput + `}},` +
			`"path_shares":[{"path":"wlan0","bytes_acked":` + wlan + `,"bytes_received":0},{"path":"wwan0","bytes_acked":` + wwan + `,"bytes_received":0}]}`
	}
	stable := runDoc(t, dir, "stable.json", rec("10000000", "95", "5"), rec("20000000", "95", "5"))
	mobile := runDoc(t, dir, "m.json", rec("900000000", "10", "90"))
	b, err := os.ReadFile(mobile)
	require.NoError(t, err)
	var d report.Document
	require.NoError(t, json.Unmarshal(b, &d))
	d.Header.Config = json.RawMessage(`{"mobile":{"Duration":1000000000}}`)
	b, err = json.Marshal(d)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(mobile, b, 0o644))

	rep, err := analysis.Analyze(analysis.Files(stable, mobile))
	require.NoError(t, err)
	assert.Equal(t, [][]string{
		{"mobile", "interactive", "mpquic", "IPv4", "wlan0", "1", "success=1"},
		{"stable", "interactive", "mpquic", "IPv4", "wlan0", "2", "success=2"},
	}, rowsOf(t, rep, "pattern-status"))
	assert.Equal(t, [][]string{
		{"mobile", "interactive", "mpquic", "IPv4", "wlan0", "1", "transport", "wlan0", "10", "0", "10.00"},
		{"mobile", "interactive", "mpquic", "IPv4", "wlan0", "1", "transport", "wwan0", "90", "0", "90.00"},
		{"stable", "interactive", "mpquic", "IPv4", "wlan0", "2", "transport", "wlan0", "190", "0", "95.00"},
		{"stable", "interactive", "mpquic", "IPv4", "wlan0", "2", "transport", "wwan0", "10", "0", "5.00"},
	}, rowsOf(t, rep, "path-bytes"))
	var maxRows [][]string
	for _, r := range rowsOf(t, rep, "pattern-metrics") {
		if r[6] == "up_max_delay_ms" {
			maxRows = append(maxRows, r[:8])
		}
	}
	assert.Equal(t, [][]string{
		{"mobile", "interactive", "mpquic", "IPv4", "wlan0", "1", "up_max_delay_ms", "1"},
		{"stable", "interactive", "mpquic", "IPv4", "wlan0", "2", "up_max_delay_ms", "2"},
	}, maxRows)
}
