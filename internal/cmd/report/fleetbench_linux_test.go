package report

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/report"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// fleetMonth fills a SQLite collect store (index rows through store.PutRun,
// raw files where the server keeps them) with probes x days x 4 pattern
// runs a day and one survey of domains domains per probe per week. A run
// holds ping (3 transports x 2 families, 10 delays each), bulk (3
// transports) and interactive (mptcp, 600 delays each way) tests; a
// survey a resolution record per domain and path and a probe record per
// address and probe path with 3 RTTs spread over many distinct values.
func fleetMonth(b *testing.B, dir string, probes, days, domains int) (dsn string, records, bytes int64) {
	ctx := context.Background()
	dsn = filepath.Join(dir, "collect.db")
	st, err := store.Open(ctx, dsn)
	require.NoError(b, err)
	defer st.Close()
	day0 := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	type job struct {
		probe, command string
		start          time.Time
	}
	jobs := make(chan job)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				n, size, err := writeFleetRun(ctx, st, dir, j.probe, j.command, j.start, domains)
				mu.Lock()
				records += n
				bytes += size
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	for p := range probes {
		probe := fmt.Sprintf("probe-%02d", p)
		require.NoError(b, st.AddProbe(ctx, probe, fmt.Sprintf("%064x", p+1), day0))
		for d := range days {
			for r := range 4 {
				jobs <- job{probe, "run", day0.Add(time.Duration(d)*24*time.Hour + time.Duration(r*6)*time.Hour + time.Duration(p)*time.Minute)}
			}
			if d%7 == 0 {
				jobs <- job{probe, "survey", day0.Add(time.Duration(d)*24*time.Hour + 3*time.Hour)}
			}
		}
	}
	close(jobs)
	wg.Wait()
	require.NoError(b, firstErr)
	return dsn, records, bytes
}

