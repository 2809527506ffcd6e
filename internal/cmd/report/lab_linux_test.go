//go:build linux && !race

package report_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/internal/cmd"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/lab/world"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/survey"
)

// envMain makes this test binary behave as mptester, so the lab's client
// namespace runs the real `mptester survey`.
const envMain = "MPTESTER_REPORT_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envMain) == "1" {
		os.Exit(cmd.Main())
	}
	os.Exit(m.Run())
}

// reportCSV runs `mptester report --format csv --section name file`.
func reportCSV(t *testing.T, name, file string) [][]string {
	t.Helper()
	ios, out, errOut := cmdutil.Test()
	code := cmd.Run(context.Background(), ios, []string{"report", "--format", "csv", "--section", name, file})
	require.Equal(t, 0, code, errOut.String())
	rows, err := csv.NewReader(strings.NewReader(out.String())).ReadAll()
	require.NoError(t, err)
	return rows[1:]
}

// summaryOf returns the survey's own summary record from its output.
func summaryOf(t *testing.T, path string) survey.Summary {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var s survey.Summary
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, `{"type":"summary"`) {
			require.NoError(t, json.Unmarshal([]byte(line), &s))
		}
	}
	require.Equal(t, "summary", s.Type)
	return s
}

func f64(t *testing.T, s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err)
	return v
}

// TestLabSurveyReportEqualsTruth: `mptester survey` in a lab world,
// then `mptester report` on its output. The unresponsive table (004
// Table I), resolution and overlap equal truth.json exactly; every cell's
// RTT quantiles are within 2 ms of the truth's (the survey's own lab
// tolerance: per-target medians within 1 ms, the emulator late under
// load), the comparisons' mean differences within 1 ms and shares of
// slower domains within 2 percentage points (the survey test's). A failed RTT check is retried once after a pause, as the
// survey's lab test does.
func TestLabSurveyReportEqualsTruth(t *testing.T) {
	labtest.Require(t)
	t.Setenv(envMain, "1")
	l := labtest.Start(t, lab.Options{Domains: 150, WorldSeed: 14})
	info := l.Config()
	var truth world.Truth
	l.Truth(t, &truth)
	exe, err := os.Executable()
	require.NoError(t, err)
	for attempt := 1; ; attempt++ {
		out := filepath.Join(info.Dir, fmt.Sprintf("survey-%d.jsonl", attempt))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		b, err := l.Exec(ctx, "client", exe, "survey", "--list", info.Files.Tranco, "--top", strconv.Itoa(info.Domains),
			"--paths", strings.Join(truth.Paths, ","), "--count", "10", "--timeout", "1500ms", "--spacing", "10ms", "--rate", "1500",
			"--dns-timeout", "800ms", "--dns-retries", "1", "--log-level", "warn", "--output", out)
		cancel()
		require.NoError(t, err, "survey in the lab: %s", b)

		s := truth.Summary
		// The lab's wlan0 is Wi-Fi and wwan0 cellular: study 004's letters.
		letter := map[string]string{"wlan0": "W", "wwan0": "L"}
		un := reportCSV(t, "unresponsive", out)
		require.Len(t, un, len(s.Cells))
		for i, c := range s.Cells {
			assert.Equal(t, []string{c.ProbePath + "/" + c.ResolvePath, fmt.Sprint(c.Targets), fmt.Sprint(c.Responsive),
				fmt.Sprint(c.Unresponsive), fmt.Sprintf("%.2f", c.UnresponsivePct), "0", "0", letter[c.ProbePath] + letter[c.ResolvePath]}, un[i], "Table I row %d", i)
		}
		t.Logf("Table I from the report: %v", un)
		res := reportCSV(t, "resolution", out)
		require.Len(t, res, len(s.Resolution))
		for i, pr := range s.Resolution {
			assert.Equal(t, []string{pr.Path, fmt.Sprint(pr.Domains), fmt.Sprint(pr.Resolved), fmt.Sprint(pr.Failed)}, res[i][1:5])
		}
		ov := reportCSV(t, "overlap", out)
		require.Len(t, ov, 1)
		o := s.Overlap
		assert.Equal(t, []string{o.PathA, o.PathB, fmt.Sprint(o.IPsPathA), fmt.Sprint(o.IPsPathB), fmt.Sprint(o.IPsCommon),
			fmt.Sprintf("%.2f", o.OverlapPct)}, ov[0][1:7])
		assert.Equal(t, fmt.Sprintf("%.2f", o.DomainsDifferPct), ov[0][8])

		// Bytes per path: exactly the survey's own bytes_sent, which its
		// lab test holds within 1% of what the emulator received.
		sum := summaryOf(t, out)
		by := reportCSV(t, "survey-bytes", out)
		require.Len(t, by, len(sum.BytesSent))
		for _, row := range by {
			want := float64(sum.BytesSent[row[1]])
			assert.Equal(t, fmt.Sprint(sum.BytesSent[row[1]]), row[4], "bytes sent through %s", row[1])
			t.Logf("%s: report %s bytes, survey bytes_sent %.0f", row[1], row[4], want)
		}

		var problems []string
		rtt := reportCSV(t, "rtt", out)
		require.Len(t, rtt, len(s.Cells))
		for i, c := range s.Cells {
			want := []float64{c.RTTms.Min, c.RTTms.P10, c.RTTms.P25, c.RTTms.P50, c.RTTms.P75, c.RTTms.P90, c.RTTms.Max, c.RTTms.Mean}
			for j, w := range want {
				if got := f64(t, rtt[i][2+j]); got < w-2 || got > w+2 {
					problems = append(problems, fmt.Sprintf("cell %s column %d: report %.3f ms, truth %.3f ms", rtt[i][0], j, got, w))
				}
			}
		}
		cmp := reportCSV(t, "comparisons", out)
		require.Len(t, cmp, len(s.Comparisons))
		for i, c := range s.Comparisons {
			assert.Equal(t, []string{c.A, c.B, fmt.Sprint(c.Domains)}, cmp[i][:3])
			if got := f64(t, cmp[i][3]); got < c.MeanDiffMs-1 || got > c.MeanDiffMs+1 {
				problems = append(problems, fmt.Sprintf("%s vs %s: mean difference %.3f ms, truth %.3f ms", c.A, c.B, got, c.MeanDiffMs))
			}
			if got := f64(t, cmp[i][4]); got < c.ASlowerPct-2 || got > c.ASlowerPct+2 {
				problems = append(problems, fmt.Sprintf("%s vs %s: a slower for %.2f%%, truth %.2f%%", c.A, c.B, got, c.ASlowerPct))
			}
		}
		if len(problems) == 0 {
			return
		}
		if attempt == 2 {
			for _, p := range problems {
				t.Error(p)
			}
			return
		}
		t.Logf("attempt 1: %d RTT problems (first: %s); the host may be overloaded, surveying again", len(problems), problems[0])
		time.Sleep(3 * time.Second)
	}
}

