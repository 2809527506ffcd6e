package collect_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/pgtest"
)

func benchEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// fleetYearDay is one probe's day as the fleet-month benchmark's runs
// make it (internal/cmd/report): 4 pattern runs (ping over 3 transports x
// 2 families with 10 delays, bulk over 3, interactive over MPTCP with 600
// delays each way) and, every 7th day, a survey of `targets` targets over
// two paths; as roll-up rows (store.RollupsOf, as the deriver makes them).
func fleetYearDay(rng *rand.Rand, probe string, day time.Time, d, targets int) []store.Rollup {
	i64 := func(v int64) *int64 { return &v }
	f64 := func(v float64) *float64 { return &v }
	delays := func(k int, base float64) []int64 {
		out := make([]int64, k)
		for i := range out {
			out[i] = int64((base + base*rng.Float64()) * 1e6)
		}
		return out
	}
	var rows []store.Rollup
	for r := range 4 {
		var der store.Derived
		idx := int64(0)
		for _, tr := range []string{"tcp", "quic", "mptcp"} {
			for range 2 {
				der.Tests = append(der.Tests, store.PatternTest{Index: idx, Pattern: "ping", Transport: tr, Path: "wlan0", Status: "success",
					Result: &store.TestResult{Delays: delays(10, 20)}})
				idx++
			}
			der.Tests = append(der.Tests, store.PatternTest{Index: idx, Pattern: "bulk", Transport: tr, Path: "wlan0", Status: "success",
				Result: &store.TestResult{Completion: i64(int64((500 + 500*rng.Float64()) * 1e6)), Goodput: f64(1e7 + 1e7*rng.Float64())}})
			idx++
		}
		der.Tests = append(der.Tests, store.PatternTest{Index: idx, Pattern: "interactive", Transport: "mptcp", Path: "wlan0", Status: "success",
			Result: &store.TestResult{Upload: &store.TestDirection{Delays: delays(600, 15), Max: i64(90e6)}, Download: &store.TestDirection{Delays: delays(600, 15), Max: i64(90e6)}}})
		rows = append(rows, store.RollupsOf(probe, "run", "ok", day.Add(time.Duration(r*6)*time.Hour), false, der)...)
	}
	if d%7 == 0 {
		var der store.Derived
		for a := range targets {
			for _, pp := range []string{"wlan0", "wwan0"} {
				p := store.SurveyProbe{ProbePath: pp, ResolvePath: []string{"wlan0", "wwan0"}[a%2], Valid: true, Responsive: rng.Float64() > 0.05}
				if p.Responsive {
					p.Median = 10 + 90*rng.Float64()
				}
				der.Probes = append(der.Probes, p)
			}
		}
		rows = append(rows, store.RollupsOf(probe, "survey", "ok", day.Add(3*time.Hour), false, der)...)
	}
	// One row per key for the day, as the store holds it.
	merged := map[store.RollupKey]*store.Rollup{}
	var out []store.Rollup
	for i := range rows {
		if m := merged[rows[i].RollupKey]; m != nil {
			m.Merge(&rows[i])
			continue
		}
		merged[rows[i].RollupKey] = &rows[i]
	}
	for _, r := range merged {
		out = append(out, *r)
	}
	return out
}

// rssMB is the process's resident set and its peak, in MB (Linux).
func rssMB() (cur, peak float64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 {
			v, _ := strconv.ParseFloat(f[1], 64)
			switch f[0] {
			case "VmRSS:":
				cur = v / 1024
			case "VmHWM:":
				peak = v / 1024
			}
		}
	}
	return cur, peak
}

