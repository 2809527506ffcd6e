package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect/store"
)

// rollupFleet is a small fleet with planted figures: 3 probes, pattern
// runs (ping, bulk, interactive, iperf; some failed, some invalid) and
// surveys (two cells each, overloaded and invalid targets left out) over
// three days, plus one run started now (hour rows).
type rollupFleet struct {
	runs []store.Run
	der  map[string]store.Derived
}

func newRollupFleet(now time.Time) rollupFleet {
	rnd := rand.New(rand.NewPCG(7, 49))
	day0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	f := rollupFleet{der: map[string]store.Derived{}}
	i64 := func(v int64) *int64 { return &v }
	f64 := func(v float64) *float64 { return &v }
	n := 0
	add := func(probe, command string, start time.Time, d store.Derived) {
		n++
		id := fmt.Sprintf("roll-%03d", n)
		status := "ok"
		if n%5 == 0 {
			status = "partial"
		}
		f.runs = append(f.runs, store.Run{RunID: id, ProbeID: probe, Command: command, SchemaVersion: "1.0", Status: status, Parsed: true,
			StartedAt: start, FinishedAt: start.Add(time.Minute), SHA256: id, RawPath: "raw/" + id, ContentType: "application/x-ndjson", StoredAt: start})
		f.der[id] = d
	}
	pattern := func() store.Derived {
		var d store.Derived
		idx := int64(0)
		test := func(pat, tr, path string, res *store.TestResult) {
			st := "success"
			if rnd.IntN(10) == 0 {
				st = "timeout"
			}
			d.Tests = append(d.Tests, store.PatternTest{Index: idx, Pattern: pat, Transport: tr, Path: path, Status: st,
				Invalid: rnd.IntN(8) == 0, PathBytes: []store.PathBytes{}, Result: res})
			idx++
		}
		for _, tr := range []string{"tcp", "mptcp"} {
			for _, path := range []string{"wlan0", "wwan0"} {
				var ds []int64
				for range 5 + rnd.IntN(10) {
					ds = append(ds, int64((5+100*rnd.Float64())*1e6))
				}
				test("ping", tr, path, &store.TestResult{Delays: ds})
				test("bulk", tr, path, &store.TestResult{Completion: i64(int64((300 + 900*rnd.Float64()) * 1e6)), Goodput: f64(1e6 + 5e7*rnd.Float64())})
			}
			dir := func() *store.TestDirection {
				var ds []int64
				for range 20 {
					ds = append(ds, int64(rnd.Float64()*80e6)) // some near zero
				}
				ds = append(ds, 0)
				return &store.TestDirection{Delays: ds, Max: i64(slices.Max(ds)), GoodputBps: f64(1e5 + 1e8*rnd.Float64())}
			}
			test("interactive", tr, "wlan0", &store.TestResult{Upload: dir(), Download: dir()})
		}
		test("ping", "quic", "wlan0", nil) // no result
		return d
	}
	survey := func() store.Derived {
		var d store.Derived
		for a := range 40 {
			for _, pp := range []string{"wlan0", "wwan0"} {
				p := store.SurveyProbe{ProbePath: pp, ResolvePath: "wlan0", Address: fmt.Sprintf("198.18.0.%d", a), Method: "tcp-syn",
					Valid: rnd.IntN(20) != 0, HostOverloaded: rnd.IntN(25) == 0, Responsive: rnd.IntN(6) != 0}
				if a%2 == 0 {
					p.ResolvePaths = []string{"wlan0", "wwan0"}
				}
				if p.Responsive {
					if a%5 == 0 {
						p.Median = 10 + 50*rnd.Float64()
					} else {
						for range 1 + rnd.IntN(3) {
							p.RTTsMs = append(p.RTTsMs, 10+200*rnd.Float64())
						}
					}
				}
				d.Probes = append(d.Probes, p)
			}
		}
		return d
	}
	for day := range 3 {
		for p := range 3 {
			probe := fmt.Sprintf("pi%d", p)
			for r := range 3 {
				add(probe, "run", day0.Add(time.Duration(day)*24*time.Hour+time.Duration(r*7+p)*time.Hour), pattern())
			}
			if day != 1 {
				add(probe, "survey", day0.Add(time.Duration(day)*24*time.Hour+23*time.Hour+59*time.Minute), survey())
			}
		}
	}
	add("pi0", "run", now.Add(-time.Hour), pattern())
	return f
}