// TestLabPatternReportEqualsEmulation: the real `mptester run` (ping and
// interactive over TCP and QUIC on both paths; one run per family, the
// lab's server having one address of each) in the lab against a test
// server in its Internet namespace, each path emulated with its own delay
// and no jitter or loss; then `mptester report` over both runs. Per path
// and family, the report's ping RTT and interactive delay medians (the
// interactive ECDF's too) are within 2 ms of the emulated RTT (the
// patterns' own lab tolerance), and the IPv4/IPv6 ratio of medians (000
// Fig. 4) compares the two runs' medians. A check off by the host's load
// is retried once, as the survey's lab test does.
//
// ci:rerun-allowed: RTT and delay medians measured through the lab's emulator against its delay settings (±2 ms); a host stall on the shared vCPUs delays its deliveries and shifts a median past the tolerance
func TestLabPatternReportEqualsEmulation(t *testing.T) {
	labtest.Require(t)
	t.Setenv(envMain, "1")
	l := labtest.Start(t, lab.Options{Domains: 0, Seed: 7})
	info := l.Config()
	const port = 8443
	startTestServer(t, l, port)
	rtt := map[string]float64{"wlan0": 10, "wwan0": 16} // ms: twice the one-way delay
	for path, r := range rtt {
		l.Set(t, path, fmt.Sprintf("delay=%gms", r/2), "jitter=0s", "loss=0", "rate=0")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	for attempt := 1; ; attempt++ {
		var files []string
		for _, fam := range []struct{ family, server string }{{"4", lab.Server4.String()}, {"6", lab.Server6.String()}} {
			out := filepath.Join(info.Dir, fmt.Sprintf("run-%d-v%s.json", attempt, fam.family))
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			b, err := l.Exec(ctx, "client", exe, "run", "--server", fam.server, "--family", fam.family,
				"--tcp-port", fmt.Sprint(port), "--quic-port", fmt.Sprint(port), "--quic-alt-port", "0", "--insecure",
				"--paths", "wlan0,wwan0", "--patterns", "ping,interactive", "--transports", "tcp,quic", "--ping-count", "9",
				"--duration", "1s", "--pace", "10ms", "--no-upload", "--log-level", "warn", "--output", out)
			cancel()
			require.NoError(t, err, "run in the lab: %s", b)
			files = append(files, out)
		}
		report := func(section string) [][]string {
			ios, out, errOut := cmdutil.Test()
			code := cmd.Run(context.Background(), ios, append([]string{"report", "--format", "csv", "--section", section}, files...))
			require.Equal(t, 0, code, errOut.String())
			rows, err := csv.NewReader(strings.NewReader(out.String())).ReadAll()
			require.NoError(t, err)
			// Every pattern table starts with the mode; these runs are stable.
			require.Equal(t, "mode", rows[0][0])
			for i, row := range rows[1:] {
				require.Equal(t, "stable", row[0], section)
				rows[i+1] = row[1:]
			}
			return rows[1:]
		}
		var problems []string
		within := func(what string, got, want float64) {
			if got < want-2 || got > want+2 {
				problems = append(problems, fmt.Sprintf("%s: %.3f ms, emulated RTT %.0f ms (±2)", what, got, want))
			}
		}
		status := report("pattern-status")
		require.Len(t, status, 16, "2 patterns x 2 transports x 2 families x 2 paths: %v", status)
		for _, row := range status {
			assert.Equal(t, "success="+row[4], row[5], "every test succeeded: %v", row)
		}
		seen := map[string]int{}
		for _, row := range report("pattern-metrics") {
			// pattern, transport, family, path, tests, metric, n, min, p10, p25, median, ...
			if row[5] == "ping_rtt_ms" || row[5] == "up_delay_ms" || row[5] == "down_delay_ms" {
				seen[row[5]]++
				within(strings.Join(row[:6], " ")+" median", f64(t, row[10]), rtt[row[3]])
			}
		}
		assert.Equal(t, map[string]int{"ping_rtt_ms": 8, "up_delay_ms": 8, "down_delay_ms": 8}, seen)
		// The exact ECDF's median (first step at or past 0.5) agrees.
		cdfs := map[string]float64{}
		for _, row := range report("interactive-cdf") {
			k := strings.Join(row[:5], " ")
			if _, done := cdfs[k]; !done && f64(t, row[6]) >= 0.5 {
				cdfs[k] = f64(t, row[5])
				within(k+" ECDF median", cdfs[k], rtt[row[3]])
			}
		}
		assert.Len(t, cdfs, 16, "interactive ECDF per transport x family x path x direction")
		ratios := report("family-ratio")
		n := 0
		for _, row := range ratios {
			// pattern, transport, path, metric, ipv4_n, ipv4_median, ipv6_n, ipv6_median, ratio
			if row[3] != "ping_rtt_ms" {
				continue
			}
			n++
			m4, m6 := f64(t, row[5]), f64(t, row[7])
			within(strings.Join(row[:3], " ")+" IPv4 median", m4, rtt[row[2]])
			within(strings.Join(row[:3], " ")+" IPv6 median", m6, rtt[row[2]])
			assert.InDelta(t, m4/m6, f64(t, row[8]), 0.005, "the ratio of the printed medians (rounded to µs)")
		}
		assert.Equal(t, 4, n, "a ping ratio per transport x path")
		if len(problems) == 0 {
			return
		}
		if attempt == 2 {
			for _, p := range problems {
				t.Error(p)
			}
			return
		}
		t.Logf("attempt 1: %d problems (first: %s); the host may be overloaded, running again", len(problems), problems[0])
		time.Sleep(3 * time.Second)
	}
}

// startTestServer runs the patterns' test server in the lab's Internet
// namespace on port, TCP (MPTCP accepted) and QUIC.
func startTestServer(t *testing.T, l *labtest.Lab, port int) {
	cert, _, err := certs.SelfSigned([]string{lab.Server4.String(), lab.Server6.String()})
	require.NoError(t, err)
	ln, err := l.Lab.ListenTCP(fmt.Sprintf(":%d", port), true)
	require.NoError(t, err)
	pc, err := l.Lab.ListenUDP(fmt.Sprintf(":%d", port))
	require.NoError(t, err)
	srv, err := patterns.NewServer(patterns.ServerConfig{Certificate: cert, Sockets: map[string][]any{"tcp": {ln}, "quic": {pc}},
		Limits: patterns.DefaultLimits()})
	require.NoError(t, err)
	require.NoError(t, srv.Start(context.Background()))
	t.Cleanup(srv.Close)
}
