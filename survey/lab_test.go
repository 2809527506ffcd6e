//go:build linux && !race

package survey_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/lab"
	"github.com/mptester/mptester/lab/labtest"
	"github.com/mptester/mptester/lab/world"
	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/report"
	. "github.com/mptester/mptester/survey"
	"github.com/mptester/mptester/survey/list"
)

// TestLabSurveyMatchesTruth runs the survey in a generated lab world (no
// loss) with every method and compares it with truth.json. Exact, on every
// attempt: resolution counts, overlap, every cell's targets and
// unresponsive counts, the skipped cross-path private addresses, and which
// targets answer; bytes_sent per path within 1% of the emulator's count. RTTs (count 10, the default): every responsive target's
// median within 1 ms of the planted RTT, the errors' p50 <= 0.5 ms and
// p95 <= 1 ms, cell RTT statistics within
// 2 ms, comparisons' mean differences within 1 ms and their a_slower_pct
// within 2 percentage points. The lab's userspace emulator runs late
// when the shared machine is overloaded, so a failed RTT check is logged
// and the survey run once more after a pause; the second attempt must pass.
func TestLabSurveyMatchesTruth(t *testing.T) {
	l := labtest.Start(t, lab.Options{Domains: 150, WorldSeed: 11})
	for _, method := range []string{"tcp-syn", "tcp-connect", "icmp"} {
		if !l.InClient(t) {
			continue
		}
		var truth world.Truth
		l.Truth(t, &truth)
		cfg := labConfig(t, l, &truth, method)
		for attempt := 1; ; attempt++ {
			before := upBytes(t, l)
			got, out := runLab(t, cfg)
			assertCountsMatch(t, truth.Summary, got)
			assertBytesSent(t, method, got, before, upBytes(t, l))
			problems := rttProblems(t, &truth, got, out, method)
			if len(problems) == 0 {
				return
			}
			if attempt == 2 {
				for _, p := range problems {
					t.Error(p)
				}
				return
			}
			t.Logf("%s attempt 1: RTT check failed (%d problems, first: %s); the host may be overloaded, running again in %v", method, len(problems), problems[0], retryPause)
			time.Sleep(retryPause)
		}
	}
}

// retryPause lets a transient disturbance of the shared machine (a CI run
// saw ~10 s of every emulated delay 8-9 ms late) pass before a failed RTT
// check is measured again.
const retryPause = 3 * time.Second

// upBytes is what the lab's emulator received from the client per path:
// the ground truth of the survey's bytes_sent.
func upBytes(t *testing.T, l *labtest.Lab) map[string]uint64 {
	out := map[string]uint64{}
	for _, p := range l.Status(t).Paths {
		out[p.Name] = p.Stats.Up.BytesIn
	}
	return out
}

// assertBytesSent compares the survey's bytes_sent per path (probes, the
// kernel's packets they cause, DNS) with the bytes the emulator received
// on that path during the run: within 1% (measured 0.996-0.999; the rest
// is the kernel's own IPv6 chatter and TCP DNS estimates).
func assertBytesSent(t *testing.T, method string, got Summary, before, after map[string]uint64) {
	t.Helper()
	require.Len(t, got.BytesSent, len(after))
	for path, sent := range got.BytesSent {
		wire := after[path] - before[path]
		t.Logf("%s: %s bytes_sent %d, emulator saw %d (%.3f)", method, path, sent, wire, float64(sent)/float64(wire))
		assert.InDelta(t, float64(wire), float64(sent), 0.01*float64(wire), "%s: bytes_sent of %s against the emulator's count", method, path)
	}
}

func labConfig(t *testing.T, l *labtest.Lab, truth *world.Truth, method string) Config {
	info := l.Config()
	paths := l.Paths(t)
	var use []probe.Path
	for _, n := range truth.Paths {
		p, err := probe.FindPath(paths, n)
		require.NoError(t, err)
		use = append(use, p)
	}
	domains, _, err := list.LoadList(info.Files.Tranco, 0)
	require.NoError(t, err)
	fam := probe.FamilyAny
	switch truth.Family {
	case 4:
		fam = probe.Family4
	case 6:
		fam = probe.Family6
	}
	// 1500/s: at a few hundred probes/s the emulator's sparse-packet
	// wake-ups add ms (docs/benchmarks.md, Survey).
	return Config{Paths: use, Domains: domains, Family: fam, Method: method, Port: 443, Count: 10,
		Timeout: 1500 * time.Millisecond, Spacing: 10 * time.Millisecond, Rate: 1500, Burst: 20,
		Policy:     Policy{Public: info.PublicPrefixes, AllowCrossPrivate: truth.AllowCrossPrivate},
		DNSTimeout: 800 * time.Millisecond, DNSRetries: 1}
}