// store enrols the fleet's probes and stores its runs (not derived).
func (f rollupFleet) store(t *testing.T, s store.Store) {
	ctx := context.Background()
	for _, p := range []string{"pi0", "pi1", "pi2"} {
		require.NoError(t, s.AddProbe(ctx, p, "h"+p, f.runs[0].StartedAt))
	}
	for _, r := range f.runs {
		_, _, err := s.PutRun(ctx, r, store.Report{})
		require.NoError(t, err)
	}
}

// rollupWant is the suite's own recomputation from the derived rows: the
// counts, and every figure's values, per row key.
type rollupWant struct {
	runs, tests, ok, invalid int64
	values                   map[string][]float64
}

func expectRollups(f rollupFleet, now time.Time) map[store.RollupKey]*rollupWant {
	want := map[store.RollupKey]*rollupWant{}
	for _, r := range f.runs {
		widths := []time.Duration{store.Day}
		if now.Sub(r.StartedAt) < store.HourRetention {
			widths = append(widths, store.Hour)
		}
		for _, w := range widths {
			touched := map[store.RollupKey]bool{}
			get := func(cell, tr, pat string) *rollupWant {
				k := store.RollupKey{Probe: r.ProbeID, Width: w, Bucket: r.StartedAt.UTC().Truncate(w), Command: r.Command, Cell: cell, Transport: tr, Pattern: pat}
				g := want[k]
				if g == nil {
					g = &rollupWant{values: map[string][]float64{}}
					want[k] = g
				}
				if !touched[k] {
					touched[k] = true
					g.runs++
				}
				return g
			}
			d := f.der[r.RunID]
			run := get(store.RunCell, "", r.Status)
			for _, p := range d.Probes {
				if !p.Valid || p.HostOverloaded {
					continue
				}
				run.tests++
				if p.Responsive {
					run.ok++
				}
				rps := p.ResolvePaths
				if len(rps) == 0 {
					rps = []string{p.ResolvePath}
				}
				for _, rp := range rps {
					g := get(p.ProbePath+"/"+rp, "", "")
					g.tests++
					if p.Responsive {
						g.ok++
						v := p.Median
						if len(p.RTTsMs) > 0 {
							s := slices.Clone(p.RTTsMs)
							sort.Float64s(s)
							v = s[len(s)/2]
							if len(s)%2 == 0 {
								v = (s[len(s)/2-1] + s[len(s)/2]) / 2
							}
						}
						g.values[store.MetricRTT] = append(g.values[store.MetricRTT], v)
					}
				}
			}
			for _, t := range d.Tests {
				g := get(t.Path, t.Transport, t.Pattern)
				g.tests++
				run.tests++
				if t.Invalid {
					g.invalid++
					run.invalid++
				}
				if t.Status != "success" {
					continue
				}
				g.ok++
				run.ok++
				if t.Result == nil {
					continue
				}
				for _, v := range t.Result.Delays {
					g.values[store.MetricRTT] = append(g.values[store.MetricRTT], float64(v)/1e6)
				}
				if t.Result.Completion != nil {
					g.values[store.MetricCompletion] = append(g.values[store.MetricCompletion], float64(*t.Result.Completion)/1e6)
				}
				if t.Result.Goodput != nil {
					g.values[store.MetricGoodput] = append(g.values[store.MetricGoodput], *t.Result.Goodput/1e6)
				}
				for dir, dd := range map[string]*store.TestDirection{"up": t.Result.Upload, "down": t.Result.Download} {
					if dd == nil {
						continue
					}
					for _, v := range dd.Delays {
						g.values[dir+"_delay_ms"] = append(g.values[dir+"_delay_ms"], float64(v)/1e6)
					}
					g.values[dir+"_max_delay_ms"] = append(g.values[dir+"_max_delay_ms"], float64(*dd.Max)/1e6)
					g.values[dir+"_goodput_mbps"] = append(g.values[dir+"_goodput_mbps"], *dd.GoodputBps/1e6)
				}
			}
		}
	}
	return want
}

