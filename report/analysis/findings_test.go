package analysis_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/report/analysis"
)

// TestFindingsLeadWithPlantedAnswer: the findings table comes first and
// states the planted headlines: per cell (named with study 004's letters,
// W Wi-Fi and L cellular, probing path first) the unresponsive share and
// median RTT; per transport the best median goodput and, for a multipath
// one, its ratio to the best single-path transport; provenance comes last.
func TestFindingsLeadWithPlantedAnswer(t *testing.T) {
	dir := t.TempDir()
	bulk := func(tr, path string, bps float64) string {
		return fmt.Sprintf(`{"type":"pattern_test","config":{"pattern":"bulk","transport":%q,"path":%q,"family":4},"status":"success","result":{"completion_ns":1000000000,"goodput_bps":%g}}`, tr, path, bps)
	}
	run := runDoc(t, dir, "run.json",
		bulk("tcp", "wlan0", 10e6), bulk("tcp", "wlan0", 12e6), bulk("tcp", "wwan0", 5e6), // tcp best: wlan0, median 11
		bulk("quic", "wlan0", 9e6),
		bulk("mptcp", "wlan0", 15e6), bulk("mptcp", "wlan0", 14e6), bulk("mptcp", "wlan0", 16e6), // median 15: 15/11
	)
	// The hand-made survey of the report command's tests: wlan0 is Wi-Fi,
	// wwan0 cellular; wlan0/wlan0 has 1 of 4 targets silent, median 24 ms.
	rep, err := analysis.Analyze(analysis.Files(run, "../../internal/cmd/report/testdata/survey.jsonl"))
	require.NoError(t, err)
	require.Equal(t, "findings", rep.Tables[0].Name, "the answer comes first")
	assert.Equal(t, "records", rep.Tables[len(rep.Tables)-1].Name, "what made the report comes last")
	rows := rowsOf(t, rep, "findings")
	find := func(subject string) string {
		for _, r := range rows {
			if r[0] == subject {
				return r[1]
			}
		}
		t.Errorf("no finding for %q in %v", subject, rows)
		return ""
	}
	assert.Equal(t, "1 of 4 targets unresponsive (25.00%); median RTT 24.000 ms over 3 responsive targets", find("cell WW (wlan0/wlan0)"))
	assert.Contains(t, find("cell WL (wlan0/wwan0)"), "0 of 2 targets unresponsive")
	assert.Contains(t, find("cell LW (wwan0/wlan0)"), "median RTT 64.000 ms")
	assert.Equal(t, "bulk goodput: median 11.0 Mbit/s (IPv4 wlan0, 2 tests)", find("tcp (stable)"))
	assert.Equal(t, "bulk goodput: median 15.0 Mbit/s (IPv4 wlan0, 3 tests); 1.36x the best single-path transport (tcp, 11.0 Mbit/s)", find("mptcp (stable)"))
	assert.NotContains(t, find("quic (stable)"), "x the best", "a single-path transport has no aggregation ratio")

	un := rowsOf(t, rep, "unresponsive")
	assert.Equal(t, []string{"wlan0/wwan0", "WL"}, []string{un[1][0], un[1][7]})
}

// TestNoStudyLettersForOtherKinds: two Wi-Fi paths (both would be W) keep
// their interface names only; with an Ethernet path, only the cells of
// Wi-Fi and cellular paths get letters.
func TestNoStudyLettersForOtherKinds(t *testing.T) {
	b, err := os.ReadFile("../../internal/cmd/report/testdata/survey.jsonl")
	require.NoError(t, err)
	for kind, want := range map[string]map[string]string{
		"wifi":     {"wlan0/wlan0": "", "wlan0/wwan0": "", "wwan0/wlan0": "", "wwan0/wwan0": ""},
		"ethernet": {"wlan0/wlan0": "WW", "wlan0/wwan0": "", "wwan0/wlan0": "", "wwan0/wwan0": ""},
	} {
		p := filepath.Join(t.TempDir(), "s.jsonl")
		require.NoError(t, os.WriteFile(p, bytes.Replace(b, []byte(`"kind":"cellular"`), []byte(`"kind":"`+kind+`"`), 1), 0o644))
		rep, err := analysis.Analyze(analysis.Files(p))
		require.NoError(t, err)
		got := map[string]string{}
		for _, r := range rowsOf(t, rep, "unresponsive") {
			got[r[0]] = r[7]
		}
		assert.Equal(t, want, got, kind)
	}
}