func runLab(t *testing.T, cfg Config) (Summary, []byte) {
	var out bytes.Buffer
	h, err := report.NewHeader("survey", "lab", cfg.Paths, map[string]any{})
	require.NoError(t, err)
	st, err := report.NewStream(&out, h)
	require.NoError(t, err)
	got, err := Run(context.Background(), cfg, st)
	require.NoError(t, err, cfg.Method)
	return got, out.Bytes()
}

func assertCountsMatch(t *testing.T, want, got Summary) {
	t.Helper()
	require.Len(t, got.Resolution, len(want.Resolution))
	for i := range want.Resolution {
		assert.Equal(t, want.Resolution[i], got.Resolution[i], "resolution of %s", want.Resolution[i].Path)
	}
	assert.Equal(t, want.Overlap, got.Overlap, "overlap")
	require.Len(t, got.Cells, len(want.Cells))
	for i, w := range want.Cells {
		g := got.Cells[i]
		cell := w.ProbePath + "/" + w.ResolvePath
		assert.Equal(t, [2]string{w.ProbePath, w.ResolvePath}, [2]string{g.ProbePath, g.ResolvePath})
		assert.Equal(t, w.Targets, g.Targets, "targets of %s", cell)
		assert.Equal(t, w.Unresponsive, g.Unresponsive, "unresponsive of %s", cell)
		assert.InDelta(t, w.UnresponsivePct, g.UnresponsivePct, 1e-9, cell)
	}
	require.Len(t, got.Comparisons, len(want.Comparisons))
	for i, w := range want.Comparisons {
		g := got.Comparisons[i]
		assert.Equal(t, [3]string{w.A, w.B, w.Route}, [3]string{g.A, g.B, g.Route}, "comparison %d", i)
		assert.Equal(t, w.Domains, g.Domains, "comparison %s vs %s (route %q)", w.A, w.B, w.Route)
	}
	assert.Equal(t, want.Skipped, got.Skipped, "skipped (cross-path private)")
	assert.NotEmpty(t, got.Skipped, "the lab plants cross-path private addresses")
	assert.Empty(t, got.Invalid)
}

// rttProblems checks responsiveness per target (fatal) and returns the
// RTT tolerance violations.
func rttProblems(t *testing.T, truth *world.Truth, got Summary, out []byte, method string) []string {
	t.Helper()
	var problems []string
	var errs []float64
	over := 0
	for _, b := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var p ProbeRecord
		require.NoError(t, json.Unmarshal(b, &p))
		if p.Type != "probe" {
			continue
		}
		rtt, reachable := truth.ExpectedRTTms[p.ProbePath][p.Address]
		if !assert.Equal(t, reachable, p.Responsive, "%s %s from %s", method, p.Address, p.ProbePath) || !reachable {
			continue
		}
		e := math.Abs(p.Median - rtt)
		errs = append(errs, e)
		if e > 1 {
			over++
			problems = append(problems, fmt.Sprintf("%s: median RTT of %s from %s is %.3f ms, truth %.3f ms", method, p.Address, p.ProbePath, p.Median, rtt))
		}
	}
	require.Greater(t, len(errs), 10, "responsive targets checked")
	slices.Sort(errs)
	p50, p95, p99 := errs[len(errs)/2], errs[len(errs)*95/100], errs[len(errs)*99/100]
	t.Logf("%s: %d targets; |median-truth| p50 %.3f ms, p95 %.3f ms, p99 %.3f ms, max %.3f ms; %d over 1 ms",
		method, len(errs), p50, p95, p99, errs[len(errs)-1], over)
	if p50 > 0.5 {
		problems = append(problems, fmt.Sprintf("median absolute RTT error %.3f ms > 0.5 ms", p50))
	}
	if p95 > 1 {
		problems = append(problems, fmt.Sprintf("p95 absolute RTT error %.3f ms > 1 ms", p95))
	}
	for i, w := range truth.Summary.Cells {
		g := got.Cells[i]
		for _, f := range []struct {
			name       string
			want, have float64
		}{{"min", w.RTTms.Min, g.RTTms.Min}, {"p50", w.RTTms.P50, g.RTTms.P50}, {"max", w.RTTms.Max, g.RTTms.Max}, {"mean", w.RTTms.Mean, g.RTTms.Mean}} {
			if math.Abs(f.want-f.have) > 2 {
				problems = append(problems, fmt.Sprintf("cell %s/%s RTT %s %.3f ms, truth %.3f ms", w.ProbePath, w.ResolvePath, f.name, f.have, f.want))
			}
		}
	}
	for i, w := range truth.Summary.Comparisons {
		g := got.Comparisons[i]
		if math.Abs(w.MeanDiffMs-g.MeanDiffMs) > 1 {
			problems = append(problems, fmt.Sprintf("comparison %s vs %s mean diff %.3f ms, truth %.3f ms", w.A, w.B, g.MeanDiffMs, w.MeanDiffMs))
		}
		// Planted RTTs differ by whole ms, so only a target whose median
		// is off by more than SlowerMarginMs moves a domain across the
		// margin: allow 2 percentage points (2 of ~100 domains).
		t.Logf("%s: comparison %s vs %s: %d domains, a_slower_pct %.2f, truth %.2f", method, w.A, w.B, g.Domains, g.ASlowerPct, w.ASlowerPct)
		if math.Abs(w.ASlowerPct-g.ASlowerPct) > 2 {
			problems = append(problems, fmt.Sprintf("comparison %s vs %s a_slower_pct %.2f, truth %.2f", w.A, w.B, g.ASlowerPct, w.ASlowerPct))
		}
	}
	return problems
}