func writeFleetRun(ctx context.Context, st store.Store, dir, probe, command string, start time.Time, domains int) (int64, int64, error) {
	id := uuid.NewString()
	rel := filepath.Join("raw", id[:2], id+".tmp")
	if err := os.MkdirAll(filepath.Join(dir, "raw", id[:2]), 0o755); err != nil {
		return 0, 0, err
	}
	f, err := os.Create(filepath.Join(dir, rel))
	if err != nil {
		return 0, 0, err
	}
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(f, h), 256<<10)
	cw := &countW{w: bw}
	hdr := report.Header{SchemaVersion: report.SchemaVersion, RunID: id, ProbeID: probe, Command: command,
		Tool: report.Tool{Name: "mptester", Version: "bench"}, StartedAt: start,
		Paths: []report.Path{{Name: "wlan0"}, {Name: "wwan0"}}}
	s, err := report.NewStream(cw, hdr)
	if err != nil {
		return 0, 0, err
	}
	seed := uint64(start.UnixNano()) ^ uint64(len(probe))*0x9e3779b97f4a7c15
	rnd := func() float64 { // splitmix64: distinct, reproducible values
		seed += 0x9e3779b97f4a7c15
		z := seed
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		return float64((z^(z>>31))>>11) / (1 << 53)
	}
	var n int64
	var line []byte
	emit := func() error {
		n++
		err := s.Write(jsonRaw(line))
		line = line[:0]
		return err
	}
	if command == "survey" {
		paths := []string{"wlan0", "wwan0"}
		for d := range domains {
			for pi, p := range paths {
				addr := fmt.Sprintf("198.%d.%d.%d", 18+pi*(d%3/2), d/256%256, d%256)
				line = fmt.Appendf(line, `{"type":"resolution","domain":"d%d.example","rank":%d,"path":%q,"status":"NOERROR","answers":[%q],"time_ms":12.5,"bytes":160,"valid":true}`, d, d+1, p, addr)
				if err := emit(); err != nil {
					return 0, 0, err
				}
				for _, probePath := range paths {
					base := 10 + 90*rnd()
					resp := rnd() > 0.05
					if resp {
						line = fmt.Appendf(line, `{"type":"probe","probe_path":%q,"resolve_path":%q,"resolve_paths":[%q],"address":%q,"rtts_ms":[%.3f,%.3f,%.3f],"responsive":true,"valid":true,"bytes":180}`,
							probePath, p, p, addr, base, base+rnd(), base+2*rnd())
					} else {
						line = fmt.Appendf(line, `{"type":"probe","probe_path":%q,"resolve_path":%q,"resolve_paths":[%q],"address":%q,"rtts_ms":[],"responsive":false,"valid":true,"bytes":180}`,
							probePath, p, p, addr)
					}
					if err := emit(); err != nil {
						return 0, 0, err
					}
				}
			}
		}
	} else {
		delays := func(k int, base float64) []byte {
			var b []byte
			for i := range k {
				if i > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendInt(b, int64((base+base*rnd())*1e6), 10)
			}
			return b
		}
		for _, tr := range []string{"tcp", "quic", "mptcp"} {
			for _, fam := range []int{4, 6} {
				line = fmt.Appendf(line, `{"type":"pattern_test","index":%d,"config":{"pattern":"ping","transport":%q,"path":"wlan0","family":%d},"status":"success","result":{"delays_ns":[%s]}}`, n, tr, fam, delays(10, 20))
				if err := emit(); err != nil {
					return 0, 0, err
				}
			}
			line = fmt.Appendf(line, `{"type":"pattern_test","index":%d,"config":{"pattern":"bulk","transport":%q,"path":"wlan0","family":4},"status":"success","path_bytes":[{"path":"wlan0","bytes_sent":%d,"bytes_received":%d}],"result":{"completion_ns":%d,"goodput_bps":%g}}`, n, tr, int64(1e5*rnd()), int64(1e7*rnd()), int64((500+500*rnd())*1e6), 1e7+1e7*rnd())
			if err := emit(); err != nil {
				return 0, 0, err
			}
		}
		line = fmt.Appendf(line, `{"type":"pattern_test","index":%d,"config":{"pattern":"interactive","transport":"mptcp","path":"wlan0","family":4},"status":"success","result":{"upload":{"delays_ns":[%s],"max_ns":90000000},"download":{"delays_ns":[%s],"max_ns":90000000}}}`, n, delays(600, 15), delays(600, 15))
		if err := emit(); err != nil {
			return 0, 0, err
		}
	}
	if err := s.Close(report.StatusOK, ""); err != nil {
		return 0, 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, 0, err
	}
	f.Close()
	sha := hex.EncodeToString(h.Sum(nil))
	final := filepath.Join("raw", id[:2], id+"."+sha)
	if err := os.Rename(filepath.Join(dir, rel), filepath.Join(dir, final)); err != nil {
		return 0, 0, err
	}
	_, _, err = st.PutRun(ctx, store.Run{RunID: id, ProbeID: probe, Command: command, SchemaVersion: report.SchemaVersion,
		Status: "ok", Parsed: true, StartedAt: start, FinishedAt: start.Add(time.Minute), Records: n, Bytes: cw.n,
		SHA256: sha, RawPath: final, ContentType: "application/x-ndjson", StoredAt: start},
		store.Report{Probe: probe, Seen: start})
	return n, cw.n, err
}

type countW struct {
	w io.Writer
	n int64
}

func (c *countW) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

type jsonRaw []byte

func (j jsonRaw) MarshalJSON() ([]byte, error) { return j, nil }

