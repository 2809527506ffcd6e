package survey

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/mptester/mptester/internal/memtrim"
)

// memWatch backs the hidden --memprofile flag (memory at 100K
// and 1M domains): it samples the live heap (after the last GC) and the
// goroutine stacks every 250 ms, writes a heap profile to path each time
// the live heap passes its previous peak by 5%, and logs the peaks when
// stopped, with the resident set's anonymous and file-backed parts at
// its largest sample (which need not be VmHWM's moment). Every sample
// also goes to PATH.csv (seconds since start, live heap, stacks, the
// runtime's mapped and unreleased memory, resident anon and file bytes),
// to see which stage makes the peak.
type memWatch struct {
	series     *os.File
	start      time.Time
	path       string
	log        *slog.Logger
	peakLive   uint64
	peakStacks uint64
	peakGs     uint64
	peakRes    memtrim.Stats // the resident set at its sampled peak (Linux)
	written    uint64
	stop       context.CancelFunc
	wg         sync.WaitGroup
	err        error
}

var memSamples = []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}, {Name: "/sched/goroutines:goroutines"},
	{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}

func startMemWatch(path string, log *slog.Logger) *memWatch {
	ctx, cancel := context.WithCancel(context.Background())
	m := &memWatch{path: path, log: log, stop: cancel, start: time.Now()}
	if f, err := os.Create(path + ".csv"); err != nil {
		m.err = err // logged with the peaks
	} else {
		m.series = f
		fmt.Fprintln(f, "seconds,live_heap,stacks,runtime_held,rss_anon,rss_file")
	}
	m.wg.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			m.sample()
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
	})
	return m
}

func (m *memWatch) sample() {
	s := append([]metrics.Sample(nil), memSamples...)
	metrics.Read(s)
	live, stacks := s[0].Value.Uint64(), s[1].Value.Uint64()
	m.peakStacks = max(m.peakStacks, stacks)
	m.peakGs = max(m.peakGs, s[2].Value.Uint64())
	rs, ok := memtrim.Resident()
	if ok && rs.Anon+rs.File > m.peakRes.Anon+m.peakRes.File {
		m.peakRes = rs
	}
	if m.series != nil {
		fmt.Fprintf(m.series, "%.2f,%d,%d,%d,%d,%d\n", time.Since(m.start).Seconds(), live, stacks,
			s[3].Value.Uint64()-s[4].Value.Uint64(), rs.Anon, rs.File)
	}
	if live <= m.peakLive {
		return
	}
	m.peakLive = live
	if live < m.written+m.written/20 {
		return
	}
	m.written = live
	f, err := os.Create(m.path)
	if err == nil {
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil && m.err == nil {
		m.err = err
	}
}

// Stop ends the sampling and logs the peaks (and the process's peak RSS
// where the OS says it).
func (m *memWatch) Stop() {
	m.stop()
	m.wg.Wait()
	if m.series != nil {
		m.series.Close()
	}
	m.log.Info("memory", "peak_live_heap_mb", fmt.Sprintf("%.1f", float64(m.peakLive)/1e6),
		"peak_goroutine_stacks_mb", fmt.Sprintf("%.1f", float64(m.peakStacks)/1e6), "peak_goroutines", m.peakGs, "peak_rss", peakRSS(),
		"sampled_peak_rss_anon_mb", fmt.Sprintf("%.1f", float64(m.peakRes.Anon)/1e6), "sampled_peak_rss_file_mb", fmt.Sprintf("%.1f", float64(m.peakRes.File)/1e6),
		"profile", m.path, "err", m.err)
}

// peakRSS is VmHWM from /proc/self/status ("" where there is none).
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ""
	}
	var kb int64
	for _, line := range strings.Split(string(b), "\n") {
		if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kb); err == nil {
			return fmt.Sprintf("%.1f MB", float64(kb)*1024/1e6)
		}
	}
	return ""
}
