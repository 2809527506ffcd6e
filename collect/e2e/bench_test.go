//go:build linux && !race

package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/internal/pgtest"
	"github.com/mptester/mptester/internal/s3test"
	"github.com/mptester/mptester/upload"
)

// Ingest benchmarks: the collector as its own process (so its peak RSS is
// its own), 200 concurrent clients on loopback over pinned TLS, each PUT
// timed from request to receipt. Run once each:
//
//	go test -run XXX -bench Ingest -benchtime 1x ./collect/e2e

const benchClients = 200

func BenchmarkIngestRunsSQLite(b *testing.B) { benchIngest(b, "", false) }

func BenchmarkIngestRunsPostgres(b *testing.B) { benchIngest(b, pgtest.DSN(b), false) }

func BenchmarkIngestSurveySQLite(b *testing.B) { benchIngest(b, "", true) }

func BenchmarkIngestSurveyPostgres(b *testing.B) { benchIngest(b, pgtest.DSN(b), true) }

// BenchmarkIngestRunsPostgresS3: PostgreSQL with every upload an object in
// an S3 bucket (SeaweedFS on loopback; --raw-inline-max 0).
func BenchmarkIngestRunsPostgresS3(b *testing.B) {
	dsn := pgtest.DSN(b)
	s3 := s3test.Start(b, "")
	s3.Bucket(b, "bench", "", "")
	cpu0 := processCPU(s3.Pid())
	defer func() { b.ReportMetric(processCPU(s3.Pid())-cpu0, "weed_cpu_s") }()
	benchIngest(b, dsn, false, "--raw", "s3://bench/collect", "--s3-endpoint", s3.Endpoint, "--s3-region", "us-east-1",
		"--s3-path-style", "--raw-inline-max", "0")
}

