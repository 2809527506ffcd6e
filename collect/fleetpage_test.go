package collect_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/store"
)

const nanoUTC = "2006-01-02T15:04:05.000000000Z"

// fleetTruth is what a day's raw uploads hold, computed from them.
type fleetTruth struct {
	runs, tests, ok, targets, responsive int
	probes                               map[string]bool
	rtts, targetRTTs                     []float64
}

// genFleetRun is a run's raw upload (JSON Lines, the fixture's header)
// with planted figures: ping tests (some failing) or survey targets (some
// silent, some invalid or host-overloaded, some in two cells); it adds
// them to truth as the fleet views define them.
func genFleetRun(t testing.TB, rng *rand.Rand, id, probe, command string, start time.Time, truth *fleetTruth) []byte {
	hdr, _, _ := strings.Cut(string(stream(t, id, probe)), "\n")
	hdr = strings.Replace(hdr, `"command":"survey"`, `"command":"`+command+`"`, 1)
	hdr = strings.Replace(hdr, `"2026-11-22T10:00:00.500000000Z"`, `"`+start.UTC().Format(nanoUTC)+`"`, 1)
	var b strings.Builder
	b.WriteString(hdr + "\n")
	truth.runs++
	truth.probes[probe] = true
	n := 0
	line := func(v map[string]any) {
		j, err := json.Marshal(v)
		require.NoError(t, err)
		b.Write(append(j, '\n'))
		n++
	}
	if command == "survey" {
		for i := range 30 + rng.IntN(20) {
			valid, over, resp := rng.IntN(15) != 0, rng.IntN(20) == 0, rng.IntN(4) != 0
			rps := []string{"wlan0"}
			if i%3 == 0 {
				rps = append(rps, "wwan0")
			}
			var rtts []float64
			if resp {
				for range 3 {
					rtts = append(rtts, float64(int(10+rng.Float64()*90*1000))/1000)
				}
			}
			line(map[string]any{"type": "probe", "probe_path": "wlan0", "resolve_path": "wlan0", "resolve_paths": rps,
				"address": fmt.Sprintf("198.18.0.%d", i+1), "rtts_ms": rtts, "responsive": resp, "valid": valid, "host_overloaded": over})
			if !valid || over {
				continue
			}
			truth.targets++
			if resp {
				truth.responsive++
				s := slices.Clone(rtts)
				sort.Float64s(s)
				for range rps { // a target counts in each of its cells
					truth.targetRTTs = append(truth.targetRTTs, s[1])
				}
			}
		}
	} else {
		for i := range 4 + rng.IntN(4) {
			truth.tests++
			if rng.IntN(4) == 0 {
				line(map[string]any{"type": "pattern_test", "index": i, "status": "connection-timeout",
					"config": map[string]any{"pattern": "ping", "transport": "tcp", "path": "wlan0", "family": 4}})
				continue
			}
			truth.ok++
			d := make([]int64, 5+rng.IntN(10))
			for j := range d {
				d[j] = int64(5e6 + rng.IntN(80e6))
				truth.rtts = append(truth.rtts, float64(d[j])/1e6)
			}
			line(map[string]any{"type": "pattern_test", "index": i, "status": "success", "result": map[string]any{"delays_ns": d},
				"config": map[string]any{"pattern": "ping", "transport": []string{"tcp", "mptcp"}[i%2], "path": "wlan0", "family": 4}})
		}
	}
	fmt.Fprintf(&b, `{"type":"trailer","run_id":"%s","status":"ok","records":%d,"finished_at":"%s"}`+"\n",
		id, n, start.Add(time.Minute).UTC().Format(nanoUTC))
	return []byte(b.String())
}

// tableRows are the cells of the HTML table with id t-name (tags out).
func tableRows(t *testing.T, page, name string) [][]string {
	t.Helper()
	i := strings.Index(page, `id="t-`+name+`"`)
	require.GreaterOrEqual(t, i, 0, "table %s on the page", name)
	body := page[i:]
	body = body[strings.Index(body, "<tbody>"):strings.Index(body, "</tbody>")]
	tag := regexp.MustCompile(`<[^>]+>`)
	var rows [][]string
	for _, tr := range regexp.MustCompile(`(?s)<tr>(.*?)</tr>`).FindAllStringSubmatch(body, -1) {
		var cells []string
		for _, td := range regexp.MustCompile(`(?s)<td>(.*?)</td>`).FindAllStringSubmatch(tr[1], -1) {
			cells = append(cells, html.UnescapeString(tag.ReplaceAllString(td[1], "")))
		}
		rows = append(rows, cells)
	}
	return rows
}

