//go:build linux && !race

package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/internal/pgtest"
	"github.com/mptester/mptester/internal/s3test"
	"github.com/mptester/mptester/upload"
)

// The fault schedule of TestFaultsPostgresAndS3, from the start of the
// load: PostgreSQL is down 5-35 s, SeaweedFS 20-50 s (both 20-35 s).
const (
	faultProbes  = 20
	faultPGStop  = 5 * time.Second
	faultS3Stop  = 20 * time.Second
	faultDown    = 30 * time.Second
	faultHealMax = 60 * time.Second
	faultTail    = 5 * time.Second // load after the last recovery
)

// TestFaultsPostgresAndS3 is the fleet fault test. 20 probes keep
// measuring and uploading (`mptester upload` processes; every fifth
// result is over the inline bound, so its raw upload is an S3 object)
// while PostgreSQL is stopped for 30 s and SeaweedFS for 30 s; the
// collector is never restarted. After recovery every acknowledged run has
// its derived rows within 60 s, `collect export --strict` counts equal
// the store's and the planted truth, every valid result is stored once,
// every invalid one is in its probe's rejected/, and no upload pass that
// refused an invalid result left a valid one behind it unsent.
func TestFaultsPostgresAndS3(t *testing.T) {
	if testing.Short() {
		t.Skip("real-process fault test")
	}
	pg := pgtest.Controlled(t)
	dsn := pgtest.Database(t, pg.DSN)
	s3 := s3test.Start(t, "")
	s3.Bucket(t, "fleet", "", "")
	raw := []string{"--raw", "s3://fleet/collect", "--s3-endpoint", s3.Endpoint, "--s3-region", "us-east-1", "--s3-path-style"}
	c := newCollector(t, filepath.Join(t.TempDir(), "data"), dsn, raw...)
	var ps []*probeEnv
	for i := 0; i < faultProbes; i++ {
		ps = append(ps, newProbe(t, c, fmt.Sprintf("f%02d", i), ""))
	}
	c.start()
	c.mu.Lock()
	pid := c.cmd.Process.Pid
	c.mu.Unlock()

	var mu sync.Mutex
	valid := map[string]int{}     // run id -> survey probe records planted
	poison := map[string]string{} // run id -> probe
	var passes []faultPass
	var errs []error
	fail := func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }
	// pass runs one upload pass of p and keeps it; false when it failed.
	pass := func(ctx context.Context, p *probeEnv) (faultPass, bool) {
		ps, err := runPass(ctx, p)
		if err != nil {
			fail(err)
			return ps, false
		}
		mu.Lock()
		passes = append(passes, ps)
		mu.Unlock()
		return ps, true
	}

	start := time.Now()
	loadEnd := start.Add(faultS3Stop + faultDown + faultTail)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			second := false
			for k := 0; time.Now().Before(loadEnd) && ctx.Err() == nil; k++ {
				// One new result per pass; a probe in four has an invalid
				// one oldest in its spool with two valid ones behind it,
				// and another spooled during the outages.
				n := 1
				late := !second && time.Since(start) > faultPGStop+time.Second
				if i%4 == 0 && (k == 0 || late) {
					n = 3
					second = second || late
				}
				for j := 0; j < n; j++ {
					id := uuid.NewString()
					var body []byte
					if n == 3 && j == 0 {
						body = poisonRun(id, p.name, k == 0)
						mu.Lock()
						poison[id] = p.name
						mu.Unlock()
					} else {
						records := 5 + rand.IntN(20)
						if k%5 == 2 {
							records = 500 // ~170 kB: an S3 object
						}
						body = surveyRun(id, p.name, records)
						mu.Lock()
						valid[id] = records
						mu.Unlock()
					}
					if err := spoolBody(p.spool, id, body); err != nil {
						fail(err)
						return
					}
				}
				if _, ok := pass(ctx, p); !ok {
					return
				}
				time.Sleep(200*time.Millisecond + rand.N(500*time.Millisecond))
			}
		}()
	}

	// The deriver's backlog (/healthz), polled through the faults.
	pin, err := certs.ParseFingerprint(c.pin)
	require.NoError(t, err)
	hc := &http.Client{Transport: upload.Transport(&pin, nil), Timeout: 10 * time.Second}
	var peak, atRecovery atomic.Int64
	pollDone := make(chan struct{})
	stopPoll := make(chan struct{})
	go func() {
		defer close(pollDone)
		for {
			select {
			case <-stopPoll:
				return
			case <-time.After(250 * time.Millisecond):
			}
			if n := backlog(hc, c.url); n > peak.Load() {
				peak.Store(n)
			}
		}
	}()

	at := func(d time.Duration) { time.Sleep(time.Until(start.Add(d))) }
	at(faultPGStop)
	pg.Stop(t)
	t.Logf("PostgreSQL stopped at %s", time.Since(start).Round(time.Millisecond))
	at(faultS3Stop)
	sigterm := time.Since(start)
	s3.Stop()
	t.Logf("SeaweedFS sent SIGTERM at %s, exited by %s", sigterm.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	at(faultPGStop + faultDown)
	pg.Start(t)
	t.Logf("PostgreSQL started at %s", time.Since(start).Round(time.Millisecond))
	at(faultS3Stop + faultDown)
	s3.Restart(t)
	recovered := time.Now()
	atRecovery.Store(backlog(hc, c.url))
	t.Logf("SeaweedFS answering at %s; derive backlog %d (peak %d)", recovered.Sub(start).Round(time.Millisecond), atRecovery.Load(), peak.Load())
	wg.Wait()
	require.Empty(t, errs)

	// Drain: every probe until its spool is empty.
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				ps, ok := pass(ctx, p)
				if !ok {
					return
				}
				if len(ps.before) == len(ps.uploaded)+len(ps.rejected) {
					return
				}
				time.Sleep(300 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	require.Empty(t, errs)
	require.NoError(t, ctx.Err(), "probes did not drain")
	drained := time.Now()
	close(stopPoll)
	<-pollDone

	// Healed without a restart: no run left without derived rows.
	st, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	var healed time.Duration
	for {
		under, err := allUnderived(ctx, st)
		if err == nil && under == 0 {
			healed = time.Since(recovered)
			break
		}
		if time.Since(recovered) > faultHealMax {
			t.Fatalf("%d runs still without derived rows %s after recovery (err %v)", under, faultHealMax, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	c.mu.Lock()
	require.NotNil(t, c.cmd, "the collector still runs")
	assert.Equal(t, pid, c.cmd.Process.Pid, "never restarted")
	c.mu.Unlock()

	// Every valid result stored once, no invalid one; each invalid one
	// in its probe's rejected/.
	runs := map[string]store.Run{}
	var after int64
	for {
		page, err := st.ListRuns(ctx, store.RunFilter{After: after})
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			require.NotContains(t, runs, r.RunID, "one row per run")
			runs[r.RunID] = r
		}
		after = page[len(page)-1].Seq
	}
	records := 0
	for id, n := range valid {
		assert.Contains(t, runs, id, "valid result stored")
		records += n
	}
	assert.Len(t, runs, len(valid), "nothing but the valid results stored")
	rejected := map[string]int{}
	for _, p := range ps {
		n, rej := pending(t, p.spool)
		assert.Zero(t, n, "%s drained", p.name)
		rejected[p.name] = rej
	}
	want := map[string]int{}
	for _, name := range poison {
		want[name]++
	}
	for _, p := range ps {
		assert.Equal(t, want[p.name], rejected[p.name], "%s: its invalid results, and only those, in rejected/", p.name)
	}

	// No valid result waited behind an invalid one: a pass that refused
	// an invalid result and met no failure sent every valid result that
	// was pending when it started.
	refusals, checked := 0, 0
	for _, ps := range passes {
		if len(ps.rejected) == 0 {
			continue
		}
		refusals++
		for _, id := range ps.rejected {
			assert.Contains(t, poison, id, "only invalid results refused")
		}
		if ps.failed {
			continue
		}
		checked++
		for _, id := range ps.before {
			if _, ok := valid[id]; ok && !ps.uploaded[id] {
				t.Errorf("%s: valid result %s pending behind refused %v was not sent in that pass:\n%.2000s", ps.probe, id, ps.rejected, ps.log)
			}
		}
	}
	assert.Equal(t, len(poison), refusals, "each invalid result refused in one pass")
	assert.Positive(t, checked, "passes that refused an invalid result with the stores up")

	// collect export: counts equal the store's and the planted truth.
	out := t.TempDir()
	args := c.args(append([]string{"export", "--strict", "-o", out}, raw...)...)
	b, err := exec.CommandContext(ctx, bin, args...).Output()
	require.NoError(t, err, "%s", b)
	exported := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		path, rows, ok := strings.Cut(line, "\t")
		n, err := strconv.Atoi(strings.TrimSuffix(rows, " rows"))
		require.True(t, ok && err == nil, "export line %q", line)
		exported[filepath.Base(filepath.Dir(path))] += n
	}
	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer db.Close()
	for table, truth := range map[string]int{"runs": len(valid), "survey_probes": records, "probes": faultProbes} {
		var n int
		require.NoError(t, db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n))
		assert.Equal(t, truth, n, "store's %s", table)
		assert.Equal(t, n, exported[table], "exported %s equal the store's", table)
	}

	var s3runs int
	for _, r := range runs {
		if r.RawPath != store.RawInline {
			s3runs++
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("%d valid runs (%d as S3 objects, %d survey records), %d invalid, %d upload passes; drained %s after recovery, "+
		"derived rows complete %s after recovery; derive backlog peak %d (load %s)", len(valid), s3runs, records, len(poison), len(passes),
		drained.Sub(recovered).Round(time.Millisecond), healed.Round(time.Millisecond), peak.Load(), strings.Join(strings.Fields(string(load))[:3], " "))
}

// backlog is the collector's derive_backlog (/healthz), -1 if unknown.
func backlog(hc *http.Client, url string) int64 {
	resp, err := hc.Get(url + "/healthz")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var h struct {
		Backlog string `json:"derive_backlog"`
	}
	if json.NewDecoder(resp.Body).Decode(&h) != nil {
		return -1
	}
	n, err := strconv.ParseInt(h.Backlog, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// faultPass is one `mptester upload` process of a probe.
type faultPass struct {
	probe    string
	before   []string // pending when it started
	uploaded map[string]bool
	rejected []string
	failed   bool // some upload failed (store down, network): it may stop early
	log      string
}

var (
	uploadedRE = regexp.MustCompile(`msg=uploaded run_id=([0-9a-f-]{36})`)
	rejectedRE = regexp.MustCompile(`msg="upload rejected[^"]*" run_id=([0-9a-f-]{36})`)
)

// runPass runs `mptester upload` once for p.
func runPass(ctx context.Context, p *probeEnv) (faultPass, error) {
	sp, err := upload.OpenSpool(p.spool, upload.Quota{})
	if err != nil {
		return faultPass{}, err
	}
	items, err := sp.Pending()
	if err != nil {
		return faultPass{}, err
	}
	pass := faultPass{probe: p.name, uploaded: map[string]bool{}}
	for _, it := range items {
		pass.before = append(pass.before, it.RunID)
	}
	b, err := exec.CommandContext(ctx, bin, "upload", "--config", p.config, "--log-level", "info").CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		return pass, err
	}
	pass.log = string(b)
	for _, m := range uploadedRE.FindAllStringSubmatch(pass.log, -1) {
		pass.uploaded[m[1]] = true
	}
	for _, m := range rejectedRE.FindAllStringSubmatch(pass.log, -1) {
		pass.rejected = append(pass.rejected, m[1])
	}
	pass.failed = strings.Contains(pass.log, "upload failed")
	return pass, nil
}

// surveyRun is a valid survey run of n probe records (derived rows:
// n survey_probes).
func surveyRun(id, probe string, n int) []byte {
	var b strings.Builder
	b.WriteString(faultHeader(id, probe))
	for i := 0; i < n; i++ {
		b.WriteString(surveyProbeRecord(i))
	}
	fmt.Fprintf(&b, `{"type":"trailer","run_id":"%s","status":"ok","records":%d,"finished_at":"2026-11-22T10:00:03.000000123Z"}`+"\n", id, n)
	return []byte(b.String())
}

// poisonRun is a run the reports cannot read, as a hostile probe sent
// them: a NUL in a path name (PostgreSQL refused it forever) or a survey
// probe record without probe_path (it broke every fleet view).
func poisonRun(id, probe string, nul bool) []byte {
	h := faultHeader(id, probe)
	rec := surveyProbeRecord(0)
	if nul {
		h = strings.Replace(h, `"name":"wlan0"`, `"name":"wl\u0000an0"`, 1)
	} else {
		rec = `{"type":"probe","address":"198.18.9.1"}` + "\n"
	}
	return []byte(h + rec + fmt.Sprintf(`{"type":"trailer","run_id":"%s","status":"ok","records":1,"finished_at":"2026-11-22T10:00:03.000000123Z"}`+"\n", id))
}

func faultHeader(id, probe string) string {
	b, err := os.ReadFile(filepath.Join("..", "..", "report", "testdata", "stream.jsonl"))
	if err != nil {
		panic(err)
	}
	h, _, _ := strings.Cut(string(b), "\n")
	h = strings.ReplaceAll(h, "0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10", id)
	return strings.ReplaceAll(h, "m-0123456789abcdef", probe) + "\n"
}

// spoolBody spools a result as `run` does.
func spoolBody(dir, id string, body []byte) error {
	sp, err := upload.OpenSpool(dir, upload.Quota{})
	if err != nil {
		return err
	}
	e, err := sp.Create(id, ".jsonl")
	if err != nil {
		return err
	}
	if _, err := e.Write(body); err != nil {
		return err
	}
	return e.Commit()
}

// allUnderived counts the parsed runs without derived rows.
func allUnderived(ctx context.Context, st store.Store) (int, error) {
	n := 0
	var after int64
	for {
		page, err := st.ListUnderived(ctx, after)
		if err != nil || len(page) == 0 {
			return n, err
		}
		n += len(page)
		after = page[len(page)-1].Seq
	}
}
