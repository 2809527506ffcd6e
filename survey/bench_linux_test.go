package survey

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/report"
)

// BenchmarkSurveyLoopback runs the whole pipeline on loopback: a real DNS
// server with N domains on distinct 127/8 addresses, a TCP listener, and
// probes at the given rate. It reports the achieved probe rate, the ratio
// of the run's wall time (resolution included) to its lower bound
// (probes/rate + one timeout), CPU time per probe and the process's peak
// RSS.
func BenchmarkSurveyLoopback(b *testing.B) {
	for _, bc := range []struct {
		method  string
		rate    float64
		domains int
		count   int
	}{{"tcp-connect", 1000, 500, 10}, {"tcp-connect", 5000, 2500, 10}, {"tcp-syn", 5000, 2500, 10}, {"icmp", 5000, 2500, 10},
		{"tcp-syn", 5000, 10000, 10},
		// Memory at list size: 100K domains, one probe each.
		{"tcp-syn", 10000, 100000, 1}} {
		b.Run(fmt.Sprintf("%s/rate=%g/targets=%d/count=%d", bc.method, bc.rate, bc.domains, bc.count), func(b *testing.B) {
			if bc.method != "tcp-connect" && os.Geteuid() != 0 {
				b.Skip("needs root")
			}
			z := &testZone{A: map[string][]string{}}
			var domains []Domain
			for i := range bc.domains {
				name := "d" + strconv.Itoa(i) + ".test"
				z.A[name+"."] = []string{fmt.Sprintf("127.%d.%d.%d", 1+i/62500, i/250%250, i%250+1)}
				domains = append(domains, Domain{Rank: i + 1, Name: name})
			}
			dnsAddr := startDNS(b, z)
			port := startListener(b)
			cfg := baseConfig(loopback(b, dnsAddr), port)
			cfg.Domains, cfg.Method, cfg.Rate, cfg.Count = domains, bc.method, bc.rate, bc.count
			cfg.Spacing, cfg.Timeout, cfg.Burst = 100*time.Millisecond, time.Second, max(1, int(bc.rate/100))
			for b.Loop() {
				var ru0, ru1 syscall.Rusage
				syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
				r := &benchRun{cfg: cfg}
				stop := heapPeak(b)
				r.run(b)
				stop()
				syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
				cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
				probes := float64(bc.domains * cfg.Count)
				bound := time.Duration(probes/bc.rate*float64(time.Second)) + cfg.Timeout
				b.ReportMetric(probes/r.runTime.Seconds(), "probes/s")
				b.ReportMetric(r.runTime.Seconds()/bound.Seconds(), "x_lower_bound")
				b.ReportMetric(float64(cpu.Microseconds())/probes, "cpu_us/probe")
				b.ReportMetric(float64(peakRSSKB())/1024, "peak_rss_MB")
			}
		})
	}
}

type benchRun struct {
	cfg     Config
	runTime time.Duration
}

// run times the whole survey: resolution overlaps probing, so the lower
// bound (probes/rate + one timeout) is for the run, not a stage.
func (br *benchRun) run(b *testing.B) {
	h, _ := report.NewHeader("survey", "bench", br.cfg.Paths, nil)
	st, err := report.NewStream(io.Discard, h)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	s, err := Run(context.Background(), br.cfg, st)
	br.runTime = time.Since(t0)
	if err != nil {
		b.Fatal(err)
	}
	if s.Cells[0].Targets != len(br.cfg.Domains) || s.Cells[0].Unresponsive != 0 {
		b.Fatalf("cell %+v", s.Cells[0])
	}
}

// peakRSSKB is VmHWM of this process (Linux), else the Go heap in use.
func peakRSSKB() int64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmHWM:") {
				n, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
				return n
			}
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse / 1024)
}

// heapPeak reports the largest Go heap in use (sampled every 100 ms) as
// peak_heap_MB, and writes a heap profile at that peak to the file named
// by $SURVEY_HEAP_PROFILE, if set.
func heapPeak(b *testing.B) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	var peak uint64
	go func() {
		defer close(finished)
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak {
				peak = ms.HeapInuse
				if name := os.Getenv("SURVEY_HEAP_PROFILE"); name != "" {
					if f, err := os.Create(name); err == nil {
						pprof.WriteHeapProfile(f)
						f.Close()
					}
				}
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		b.ReportMetric(float64(peak)/(1<<20), "peak_heap_MB")
	}
}

// nopProber answers every probe at once: a survey run with it takes as
// long as its resolution.
type nopProber struct{}

func (nopProber) Probe(context.Context, Target) Result {
	return Result{Kind: AnswerSynAck, RTT: time.Millisecond, Status: ProbeSuccess}
}
func (nopProber) Close() error { return nil }