// withinSketch: est is within store.SketchRelErr of the sample at rank
// ⌊q(n−1)⌋ of vs.
func withinSketch(t *testing.T, est string, vs []float64, q float64, what string) {
	t.Helper()
	s := slices.Clone(vs)
	sort.Float64s(s)
	exact := s[int(q*float64(len(s)-1))]
	got, err := strconv.ParseFloat(est, 64)
	require.NoError(t, err, what)
	assert.LessOrEqual(t, math.Abs(got-exact), store.SketchRelErr*exact+0.0005, "%s: %g, exact %g", what, got, exact)
}

// TestFleetPageFromRollups: the fleet page over a window shows, per day,
// the runs, tests, reachable share, survey targets and responsive share
// of that window's raw uploads exactly, and their RTT medians within the
// sketches' stated error; it reads no raw upload (they are deleted
// before it loads) and its drill-down links are bounded to their window.
func TestFleetPageFromRollups(t *testing.T) {
	e := newEnvWith(t, func(c *collect.Config) { c.InlineMax = -1 }) // every upload a raw file
	ctx := context.Background()
	tok2 := collect.NewToken()
	require.NoError(t, e.st.AddProbe(ctx, "pi2", collect.HashToken(tok2), time.Now()))
	toks := map[string]string{"pi1": e.probeTok, "pi2": tok2}
	rng := rand.New(rand.NewPCG(49, 1))
	day0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	truth := map[string]*fleetTruth{}
	for d := range 4 { // day 3 is outside the window asked for
		day := day0.Add(time.Duration(d) * store.Day)
		tr := &fleetTruth{probes: map[string]bool{}}
		truth[day.Format(time.DateOnly)] = tr
		for _, p := range []string{"pi1", "pi2"} {
			for r := range 3 {
				id := uuid.NewString()
				start := day.Add(time.Duration(2+r*9)*time.Hour + time.Duration(rng.IntN(3600))*time.Second)
				a := e.put(t, id, genFleetRun(t, rng, id, p, "run", start, tr), toks[p], "")
				require.Equal(t, http.StatusCreated, a.code, "%s", a.body)
			}
			if d != 1 {
				id := uuid.NewString()
				start := day.Add(23*time.Hour + 59*time.Minute) // the day's last minute
				require.Equal(t, http.StatusCreated, e.put(t, id, genFleetRun(t, rng, id, p, "survey", start, tr), toks[p], "").code)
			}
		}
	}
	require.Eventually(t, func() bool {
		u, err := e.st.ListUnderived(ctx, 0)
		return err == nil && len(u) == 0
	}, 30*time.Second, 50*time.Millisecond, "the deriver rolls every run up")
	// The fleet views never read a raw upload: there are none left.
	removed := 0
	require.NoError(t, filepath.WalkDir(e.data, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			removed++
			return os.Remove(p)
		}
		return err
	}))
	require.GreaterOrEqual(t, removed, 30, "the raw uploads were files")

	a := e.page(t, "/?since=2026-11-01&until=2026-11-04")
	require.Equal(t, http.StatusOK, a.code, "%s", a.body)
	page := string(a.body)
	rows := tableRows(t, page, "fleet-buckets")
	require.Len(t, rows, 3, "the window's three days")
	cols := []string{"day", "probes", "runs", "by_status", "tests", "reachable_pct", "invalid", "ping_rtt_p50_ms", "ping_rtt_p90_ms",
		"survey_targets", "responsive_pct", "target_rtt_p50_ms", "target_rtt_p90_ms"}
	for _, r := range rows {
		require.Len(t, r, len(cols))
		tr := truth[r[0]]
		require.NotNil(t, tr, "day %s", r[0])
		cell := func(c string) string { return r[slices.Index(cols, c)] }
		assert.Equal(t, strconv.Itoa(len(tr.probes)), cell("probes"), r[0])
		assert.Equal(t, strconv.Itoa(tr.runs), cell("runs"), r[0])
		assert.Equal(t, fmt.Sprintf("ok=%d", tr.runs), cell("by_status"), r[0])
		assert.Equal(t, strconv.Itoa(tr.tests), cell("tests"), r[0])
		assert.Equal(t, fmt.Sprintf("%.2f", 100*float64(tr.ok)/float64(tr.tests)), cell("reachable_pct"), r[0])
		withinSketch(t, cell("ping_rtt_p50_ms"), tr.rtts, 0.5, r[0]+" ping p50")
		withinSketch(t, cell("ping_rtt_p90_ms"), tr.rtts, 0.9, r[0]+" ping p90")
		if tr.targets == 0 {
			assert.Equal(t, "0", cell("survey_targets"), r[0])
			continue
		}
		assert.Equal(t, strconv.Itoa(tr.targets), cell("survey_targets"), r[0])
		assert.Equal(t, fmt.Sprintf("%.2f", 100*float64(tr.responsive)/float64(tr.targets)), cell("responsive_pct"), r[0])
		withinSketch(t, cell("target_rtt_p50_ms"), tr.targetRTTs, 0.5, r[0]+" target p50")
	}
	assert.Contains(t, page, "within 1% of the sample value at their rank", "the page states the quantiles' error")
	// Drill-down: each day links to its own exact report, one day long.
	assert.Contains(t, page, `href="/v1/report?since=2026-11-01T00%3A00%3A00Z&amp;until=2026-11-02T00%3A00%3A00Z"`)
	assert.Contains(t, page, `href="/v1/report?probe=pi2&amp;since=2026-11-01T00%3A00%3A00Z&amp;until=2026-11-04T00%3A00%3A00Z"`)
	probes := tableRows(t, page, "fleet-probe-window")
	require.Len(t, probes, 2)

	// A window the roll-ups do not cover is empty, not an error; a bad
	// bound is refused naming it.
	a = e.page(t, "/?since=2020-01-01&until=2020-01-08")
	require.Equal(t, http.StatusOK, a.code)
	a = e.page(t, "/?since=yesterday")
	assert.Equal(t, http.StatusBadRequest, a.code)
	assert.Contains(t, string(a.body), "since")
}