func benchIngest(b *testing.B, dsn string, survey bool, extra ...string) {
	// The clients upload as one probe: its own bound must admit them all.
	c := newCollector(b, filepath.Join(b.TempDir(), "data"), dsn, append(extra, "--max-inflight-probe", strconv.Itoa(benchClients))...)
	tok := c.enrol("bench")
	c.start()
	pin, err := certs.ParseFingerprint(c.pin)
	require.NoError(b, err)
	tr := upload.Transport(&pin, nil)
	tr.MaxIdleConnsPerHost = benchClients
	tr.ResponseHeaderTimeout = 0
	hc := &http.Client{Transport: tr}

	// A pattern-run envelope (the golden document, 2.3 kB) or a survey
	// stream of ~2 MB in the survey's record shape.
	var base []byte
	uploads := 20000
	if n, err := strconv.Atoi(os.Getenv("MPTESTER_BENCH_UPLOADS")); err == nil && n > 0 {
		uploads = n
	}
	if survey {
		base = surveyStream(2 << 20)
		uploads = min(uploads, 400)
	} else {
		base = fixtureDoc(b)
	}
	const baseID = "0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10"
	var next atomic.Int64
	lat := make([]time.Duration, uploads)
	var failed atomic.Int64
	var firstErr sync.Once
	var wg sync.WaitGroup
	var pg0 pgUse
	if dsn != "" {
		pg0 = pgUsage(b, dsn)
	}
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < benchClients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= uploads {
					return
				}
				id := uuid.NewString()
				body := bytes.ReplaceAll(base, []byte(baseID), []byte(id))
				t0 := time.Now()
				req, _ := http.NewRequest(http.MethodPut, c.url+"/v1/runs/"+id, bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := hc.Do(req)
				if err != nil {
					failed.Add(1)
					firstErr.Do(func() { b.Logf("first failure: %v", err) })
					continue
				}
				ans, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					failed.Add(1)
					firstErr.Do(func() { b.Logf("first failure: %d %s", resp.StatusCode, ans) })
					continue
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	b.StopTimer()
	rss := peakRSSMB(c)
	cpu := serverCPU(c)
	// How far the deriver lags: from the last receipt until no run is
	// without its derived rows (one page read per check, so the commits
	// counted below barely grow).
	idx := dsn
	if idx == "" {
		idx = filepath.Join(c.data, "collect.db")
	}
	st, err := store.Open(context.Background(), idx)
	require.NoError(b, err)
	for {
		page, err := st.ListUnderived(context.Background(), 0)
		require.NoError(b, err)
		if len(page) == 0 {
			break
		}
		require.Less(b, time.Since(start), 10*time.Minute, "derived tables never complete")
		time.Sleep(100 * time.Millisecond)
	}
	lag := time.Since(start) - wall
	st.Close()
	c.kill()
	require.Zero(b, failed.Load(), "every upload got its 201")
	if !slices.Contains(extra, "--raw") {
		got := stored(b, c)
		require.Len(b, got, uploads, "zero loss")
	} else {
		// The objects are in the bucket (checked by TestReplicas); here
		// every receipt's index row.
		st, err := store.Open(context.Background(), dsn)
		require.NoError(b, err)
		n := 0
		var after int64
		for {
			page, err := st.ListRuns(context.Background(), store.RunFilter{After: after})
			require.NoError(b, err)
			if len(page) == 0 {
				break
			}
			n += len(page)
			after = page[len(page)-1].Seq
		}
		st.Close()
		require.Equal(b, uploads, n, "zero loss")
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	mb := float64(len(base)) * float64(uploads) / 1e6
	b.ReportMetric(float64(uploads)/wall.Seconds(), "uploads/s")
	b.ReportMetric(mb/wall.Seconds(), "MB/s")
	b.ReportMetric(float64(lat[uploads/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(lat[uploads*99/100].Microseconds())/1000, "p99_ms")
	b.ReportMetric(rss, "server_peak_RSS_MB")
	b.ReportMetric(lag.Seconds(), "derive_lag_s")
	// The pipeline's pace: stored and derived. uploads/s alone rewards a
	// deriver that falls behind (its work leaves the timed window).
	b.ReportMetric(float64(uploads)/(wall+lag).Seconds(), "derived/s")
	b.ReportMetric(cpu, "server_cpu_s")
	if dsn != "" {
		time.Sleep(2 * time.Second) // the backends' statistics are flushed when idle
		pg := pgUsage(b, dsn)
		b.ReportMetric(pg.cpu-pg0.cpu, "postgres_cpu_s")
		// Every transaction of the database: the deriver's one per run and
		// autocommitted reads too, so it stays under 1 however well the
		// uploads batch.
		b.ReportMetric(float64(uploads)/float64(pg.commits-pg0.commits), "uploads/commit")
		// Group commits themselves: the transactions that inserted runs
		// (a row's xmin; runs are never updated).
		db, err := sql.Open("pgx", dsn)
		require.NoError(b, err)
		var rows, txs int64
		require.NoError(b, db.QueryRow(`SELECT count(*), count(DISTINCT xmin::text) FROM runs`).Scan(&rows, &txs))
		db.Close()
		b.ReportMetric(float64(rows)/float64(txs), "uploads/group_commit")
	}
	load, _ := os.ReadFile("/proc/loadavg")
	b.Logf("%d uploads of %d bytes from %d clients in %v (load %s)", uploads, len(base), benchClients, wall.Round(time.Millisecond), strings.Join(strings.Fields(string(load))[:3], " "))
}

func fixtureDoc(tb testing.TB) []byte {
	b, err := os.ReadFile(filepath.Join("..", "..", "report", "testdata", "document.json"))
	require.NoError(tb, err)
	return bytes.ReplaceAll(b, []byte("m-0123456789abcdef"), []byte("bench"))
}

// surveyStream is a valid JSON Lines run of about size bytes whose
// records have the survey's probe record shape (survey/record.go).
func surveyStream(size int) []byte {
	b, _ := os.ReadFile(filepath.Join("..", "..", "report", "testdata", "stream.jsonl"))
	lines := strings.SplitAfter(strings.ReplaceAll(string(b), "m-0123456789abcdef", "bench"), "\n")
	var buf bytes.Buffer
	buf.WriteString(lines[0])
	n := 0
	for buf.Len() < size {
		buf.WriteString(surveyProbeRecord(n))
		n++
	}
	buf.WriteString(`{"type":"trailer","run_id":"0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10","status":"ok","records":` + strconv.Itoa(n) + `,"finished_at":"2026-11-22T10:00:03.000000123Z"}` + "\n")
	return buf.Bytes()
}

// surveyProbeRecord is the n-th survey probe record (one line).
func surveyProbeRecord(n int) string {
	return fmt.Sprintf(`{"type":"probe","probe_path":"wlan0","resolve_path":"wwan0","resolve_paths":["wwan0","wlan0"],"address":"198.18.%d.%d","port":443,"domains":["d%d.example"],"method":"tcp-syn","sent":10,"received":10,"rtts_ms":[%d.125,%d.25,%d.5,%d.75,%d.875,%d.125,%d.25,%d.5,%d.75,%d.875],"rtt_ms":%d.5,"answer":"syn-ack","answer_counts":{"syn-ack":10},"responsive":true,"bytes":1200,"valid":true}`+"\n",
		n/250%250, n%250, n, n%97, n%89, n%83, n%79, n%73, n%71, n%67, n%61, n%59, n%53, n%97)
}

// pgUse is what a PostgreSQL server has done so far: the CPU seconds of
// its processes (the postmaster, its live children and those it reaped)
// and the transactions committed in the benchmark's database.
type pgUse struct {
	cpu     float64
	commits int64
}

func pgUsage(b *testing.B, dsn string) pgUse {
	db, err := sql.Open("pgx", dsn)
	require.NoError(b, err)
	defer db.Close()
	var u pgUse
	var backend int
	require.NoError(b, db.QueryRow(`SELECT pg_backend_pid(), xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&backend, &u.commits))
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", backend))
	require.NoError(b, err)
	postmaster := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+2:]))[1]
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		st, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+2:]))
		pid := strings.Split(p, "/")[2]
		if f[1] != postmaster && pid != postmaster {
			continue
		}
		n := 2 // utime, stime
		if pid == postmaster {
			n = 4 // and of the reaped children
		}
		for _, v := range f[11 : 11+n] {
			t, _ := strconv.ParseFloat(v, 64)
			u.cpu += t / 100 // USER_HZ
		}
	}
	return u
}

// serverCPU is the collector's user+system CPU time in seconds.
func serverCPU(c *collector) float64 {
	c.mu.Lock()
	pid := c.cmd.Process.Pid
	c.mu.Unlock()
	return processCPU(pid)
}

// processCPU is a process's user+system CPU time in seconds.
func processCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// peakRSSMB is the collector's VmHWM.
func peakRSSMB(c *collector) float64 {
	c.mu.Lock()
	pid := c.cmd.Process.Pid
	c.mu.Unlock()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// BenchmarkProbeUploadCompression: the probe side on a 10K-domain survey
// sized file (40 MB of survey-shaped JSON Lines): upload time, the
// uploader's CPU and the compression ratio with zstd, gzip and none.
func BenchmarkProbeUploadCompression(b *testing.B) {
	c := newCollector(b, filepath.Join(b.TempDir(), "data"), "")
	p := newProbe(b, c, "bench", "") // surveyStream's probe_id
	c.start()
	body := surveyStream(40 << 20)
	tokB, err := os.ReadFile(filepath.Join(p.dir, "token"))
	require.NoError(b, err)
	pin, err := certs.ParseFingerprint(c.pin)
	require.NoError(b, err)
	for _, comp := range []string{upload.CompressZstd, upload.CompressGzip, upload.CompressNone} {
		b.Run(comp, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				sp, err := upload.OpenSpool(filepath.Join(b.TempDir(), "spool"), upload.Quota{})
				require.NoError(b, err)
				id := uuid.NewString()
				spoolFixture(b, sp.Dir(), id, bytes.ReplaceAll(body, []byte("0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10"), []byte(id)))
				var wire atomic.Int64
				tr := upload.Transport(&pin, nil)
				cl := &upload.Client{URL: c.url, Token: strings.TrimSpace(string(tokB)), Compression: comp, Backoff: upload.DefaultBackoff(),
					HTTP: &http.Client{Transport: countingRT{tr, &wire}}}
				var r0, r1 syscall.Rusage
				syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
				t0 := time.Now()
				b.StartTimer()
				res, err := cl.Drain(context.Background(), sp)
				b.StopTimer()
				wall := time.Since(t0)
				syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
				require.NoError(b, err)
				left, _ := sp.Pending()
				require.Equal(b, 1, res.Uploaded, "%+v, %d left in %s", res, len(left), sp.Dir())
				cpu := time.Duration(r1.Utime.Nano()+r1.Stime.Nano()-r0.Utime.Nano()-r0.Stime.Nano()) * time.Nanosecond
				b.ReportMetric(wall.Seconds(), "upload_s")
				b.ReportMetric(cpu.Seconds(), "client_cpu_s")
				b.ReportMetric(float64(len(body))/float64(wire.Load()), "ratio")
				b.ReportMetric(float64(wire.Load())/1e6, "wire_MB")
				b.ReportMetric(peakRSSMB(c), "server_peak_RSS_MB") // one 40 MB stream at a time
				b.StartTimer()
			}
		})
	}
}

// countingRT counts request body bytes as sent (compressed).
type countingRT struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body = &countingBody{r.Body, c.n}
	}
	return c.rt.RoundTrip(r)
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// BenchmarkIngestPeakRSS: one survey stream at a time, of growing size, to
// a fresh collector each; the collector's peak RSS (VmHWM) once the
// upload is receipted and its derived rows are in, so streaming ingest
// and the streamed derived tables show as a constant, not as the size.
func BenchmarkIngestPeakRSS(b *testing.B) {
	for _, mb := range []int{10, 40, 120} {
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				data := filepath.Join(b.TempDir(), "data")
				c := newCollector(b, data, "")
				p := newProbe(b, c, "bench", "")
				c.start()
				body := surveyStream(mb << 20)
				id := uuid.NewString()
				spoolFixture(b, p.spool, id, bytes.ReplaceAll(body, []byte("0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10"), []byte(id)))
				records := bytes.Count(body, []byte(`"type":"probe"`))
				b.StartTimer()
				code, _, err := p.uploadOnce(context.Background())
				require.NoError(b, err)
				require.Zero(b, code)
				// The derived rows are filled after the receipt: wait for them.
				db, err := sql.Open("sqlite", filepath.Join(data, "collect.db"))
				require.NoError(b, err)
				deadline := time.Now().Add(3 * time.Minute)
				for n := 0; n < records; time.Sleep(200 * time.Millisecond) {
					require.NoError(b, db.QueryRow(`SELECT COUNT(*) FROM survey_probes`).Scan(&n))
					require.True(b, time.Now().Before(deadline), "derived rows: %d of %d", n, records)
				}
				b.StopTimer()
				db.Close()
				b.ReportMetric(peakRSSMB(c), "server_peak_RSS_MB")
				b.ReportMetric(serverCPU(c), "server_cpu_s")
				c.kill()
				b.StartTimer()
			}
		})
	}
}