func readRollups(t *testing.T, s store.Store, f store.RollupFilter) map[store.RollupKey]store.Rollup {
	got := map[store.RollupKey]store.Rollup{}
	require.NoError(t, s.Rollups(context.Background(), f, func(r store.Rollup) error {
		if _, dup := got[r.RollupKey]; dup {
			return fmt.Errorf("row %v twice", r.RollupKey)
		}
		got[r.RollupKey] = r
		return nil
	}))
	return got
}

// checkRollups: exact counts, and each sketch's N exact and its
// quantiles within store.SketchRelErr of the sample at their rank.
func checkRollups(t *testing.T, want map[store.RollupKey]*rollupWant, got map[store.RollupKey]store.Rollup, width time.Duration) {
	t.Helper()
	n := 0
	for k, w := range want {
		if k.Width != width {
			continue
		}
		n++
		g, ok := got[k]
		if !assert.True(t, ok, "row %+v missing", k) {
			continue
		}
		assert.Equal(t, [4]int64{w.runs, w.tests, w.ok, w.invalid}, [4]int64{g.Runs, g.Tests, g.OK, g.Invalid}, "runs, tests, ok, invalid of %+v", k)
		assert.Len(t, g.Sketches, len(w.values), "figures of %+v", k)
		for m, vs := range w.values {
			sk := g.Sketches[m]
			if !assert.NotNil(t, sk, "%s of %+v", m, k) {
				continue
			}
			assert.Equal(t, int64(len(vs)), sk.N, "%s of %+v", m, k)
			sort.Float64s(vs)
			for _, q := range []float64{0, 0.1, 0.5, 0.9, 0.99, 1} {
				exact := vs[int(q*float64(len(vs)-1))]
				est := sk.Quantile(q)
				assert.LessOrEqual(t, math.Abs(est-exact), store.SketchRelErr*exact+1e-9, "%s q%.2f of %+v: %g, exact %g", m, q, k, est, exact)
			}
		}
	}
	assert.Len(t, got, n, "no rows beyond the recomputation's")
}