// BenchmarkResolve10K resolves 10,000 names (A only) on loopback, 100
// of which the server never answers, with the survey's defaults (the
// adaptive window up to 500 queries in flight per server, at most 4,096
// lookups in flight), a 2 s timeout and 2 retries. It prints the floor
// these settings imply (every dead name takes (retries+1) x timeout; a
// dead name's query gives its slot back when presumed lost, so they run
// ceil(dead/workers) rounds) and reports the run's ratio to it; the
// statuses must be exact.
// $SURVEY_RESOLVER_CAP overrides the per-server cap, $SURVEY_RESOLVE_NAMES
// the number of names (1% of them dead).
func BenchmarkResolve10K(b *testing.B) {
	names := 10000
	if n, err := strconv.Atoi(os.Getenv("SURVEY_RESOLVE_NAMES")); err == nil && n >= 100 {
		names = n // e.g. 100000: the 100K timing
	}
	dead := names / 100
	z := &testZone{A: map[string][]string{}, AAAA: map[string][]string{}, Hang: map[string]bool{}}
	var domains []Domain
	for i := range names {
		name := "r" + strconv.Itoa(i) + ".test"
		if i%(names/dead) == 0 {
			z.Hang[name+"."] = true
		} else {
			z.A[name+"."] = []string{fmt.Sprintf("127.%d.%d.%d", 2+i/62500, i/250%250, i%250+1)}
			z.AAAA[name+"."] = []string{"::1"}
		}
		domains = append(domains, Domain{Rank: i + 1, Name: name})
	}
	Methods["test-nop"] = func(context.Context, probe.Path, EngineOptions) (Engine, error) { return nopProber{}, nil }
	defer delete(Methods, "test-nop")
	dnsAddr := startDNS(b, z)
	cfg := baseConfig(loopback(b, dnsAddr), 1)
	cfg.Domains, cfg.Method, cfg.Count, cfg.Rate, cfg.Family = domains, "test-nop", 1, 0, probe.Family4
	cfg.DNSTimeout, cfg.DNSRetries = 2*time.Second, 2
	if c, err := strconv.Atoi(os.Getenv("SURVEY_RESOLVER_CAP")); err == nil {
		cfg.ResolverCap = c
	}
	cfg.defaults()
	// Dead names run side by side, as many as there are workers: their
	// queries give back their slots once presumed lost.
	par := cfg.ResolveWorkers
	rounds := (dead + par - 1) / par
	floor := time.Duration(rounds*(cfg.DNSRetries+1)) * cfg.DNSTimeout
	b.Logf("floor: %d dead names x (%d retries + 1) x %v timeout, %d at a time (workers %d, cap %d) = %v",
		dead, cfg.DNSRetries, cfg.DNSTimeout, par, cfg.ResolveWorkers, cfg.ResolverCap, floor)
	for b.Loop() {
		h, _ := report.NewHeader("survey", "bench", cfg.Paths, nil)
		t0 := time.Now()
		tw := &timeoutWatch{t0: t0}
		st, _ := report.NewStream(tw, h)
		var ru0, ru1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		s, err := Run(context.Background(), cfg, st)
		el := time.Since(t0)
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		if err != nil {
			b.Fatal(err)
		}
		if got := s.Resolution[0].ByStatus; got[StatusTimeout] != dead || got[StatusNoError] != names-dead {
			b.Fatalf("statuses %v, want %d TIMEOUT and %d NOERROR", got, dead, names-dead)
		}
		cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
		b.ReportMetric(el.Seconds(), "s")
		b.ReportMetric(el.Seconds()/floor.Seconds(), "x_floor")
		b.ReportMetric(float64(cpu.Microseconds())/float64(names), "cpu_us/name")
		// Where the time goes: the run ends one retry schedule after the
		// last dead name started, so what it spends above the floor is
		// the time the live names took to get there.
		b.ReportMetric(tw.lastStart.Seconds(), "s_last_dead_start")
	}
}

// timeoutWatch notes when the last TIMEOUT resolution started (written at
// its end, minus its time_ms).
type timeoutWatch struct {
	t0        time.Time
	lastStart time.Duration
}

func (w *timeoutWatch) Write(b []byte) (int, error) {
	for line := range bytes.Lines(b) {
		if !bytes.Contains(line, []byte(`"type":"resolution"`)) || !bytes.Contains(line, []byte(`"status":"TIMEOUT"`)) {
			continue
		}
		var rec ResolutionRecord
		if json.Unmarshal(line, &rec) == nil {
			w.lastStart = max(w.lastStart, time.Since(w.t0)-time.Duration(rec.TimeMs*float64(time.Millisecond)))
		}
	}
	return len(b), nil
}