// TestReindexRebuildsRollups: `collect reindex` (ReindexAll) rebuilds the
// roll-ups from the raw uploads: a row no run makes (a changed
// definition, or a bad write) is gone, the runs' rows are as the deriver
// made them.
func TestReindexRebuildsRollups(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(49, 2))
	tr := &fleetTruth{probes: map[string]bool{}}
	for i := range 4 {
		id, cmd := uuid.NewString(), []string{"run", "survey"}[i%2]
		a := e.put(t, id, genFleetRun(t, rng, id, "pi1", cmd, time.Date(2026, 11, 2, i, 0, 0, 0, time.UTC), tr), e.probeTok, "")
		require.Equal(t, http.StatusCreated, a.code, "%s", a.body)
	}
	require.Eventually(t, func() bool {
		u, err := e.st.ListUnderived(ctx, 0)
		return err == nil && len(u) == 0
	}, 30*time.Second, 50*time.Millisecond)
	read := func() map[store.RollupKey]store.Rollup {
		m := map[store.RollupKey]store.Rollup{}
		require.NoError(t, e.st.Rollups(ctx, store.RollupFilter{}, func(r store.Rollup) error { m[r.RollupKey] = r; return nil }))
		return m
	}
	want := read()
	require.NotEmpty(t, want)
	stray := store.Rollup{RollupKey: store.RollupKey{Probe: "pi1", Width: store.Day, Bucket: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC),
		Command: "run", Cell: "wlan0", Transport: "tcp", Pattern: "ping"}, Runs: 5, Tests: 7}
	require.NoError(t, e.st.AddRollups(ctx, []store.Rollup{stray, {RollupKey: store.RollupKey{Probe: "gone", Width: store.Day,
		Bucket: stray.Bucket, Command: "run", Cell: store.RunCell, Pattern: "ok"}, Runs: 1}}))
	require.NotEqual(t, want, read())
	n, err := e.srv.ReindexAll(ctx)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	assert.Equal(t, want, read(), "rebuilt from the raw uploads alone")
}