func runRollups(t *testing.T, s store.Store) {
	ctx := context.Background()
	defer s.Close()
	now := time.Now().UTC()
	f := newRollupFleet(now)
	f.store(t, s)
	// Derived concurrently (replicas on PostgreSQL): rows of one
	// probe-day are shared by many runs.
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i, r := range f.runs {
				if i%4 == w {
					assert.NoError(t, s.PutDerived(ctx, r.RunID, f.der[r.RunID]))
				}
			}
		})
	}
	wg.Wait()
	want := expectRollups(f, now)
	checkRollups(t, want, readRollups(t, s, store.RollupFilter{}), store.Day)
	checkRollups(t, want, readRollups(t, s, store.RollupFilter{Width: store.Hour}), store.Hour)
	under, err := s.ListUnderived(ctx, 0)
	require.NoError(t, err)
	assert.Empty(t, under, "every run rolled up")

	// Deriving a run again adds nothing twice.
	r0 := f.runs[0]
	require.NoError(t, s.PutDerived(ctx, r0.RunID, f.der[r0.RunID]))
	checkRollups(t, want, readRollups(t, s, store.RollupFilter{}), store.Day)

	// A window and a probe choose their rows only.
	day1 := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	got := readRollups(t, s, store.RollupFilter{Probe: "pi1", Since: day1, Until: day1.Add(store.Day)})
	require.NotEmpty(t, got)
	for k := range got {
		assert.Equal(t, "pi1", k.Probe)
		assert.Equal(t, day1, k.Bucket)
	}

	// Reset, then derive again: the same roll-ups; until then the runs
	// are listed for the catch-up.
	require.NoError(t, s.ResetRollups(ctx))
	assert.Empty(t, readRollups(t, s, store.RollupFilter{}))
	under, err = s.ListUnderived(ctx, 0)
	require.NoError(t, err)
	assert.Len(t, under, len(f.runs), "after a reset every run waits to be rolled up")
	for _, r := range f.runs {
		require.NoError(t, s.PutDerived(ctx, r.RunID, f.der[r.RunID]))
	}
	checkRollups(t, want, readRollups(t, s, store.RollupFilter{}), store.Day)

	// The store's rows are store.RollupsOf's, exactly (sketches too), as
	// AddRollups writes them.
	before := readRollups(t, s, store.RollupFilter{})
	var direct []store.Rollup
	for _, r := range f.runs {
		direct = append(direct, store.RollupsOf(r.ProbeID, r.Command, r.Status, r.StartedAt, now.Sub(r.StartedAt) < store.HourRetention, f.der[r.RunID])...)
	}
	require.NoError(t, s.ResetRollups(ctx))
	require.NoError(t, s.AddRollups(ctx, direct))
	assert.Equal(t, before, readRollups(t, s, store.RollupFilter{}))

	// Writers at once on one existing row lose no update (replicas on
	// PostgreSQL lock it).
	var key store.RollupKey
	for _, r := range direct {
		if before[r.RollupKey].Sketches[store.MetricRTT] != nil {
			key = r.RollupKey
			break
		}
	}
	one := store.Rollup{RollupKey: key, Runs: 1, Tests: 1}
	one.Sketch(store.MetricRTT).Add(5)
	var wg2 sync.WaitGroup
	for range 8 {
		wg2.Go(func() {
			for range 15 {
				assert.NoError(t, s.AddRollups(ctx, []store.Rollup{one}))
			}
		})
	}
	wg2.Wait()
	after := readRollups(t, s, store.RollupFilter{})[key]
	assert.Equal(t, before[key].Tests+120, after.Tests, "concurrent additions")
	assert.Equal(t, before[key].Sketches[store.MetricRTT].N+120, after.Sketches[store.MetricRTT].N)

	require.NoError(t, s.PruneRollups(ctx, now))
	assert.Empty(t, readRollups(t, s, store.RollupFilter{Width: store.Hour}), "hour rows pruned")
	assert.NotEmpty(t, readRollups(t, s, store.RollupFilter{Width: store.Day}), "day rows kept")
}

// runRollupsQuarantine: a quarantined run leaves the roll-ups. Its probe's
// other runs of its day, and only those, wait to be rolled up again; once
// the catch-up has derived them, every day and hour row equals the
// suite's recomputation over the fleet without the run (other probes'
// rows of that day and the probe's other days untouched). Quarantined
// again, nothing is listed anew.
func runRollupsQuarantine(t *testing.T, s store.Store) {
	ctx := context.Background()
	defer s.Close()
	now := time.Now().UTC()
	f := newRollupFleet(now)
	f.store(t, s)
	for _, r := range f.runs {
		require.NoError(t, s.PutDerived(ctx, r.RunID, f.der[r.RunID]))
	}
	// pi1's first run of the first day (three more of pi1 that day: two
	// runs and a survey), and the recent run (hour rows; alone in its day).
	day0 := f.runs[0].StartedAt.UTC().Truncate(store.Day)
	var victims []string
	wantListed := map[string]bool{}
	for _, r := range f.runs {
		if r.ProbeID == "pi1" && r.StartedAt.UTC().Truncate(store.Day).Equal(day0) {
			if len(victims) == 0 {
				victims = append(victims, r.RunID)
			} else {
				wantListed[r.RunID] = true
			}
		}
	}
	recent := f.runs[len(f.runs)-1]
	require.Less(t, now.Sub(recent.StartedAt), store.HourRetention)
	victims = append(victims, recent.RunID)
	require.Len(t, wantListed, 3)
	for _, id := range victims {
		require.NoError(t, s.Quarantine(ctx, id, "test", now))
	}
	listed := func() map[string]bool {
		under, err := s.ListUnderived(ctx, 0)
		require.NoError(t, err)
		got := map[string]bool{}
		for _, r := range under {
			got[r.RunID] = true
		}
		return got
	}
	assert.Equal(t, wantListed, listed(), "the probe's other runs of the day wait to be rolled up again")
	for id := range wantListed { // the catch-up
		require.NoError(t, s.PutDerived(ctx, id, f.der[id]))
	}
	kept := rollupFleet{der: f.der}
	for _, r := range f.runs {
		if !slices.Contains(victims, r.RunID) {
			kept.runs = append(kept.runs, r)
		}
	}
	want := expectRollups(kept, now)
	for _, w := range []time.Duration{store.Day, store.Hour} {
		got := readRollups(t, s, store.RollupFilter{Width: w})
		checkRollups(t, want, got, w)
		n := 0
		for k := range want {
			if k.Width == w {
				n++
			}
		}
		assert.Len(t, got, n, "no row left of the quarantined runs alone (width %s)", w)
	}
	require.NoError(t, s.Quarantine(ctx, victims[0], "again", now))
	assert.Empty(t, listed(), "quarantined again: nothing to roll up anew")
}