// BenchmarkFleetYear fills a store with a synthetic fleet (MPTESTER_BENCH_PROBES
// probes x MPTESTER_BENCH_DAYS days ending yesterday, default 1,000 x 365:
// the roll-ups written directly, as the deriver would, plus
// MPTESTER_BENCH_SAMPLE real raw uploads through the server, derived by it)
// and times the fleet page and GET /v1/report?since=7d, each built cold
// (windows of 7 days at different places, so no cache answers) and warm.
// SQLite by default; MPTESTER_BENCH_PG=1 for a throwaway PostgreSQL;
// MPTESTER_BENCH_DB=FILE times a SQLite store filled before (a copy of
// one this benchmark filled) without filling it again.
//
//	go test ./collect -run XXX -bench BenchmarkFleetYear -benchtime 1x -v
func BenchmarkFleetYear(b *testing.B) {
	probes, days := benchEnv("MPTESTER_BENCH_PROBES", 1000), benchEnv("MPTESTER_BENCH_DAYS", 365)
	sample, targets := benchEnv("MPTESTER_BENCH_SAMPLE", 200), benchEnv("MPTESTER_BENCH_TARGETS", 200)
	ctx := context.Background()
	dir := b.TempDir()
	dsn := filepath.Join(dir, "collect.db")
	if os.Getenv("MPTESTER_BENCH_PG") == "1" {
		dsn = pgtest.Database(b, pgtest.Server(b))
	}
	reuse := os.Getenv("MPTESTER_BENCH_DB")
	if reuse != "" {
		dsn = reuse
	}
	st, err := store.Open(ctx, dsn)
	require.NoError(b, err)
	defer st.Close()
	adminTok := collect.NewToken()
	require.NoError(b, st.AddAdmin(ctx, "ops-"+adminTok[:8], collect.HashToken(adminTok), time.Now()))
	today := time.Now().UTC().Truncate(store.Day)
	day0 := today.Add(-time.Duration(days) * store.Day)
	names := make([]string, probes)
	toks := map[string]string{}
	for p := range probes {
		names[p] = fmt.Sprintf("probe-%04d", p)
		toks[names[p]] = collect.NewToken()
		if reuse == "" {
			require.NoError(b, st.AddProbe(ctx, names[p], collect.HashToken(toks[names[p]]), day0))
		}
	}
	if reuse != "" {
		probes, sample = 0, 0 // filled (and sampled) before
	}
	fill := time.Now()
	var nrows int64
	var mu sync.Mutex
	jobs := make(chan int)
	var wg sync.WaitGroup
	var firstErr error
	workers := 1
	if store.IsPostgres(dsn) {
		workers = 4 // round trips overlap; SQLite has one writer
	}
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 49))
			for p := range jobs {
				var batch []store.Rollup
				for d := range days {
					batch = append(batch, fleetYearDay(rng, names[p], day0.Add(time.Duration(d)*store.Day), d, targets)...)
					if len(batch) > 2000 || d == days-1 {
						err := st.AddRollups(ctx, batch)
						mu.Lock()
						nrows += int64(len(batch))
						if err != nil && firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
						batch = batch[:0]
					}
				}
			}
		})
	}
	for p := range probes {
		jobs <- p
	}
	close(jobs)
	wg.Wait()
	require.NoError(b, firstErr)
	b.Logf("filled %d roll-up rows for %d probes x %d days in %s", nrows, probes, days, time.Since(fill).Round(time.Second))

	// Real uploads through the server, derived by it (Reindex: the
	// deriver's step), spread over the last week.
	srv, err := collect.New(collect.Config{Store: st, Data: filepath.Join(dir, "data"), Limits: collect.DefaultLimits()})
	require.NoError(b, err)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range sample {
		id, p := uuid.NewString(), names[i%len(names)]
		start := today.Add(-time.Duration(rng.IntN(7*24*3600)) * time.Second)
		cmd := "run"
		if i%10 == 0 {
			cmd = "survey"
		}
		body := genFleetRun(b, rng, id, p, cmd, start, &fleetTruth{probes: map[string]bool{}})
		req, _ := http.NewRequest(http.MethodPut, hs.URL+"/v1/runs/"+id, strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+toks[p])
		resp, err := http.DefaultClient.Do(req)
		require.NoError(b, err)
		resp.Body.Close()
		require.Equal(b, http.StatusCreated, resp.StatusCode)
		run, err := st.GetRun(ctx, id)
		require.NoError(b, err)
		require.NoError(b, srv.Reindex(ctx, run))
	}

	// The page, as an admin's browser asks for it.
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(hs.URL+"/login", url.Values{"token": {adminTok}})
	require.NoError(b, err)
	resp.Body.Close()
	cookies := resp.Cookies()
	var lastCPU time.Duration
	get := func(path string, cookie bool) (time.Duration, int) {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+path, nil)
		if cookie {
			for _, ck := range cookies {
				req.AddCookie(ck)
			}
		} else {
			req.Header.Set("Authorization", "Bearer "+adminTok)
		}
		t0, c0 := time.Now(), cpuTime()
		resp, err := http.DefaultClient.Do(req)
		require.NoError(b, err)
		n, _ := bufio.NewReader(resp.Body).Discard(1 << 30)
		resp.Body.Close()
		require.Equal(b, http.StatusOK, resp.StatusCode, path)
		lastCPU = cpuTime() - c0
		return time.Since(t0), n
	}
	runtime.GC()
	debug.FreeOSMemory()
	cur0, _ := rssMB()
	var peak float64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // the resident set while pages are built
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				if c, _ := rssMB(); c > peak {
					peak = c
				}
			}
		}
	}()
	const loads = 20
	for _, v := range []struct {
		name   string
		path   func(i int) string
		cookie bool
	}{
		{"fleet page, 7-day windows, cold", func(i int) string {
			u := today.Add(-time.Duration(i*13%max(1, days-7)) * store.Day)
			return "/?since=" + u.Add(-7*store.Day).Format(time.DateOnly) + "&until=" + u.Format(time.DateOnly)
		}, true},
		{"fleet page, default window, warm", func(int) string { return "/" }, true},
		{"/v1/report 7-day windows, cold", func(i int) string {
			u := today.Add(-time.Duration(i*17%max(1, days-7)) * store.Day)
			return "/v1/report?since=" + u.Add(-7*store.Day).Format(time.DateOnly) + "&until=" + u.Format(time.DateOnly)
		}, false},
		{"/v1/report?since=7d", func(int) string { return "/v1/report?since=7d" }, false},
		{"fleet page, 30-day window", func(int) string { return "/?since=30d" }, true},
	} {
		var ds, cs []time.Duration
		size := 0
		for i := range loads {
			d, n := get(v.path(i), v.cookie)
			ds, cs, size = append(ds, d), append(cs, lastCPU), n
		}
		first, firstCPU := ds[0], cs[0]
		slices.Sort(ds)
		slices.Sort(cs)
		b.Logf("%-34s wall: first %7.1f ms  p50 %7.1f  p95 %7.1f  max %7.1f | CPU: first %6.1f ms  p50 %6.1f  p95 %6.1f  (%d loads, %d kB)", v.name,
			ms(first), ms(ds[len(ds)/2]), ms(ds[len(ds)*95/100]), ms(ds[len(ds)-1]), ms(firstCPU), ms(cs[len(cs)/2]), ms(cs[len(cs)*95/100]), loads, size/1000)
	}
	close(stop)
	<-sampled
	_, hwm := rssMB()
	b.Logf("resident set: %.0f MB before the loads, %.0f MB at most during them (the process's peak, fill included: %.0f MB)", cur0, peak, hwm)
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFleetPageRuns: the fleet page's load time with 150 and 1,500
// stored runs (10 probes, real uploads through the server spread over the
// last 7 days, derived by it): it reads the roll-ups, so the second should
// cost about the first. Each load is built (windows that hold the same
// runs but differ, so no cache answers).
//
//	go test ./collect -run XXX -bench BenchmarkFleetPageRuns -benchtime 1x -v
func BenchmarkFleetPageRuns(b *testing.B) {
	for _, n := range []int{150, 1500} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			e := newEnv(b, nil)
			ctx := context.Background()
			toks := map[string]string{"pi1": e.probeTok}
			for p := 2; p <= 10; p++ {
				name := fmt.Sprintf("pi%d", p)
				toks[name] = collect.NewToken()
				require.NoError(b, e.st.AddProbe(ctx, name, collect.HashToken(toks[name]), time.Now()))
			}
			rng := rand.New(rand.NewPCG(uint64(n), 3))
			now := time.Now().UTC()
			for i := range n {
				id, p := uuid.NewString(), fmt.Sprintf("pi%d", i%10+1)
				start := now.Add(-time.Duration(1+rng.IntN(6*24*3600)) * time.Second)
				cmd := "run"
				if i%10 == 0 {
					cmd = "survey"
				}
				a := e.put(b, id, genFleetRun(b, rng, id, p, cmd, start, &fleetTruth{probes: map[string]bool{}}), toks[p], "")
				require.Equal(b, http.StatusCreated, a.code, "%s", a.body)
			}
			require.Eventually(b, func() bool {
				u, err := e.st.ListUnderived(ctx, 0)
				return err == nil && len(u) == 0
			}, 5*time.Minute, 100*time.Millisecond)
			var ds []time.Duration
			for i := range 10 {
				since := now.Truncate(store.Day).Add(-time.Duration(7+i) * store.Day).Format(time.DateOnly)
				t0 := time.Now()
				a := e.page(b, "/?since="+since)
				ds = append(ds, time.Since(t0))
				require.Equal(b, http.StatusOK, a.code)
			}
			slices.Sort(ds)
			b.Logf("%d stored runs: fleet page p50 %.1f ms, max %.1f ms (10 loads, each built; sign-in included)", n, ms(ds[5]), ms(ds[9]))
		})
	}
}