// TestFindingsLeadWithNetworkCauses: the causes run's diagnosis recorded
// lead the findings, one line per path and cause (families pooled, what
// it means, how many tests, which transports); records without a cause
// make no such line.
func TestFindingsLeadWithNetworkCauses(t *testing.T) {
	dir := t.TempDir()
	rec := func(tr, path string, fam int, status, cause string) string {
		return fmt.Sprintf(`{"type":"pattern_test","config":{"pattern":"ping","transport":%q,"path":%q,"family":%d},"status":%q,"cause":%q,"result":null}`, tr, path, fam, status, cause)
	}
	run := runDoc(t, dir, "run.json",
		rec("quic", "wlan0", 4, "tls-error", "udp-blocked:443"), rec("quic", "wlan0", 6, "tls-error", "udp-blocked:443"),
		rec("quic-handover", "wlan0", 4, "tls-error", "udp-blocked:443"),
		rec("tcp", "wwan0", 6, "connection-timeout", "v6-blackhole"),
		rec("tcp", "wwan0", 4, "success", ""), rec("quic", "wwan0", 4, "success", ""),
		rec("quic", "wlan0", 4, "io-timeout", "udp-interfered:443"))
	rep, err := analysis.Analyze(analysis.Files(run))
	require.NoError(t, err)
	rows := rowsOf(t, rep, "findings")
	require.GreaterOrEqual(t, len(rows), 3)
	assert.Equal(t, []string{"wlan0", "UDP port 443 blocked (the alternate port works): 3 tests over IPv4, IPv6 (quic, quic-handover)", "network-causes"}, rows[0])
	assert.Equal(t, []string{"wlan0", "UDP port 443 cut after the handshake (the alternate port works): 1 test over IPv4 (quic)", "network-causes"}, rows[1])
	assert.Equal(t, []string{"wwan0", "IPv6 black-holed (IPv4 to the same server works): 1 test over IPv6 (tcp)", "network-causes"}, rows[2])
	nc := rowsOf(t, rep, "network-causes")
	assert.Equal(t, [][]string{{"wlan0", "udp-blocked:443", "4", "2", "quic quic-handover"}, {"wlan0", "udp-blocked:443", "6", "1", "quic"},
		{"wlan0", "udp-interfered:443", "4", "1", "quic"}, {"wwan0", "v6-blackhole", "6", "1", "tcp"}}, nc)

	clean := runDoc(t, dir, "clean.json", rec("tcp", "wwan0", 4, "success", ""))
	rep, err = analysis.Analyze(analysis.Files(clean))
	require.NoError(t, err)
	for _, tb := range rep.Tables {
		assert.NotEqual(t, "network-causes", tb.Name, "no cause, no table")
		for _, r := range tb.Rows {
			if tb.Name == "findings" {
				assert.NotEqual(t, "network-causes", r[2])
			}
		}
	}
}

// TestFindingsNameStoppedPaths: a survey whose header says a path's part
// stopped at start (stopped_paths: a captive portal) leads the cell
// findings with it, in how many of the runs and why, and gets a
// stopped-paths table; a survey that stopped nothing has neither.
func TestFindingsNameStoppedPaths(t *testing.T) {
	b, err := os.ReadFile("../../internal/cmd/report/testdata/survey.jsonl")
	require.NoError(t, err)
	dir := t.TempDir()
	const why = "portal: names that cannot exist resolve to 198.18.199.1; 198.18.199.1:80 answers HTTP 302 Found to http://portal.lab/login"
	stopped := bytes.Replace(b, []byte(`"config":{}`), []byte(`"config":{"stopped_paths":{"wlan0":"`+why+`"}}`), 1)
	stopped = bytes.ReplaceAll(stopped, []byte("33333333-2222"), []byte("44444444-2222"))
	p1, p2 := filepath.Join(dir, "stopped.jsonl"), filepath.Join(dir, "clean.jsonl")
	require.NoError(t, os.WriteFile(p1, stopped, 0o644))
	require.NoError(t, os.WriteFile(p2, b, 0o644))
	rep, err := analysis.Analyze(analysis.Files(p1, p2))
	require.NoError(t, err)
	rows := rowsOf(t, rep, "findings")
	require.NotEmpty(t, rows)
	var cellRows [][]string
	for _, r := range rows {
		if r[2] != "network-causes" {
			cellRows = append(cellRows, r)
		}
	}
	require.NotEmpty(t, cellRows)
	assert.Equal(t, []string{"path wlan0", "survey stopped at start in 1 of 2 runs (" + why + "): no cell measured through it there", "stopped-paths"}, cellRows[0])
	assert.Equal(t, [][]string{{"wlan0", "1", "2", why}}, rowsOf(t, rep, "stopped-paths"))

	clean, err := analysis.Analyze(analysis.Files(p2))
	require.NoError(t, err)
	_, ok := clean.Table("stopped-paths")
	assert.False(t, ok, "a survey that stopped nothing has no stopped-paths table")
	for _, r := range rowsOf(t, clean, "findings") {
		assert.NotContains(t, r[1], "stopped")
	}
}