// TestLabResolutionExactUnderAdaptiveWindow resolves a world of 2,000
// domains (1% never answered on both paths: 20 planted timeouts a path)
// over the lab's paths, wlan0 at 20 ms RTT and wwan0 at 0-240 ms (60 ms
// one way, +-60 ms jitter, FIFO: bursts of late answers, the windows cut
// and grow again), with the adaptive window
// capped low (64 a server, so queries wait for slots) and checks against
// truth.json: every domain's status on every path exact; every query that
// ended TIMEOUT had exactly retries+1 attempts the host did not lose (plus
// one for each it may have lost, HostRetries) and took at least retries+1
// timeouts (never declared early) and less than one timeout more than its attempts (a retry
// goes out when its attempt times out: it never waits for a slot); and the
// windows did adapt (grew past their start).
func TestLabResolutionExactUnderAdaptiveWindow(t *testing.T) {
	l := labtest.Start(t, lab.Options{Domains: 2000, WorldSeed: 5})
	if !l.InClient(t) {
		return
	}
	var truth world.Truth
	l.Truth(t, &truth)
	l.Set(t, "wwan0", "delay=60ms", "jitter=60ms")
	cfg := labConfig(t, l, &truth, "icmp")
	cfg.Count, cfg.Rate, cfg.Spacing = 1, 2000, time.Millisecond
	// A truncated answer's TCP exchange (two round trips) fits the timeout.
	cfg.DNSTimeout, cfg.DNSRetries, cfg.ResolverCap = time.Second, 2, 64
	var logs bytes.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	_, out := runLab(t, cfg)

	want := map[[2]string]string{}
	dead := 0
	for _, d := range truth.Domains {
		for p, r := range d.Paths {
			want[[2]string{d.Name, p}] = r.Status
			if r.Status == StatusTimeout {
				dead++
			}
		}
	}
	require.Equal(t, 2*20, dead, "planted timeouts")
	attempts := cfg.DNSRetries + 1
	seen, timeouts, hostRetries, suspect := 0, 0, 0, 0
	for line := range bytes.Lines(out) {
		var rec ResolutionRecord
		require.NoError(t, json.Unmarshal(line, &rec))
		if rec.Type != "resolution" {
			continue
		}
		seen++
		assert.Equal(t, want[[2]string{rec.Domain, rec.Path}], rec.Status, "%s on %s", rec.Domain, rec.Path)
		for _, q := range rec.Queries {
			if q.Status != StatusTimeout {
				continue
			}
			timeouts++
			// An attempt the host may have lost is not counted: one more.
			n := attempts + q.HostRetries
			hostRetries += q.HostRetries
			if q.HostSuspect {
				suspect++ // more host losses than attempts it may add: a loaded machine, not a wrong status
			}
			assert.Equal(t, n, q.Attempts, "%s %s on %s: attempts", rec.Domain, q.QType, rec.Path)
			assert.GreaterOrEqual(t, q.TimeMs, float64(attempts)*float64(cfg.DNSTimeout.Milliseconds()), "%s %s on %s: TIMEOUT declared early", rec.Domain, q.QType, rec.Path)
			assert.Less(t, q.TimeMs, float64(n+1)*float64(cfg.DNSTimeout.Milliseconds()), "%s %s on %s: a retry waited", rec.Domain, q.QType, rec.Path)
		}
	}
	assert.Equal(t, len(want), seen, "a record per domain and path")
	assert.Equal(t, 2*dead, timeouts, "A and AAAA of every planted timeout, nothing else")
	t.Logf("%d attempts of planted timeouts added for host losses; %d TIMEOUTs host-suspect", hostRetries, suspect)
	peaks := regexp.MustCompile(`msg="resolver load" path=(\S+) server=(\S+) peak_window=(\d+)`).FindAllStringSubmatch(logs.String(), -1)
	require.Len(t, peaks, 4, "two servers a path: %s", logs.String())
	for _, m := range peaks {
		w, _ := strconv.Atoi(m[3])
		assert.Greater(t, w, 32, "the window of %s on %s grew", m[2], m[1])
		assert.LessOrEqual(t, w, cfg.ResolverCap, "the window of %s on %s stayed under the cap", m[2], m[1])
	}
}