// BenchmarkFleetMonth builds a simulated fleet month in a SQLite store
// (MPTESTER_BENCH_PROBES x MPTESTER_BENCH_DAYS, default 50 x 30, four
// pattern runs a day and one MPTESTER_BENCH_DOMAINS-domain survey a week
// per probe, default 10,000), then runs `mptester report --db --format
// html` as a separate process over its first week and over the whole
// month, reporting wall time and the process's peak RSS (getrusage):
// memory must not grow with the number of records. The peer, in the same
// run: one jq pass over the same raw files.
func BenchmarkFleetMonth(b *testing.B) {
	probes, days := envInt("MPTESTER_BENCH_PROBES", 50), envInt("MPTESTER_BENCH_DAYS", 30)
	domains := envInt("MPTESTER_BENCH_DOMAINS", 10000)
	dir := b.TempDir()
	t0 := time.Now()
	dsn, records, size := fleetMonth(b, dir, probes, days, domains)
	b.Logf("fleet: %d probes x %d days, %d-domain surveys: %d records, %.1f MB raw, built in %s",
		probes, days, domains, records, float64(size)/(1<<20), time.Since(t0).Round(time.Second))
	bin := filepath.Join(dir, "mptester")
	build := exec.Command("go", "build", "-o", bin, "github.com/mptester/mptester/cmd/mptester")
	build.Stderr = os.Stderr
	require.NoError(b, build.Run())
	week := time.Date(2026, 10, 8, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
	for _, sc := range []struct {
		name string
		args []string
	}{{"week", []string{"--until", week}}, {"month", []string{"--since", "2026-10-01", "--until", "2026-11-01"}}} {
		b.Run(sc.name, func(b *testing.B) {
			for range b.N {
				out := filepath.Join(dir, sc.name+".html")
				cmd := exec.Command(bin, append([]string{"report", "--db", dsn, "--format", "html", "-o", out}, sc.args...)...)
				cmd.Stderr = os.Stderr
				start := time.Now()
				require.NoError(b, cmd.Run())
				wall := time.Since(start)
				ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
				fi, err := os.Stat(out)
				require.NoError(b, err)
				b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MB")
				b.ReportMetric(wall.Seconds(), "wall-s")
				b.ReportMetric(float64(fi.Size())/(1<<20), "html-MB")
				b.Logf("%s: %.1f s wall, %.1f s CPU, peak RSS %.1f MB, page %.1f MB", sc.name, wall.Seconds(),
					time.Duration(ru.Utime.Nano()+ru.Stime.Nano()).Seconds(), float64(ru.Maxrss)/1024, float64(fi.Size())/(1<<20))
			}
		})
	}
	// The same month as Parquet (collect export): the derived tables are
	// filled first (collect reindex, timed apart), as a running collector
	// fills them on upload.
	b.Run("parquet", func(b *testing.B) {
		start := time.Now()
		ri := exec.Command(bin, "collect", "--data", dir, "--db", dsn, "reindex")
		ri.Stderr = os.Stderr
		require.NoError(b, ri.Run())
		b.Logf("derived tables filled (collect reindex) in %.1f s", time.Since(start).Seconds())
		for range b.N {
			out := filepath.Join(dir, "parquet")
			os.RemoveAll(out)
			cmd := exec.Command(bin, "collect", "--data", dir, "--db", dsn, "export", "--format", "parquet", "-o", out)
			cmd.Stderr = os.Stderr
			start := time.Now()
			require.NoError(b, cmd.Run())
			wall := time.Since(start)
			ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			var size int64
			files, _ := filepath.Glob(filepath.Join(out, "*", "*.parquet"))
			for _, f := range files {
				fi, err := os.Stat(f)
				require.NoError(b, err)
				size += fi.Size()
			}
			b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MB")
			b.ReportMetric(wall.Seconds(), "wall-s")
			b.ReportMetric(float64(size)/(1<<20), "parquet-MB")
			b.Logf("parquet export: %.1f s wall, %.1f s CPU, peak RSS %.1f MB, %d files, %.1f MB", wall.Seconds(),
				time.Duration(ru.Utime.Nano()+ru.Stime.Nano()).Seconds(), float64(ru.Maxrss)/1024, len(files), float64(size)/(1<<20))
		}
	})
	if jq, err := exec.LookPath("jq"); err == nil {
		files, _ := filepath.Glob(filepath.Join(dir, "raw", "*", "*"))
		start := time.Now()
		cmd := exec.Command(jq, append([]string{"-c", `select(.type=="probe" or .type=="pattern_test") | .median // .status`}, files...)...)
		cmd.Stdout = io.Discard
		require.NoError(b, cmd.Run())
		b.Logf("peer: one jq pass over the %d raw files: %.1f s", len(files), time.Since(start).Seconds())
	}
}