// runRollupsBatched derives the fleet in batches (store.DerivedBatcher,
// as the collector's deriver does), two at once, each batch holding some
// run twice and several recent runs of one probe-hour: every run's rows
// and every roll-up row must equal the per-run recomputation.
func runRollupsBatched(t *testing.T, s store.Store) {
	ctx := context.Background()
	defer s.Close()
	b, ok := s.(store.DerivedBatcher)
	require.True(t, ok, "the SQL store derives in batches")
	now := time.Now().UTC()
	f := newRollupFleet(now)
	// Recent runs of one probe-hour: their day and hour rows are folded
	// within a batch.
	last := f.runs[len(f.runs)-1]
	for i := range 3 {
		r := last
		r.RunID, r.SHA256 = fmt.Sprintf("%s-again%d", last.RunID, i), fmt.Sprintf("%s-again%d", last.SHA256, i)
		f.runs = append(f.runs, r)
		f.der[r.RunID] = f.der[last.RunID]
	}
	f.store(t, s)
	fill := func(id string) store.DerivedRun { return store.DerivedRun{RunID: id, Fill: f.der[id].Fill} }
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			var batch []store.DerivedRun
			for i := len(f.runs) - 1; i >= 0; i-- { // newest first: the recent runs share a batch
				if i%2 != w {
					continue
				}
				batch = append(batch, fill(f.runs[i].RunID))
				if len(batch) == 5 {
					batch = append(batch, batch[0]) // queued twice
					assert.NoError(t, b.PutDerivedRuns(ctx, batch))
					batch = nil
				}
			}
			if len(batch) > 0 {
				assert.NoError(t, b.PutDerivedRuns(ctx, batch))
			}
		})
	}
	wg.Wait()
	want := expectRollups(f, now)
	checkRollups(t, want, readRollups(t, s, store.RollupFilter{}), store.Day)
	checkRollups(t, want, readRollups(t, s, store.RollupFilter{Width: store.Hour}), store.Hour)
	for _, r := range f.runs {
		got, err := s.GetDerived(ctx, r.RunID)
		require.NoError(t, err)
		assert.Equal(t, normDerived(f.der[r.RunID].Stored()), normDerived(got), "rows of %s", r.RunID)
	}
	under, err := s.ListUnderived(ctx, 0)
	require.NoError(t, err)
	assert.Empty(t, under, "every run rolled up")

	// A batch with a run that cannot be derived stores nothing of it.
	bad := errors.New("planted")
	err = b.PutDerivedRuns(ctx, []store.DerivedRun{fill(f.runs[0].RunID), {RunID: f.runs[1].RunID, Fill: func(store.DerivedSink) error { return bad }}})
	require.ErrorIs(t, err, bad)
	checkRollups(t, want, readRollups(t, s, store.RollupFilter{}), store.Day)
}

// normDerived is d with empty lists as nil (GetDerived reads no rows as nil).
func normDerived(d store.Derived) store.Derived {
	if len(d.Cells) == 0 {
		d.Cells = nil
	}
	if len(d.Probes) == 0 {
		d.Probes = nil
	}
	if len(d.Tests) == 0 {
		d.Tests = nil
	}
	if len(d.Mobile) == 0 {
		d.Mobile = nil
	}
	return d
}
