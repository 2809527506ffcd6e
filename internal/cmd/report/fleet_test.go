package report

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/rawstore"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/cmdutil"
	"github.com/mptester/mptester/internal/pgtest"
	"github.com/mptester/mptester/internal/s3test"
	"github.com/mptester/mptester/report/analysis"
)

// headerLine is report/testdata's 1.1 header, its ids, command and start
// replaced per run.
func headerLine(t testing.TB) string {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "report", "testdata", "stream.jsonl"))
	require.NoError(t, err)
	return strings.SplitN(string(b), "\n", 2)[0]
}

// planted is one generated run and what the fleet views must show for it.
type planted struct {
	id, probe, command string
	start              time.Time
	body               []byte
	tests, ok          int
	rtt                float64 // median, ms
	hasRTT             bool
}

// genRun writes a run stream: tests ping tests (ok of them succeed, each
// with pings delays), or a survey of tests targets (ok responsive). The
// truth is computed here independently of the report's code.
func genRun(hdr string, rng *rand.Rand, probe, command string, start time.Time, tests, ok, pings int) planted {
	p := planted{id: uuid.NewString(), probe: probe, command: command, start: start.UTC(), tests: tests, ok: ok}
	h := strings.Replace(hdr, "0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10", p.id, 1)
	h = strings.Replace(h, `"m-0123456789abcdef"`, `"`+probe+`"`, 1)
	h = strings.Replace(h, `"command":"survey"`, `"command":"`+command+`"`, 1)
	h = strings.Replace(h, `"2026-11-22T10:00:00.500000000Z"`, `"`+p.start.Format(nanoLayout)+`"`, 1)
	var b bytes.Buffer
	b.WriteString(h + "\n")
	var all []float64
	n := 0
	for i := range tests {
		n++
		if command == "survey" {
			rtts := make([]float64, 3)
			for j := range rtts {
				rtts[j] = float64(int(10+rng.Float64()*90*1000)) / 1000
			}
			resp := i < ok
			if resp {
				s := slices.Clone(rtts)
				sort.Float64s(s)
				all = append(all, s[1])
			} else {
				rtts = nil
			}
			r, _ := json.Marshal(map[string]any{"type": "probe", "probe_path": "wlan0", "resolve_paths": []string{"wlan0"},
				"address": fmt.Sprintf("198.18.%d.%d", i/250, i%250+1), "rtts_ms": rtts, "responsive": resp, "valid": true})
			b.Write(append(r, '\n'))
			continue
		}
		status := "success"
		var res map[string]any
		if i < ok {
			d := make([]int64, pings)
			for j := range d {
				d[j] = int64(5e6 + rng.IntN(50e6))
				all = append(all, float64(d[j])/1e6)
			}
			res = map[string]any{"delays_ns": d}
		} else {
			status = "connection-timeout"
		}
		r, _ := json.Marshal(map[string]any{"type": "pattern_test", "index": i, "status": status, "result": res,
			"config": map[string]any{"pattern": "ping", "transport": "tcp", "path": "wlan0", "family": 4}})
		b.Write(append(r, '\n'))
	}
	fmt.Fprintf(&b, `{"type":"trailer","run_id":"%s","status":"ok","records":%d,"finished_at":"%s"}`+"\n",
		p.id, n, p.start.Add(time.Minute).Format(nanoLayout))
	p.body = b.Bytes()
	if len(all) > 0 {
		sort.Float64s(all)
		m := len(all) / 2
		p.rtt, p.hasRTT = all[m], true
		if len(all)%2 == 0 {
			p.rtt = (all[m-1] + all[m]) / 2
		}
	}
	return p
}

// fleetServer is a real collect server (its HTTP handler) on a store.
type fleetServer struct {
	url, data string
	st        store.Store
	srv       *collect.Server
	tokens    map[string]string
	admin     string
}

func newFleetServer(t *testing.T, dsn, data string, probes []string) *fleetServer {
	ctx := context.Background()
	st, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	f := &fleetServer{data: data, st: st, tokens: map[string]string{}, admin: collect.NewToken()}
	for _, p := range probes {
		f.tokens[p] = collect.NewToken()
		require.NoError(t, st.AddProbe(ctx, p, collect.HashToken(f.tokens[p]), time.Now()))
	}
	require.NoError(t, st.AddAdmin(ctx, "ops", collect.HashToken(f.admin), time.Now()))
	srv, err := collect.New(collect.Config{Store: st, Data: data, Limits: collect.DefaultLimits()})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	f.url, f.srv = hs.URL, srv
	return f
}

func (f *fleetServer) upload(t *testing.T, p planted) {
	req, err := http.NewRequest(http.MethodPut, f.url+"/v1/runs/"+p.id, bytes.NewReader(p.body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+f.tokens[p.probe])
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s: %s", p.id, body)
}

// plantFleet uploads 3 probes x 3 days x 2 pattern runs plus one survey a
// probe on day 2 through the server.
func plantFleet(t *testing.T, f *fleetServer) []planted {
	hdr := headerLine(t)
	rng := rand.New(rand.NewPCG(14, 2))
	day0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var runs []planted
	for pi, probe := range []string{"p1", "p2", "p3"} {
		for d := range 3 {
			for r := range 2 {
				start := day0.Add(time.Duration(d)*24*time.Hour + time.Duration(6+12*r)*time.Hour + time.Duration(pi)*time.Minute)
				runs = append(runs, genRun(hdr, rng, probe, "run", start, 4, 1+(pi+d+r)%4, 5))
			}
		}
		runs = append(runs, genRun(hdr, rng, probe, "survey", day0.Add(36*time.Hour), 40, 30-pi*5, 0))
	}
	for _, p := range runs {
		f.upload(t, p)
	}
	f.rollUp(t)
	return runs
}

// rollUp derives the uploads (the handler-only server has no deriver
// running), which writes the roll-ups.
func (f *fleetServer) rollUp(t *testing.T) {
	_, err := f.srv.ReindexAll(context.Background())
	require.NoError(t, err)
}

func wantSeries(runs []planted, keep func(planted) bool) []string {
	var sel []planted
	for _, p := range runs {
		if keep(p) {
			sel = append(sel, p)
		}
	}
	sort.SliceStable(sel, func(i, j int) bool {
		if sel[i].probe != sel[j].probe {
			return sel[i].probe < sel[j].probe
		}
		return sel[i].start.Before(sel[j].start)
	})
	var rows []string
	for _, p := range sel {
		rtt := ""
		if p.hasRTT {
			rtt = fmt.Sprintf("%.3f", p.rtt)
		}
		rows = append(rows, fmt.Sprintf("%s,%s,%s,%s,ok,%d,%.2f,%s", p.probe, p.start.Format(time.RFC3339), p.id, p.command,
			p.tests, 100*float64(p.ok)/float64(p.tests), rtt))
	}
	return rows
}

func csvRows(t *testing.T, args ...string) []string {
	t.Helper()
	out, errOut, err := execute(t, append([]string{"--format", "csv"}, args...)...)
	require.NoError(t, err, errOut)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	return lines[1:]
}

// testDBReport: runs uploaded through a real collect server are read back
// with --db: the fleet series equal the planted truth run for run, every
// filter chooses exactly its runs, and the pattern tables equal a report
// of the same runs from files (one normaliser).
func testDBReport(t *testing.T, dsn, data string, dbArgs ...string) {
	f := newFleetServer(t, dsn, data, []string{"p1", "p2", "p3"})
	runs := plantFleet(t, f)
	// The planted runs are older than the default window (the last 7 days).
	db := append([]string{"--db", dsn, "--since", "2026-10-01"}, dbArgs...)
	all := func(planted) bool { return true }
	assert.Equal(t, wantSeries(runs, all), csvRows(t, append(db, "--section", "fleet-series")...))
	assert.Equal(t, wantSeries(runs, func(p planted) bool { return p.probe == "p2" }),
		csvRows(t, append(db, "--probe", "p2", "--section", "fleet-series")...))
	assert.Equal(t, wantSeries(runs, func(p planted) bool { return p.command == "survey" }),
		csvRows(t, append(db, "--type", "survey", "--section", "fleet-series")...))
	day1, day2 := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)
	assert.Equal(t, wantSeries(runs, func(p planted) bool { return !p.start.Before(day1) && p.start.Before(day2) }),
		csvRows(t, append(db, "--since", "2026-11-02", "--until", "2026-11-03T00:00:00Z", "--section", "fleet-series")...))
	// Per survey cell and run (each planted survey probes one cell,
	// wlan0/wlan0, with the run's targets, answers and median RTT).
	var cells []string
	for _, p := range runs {
		if p.command == "survey" {
			cells = append(cells, fmt.Sprintf("%s,%s,%s,wlan0/wlan0,%d,%.2f,%.3f", p.probe, p.start.Format(time.RFC3339), p.id,
				p.tests, 100*float64(p.ok)/float64(p.tests), p.rtt))
		}
	}
	sort.Strings(cells)
	assert.Equal(t, cells, csvRows(t, append(db, "--section", "fleet-cells")...))
	// The fleet per probe and day, from the roll-ups, equals the raw
	// uploads' exactly (runs, statuses, tests, reachability, survey
	// targets and responsiveness), over the whole window and over one day.
	type pd struct{ probe, day string }
	type agg struct{ runs, tests, ok, stests, sok int }
	truth := func(keep func(planted) bool) []string {
		m := map[pd]*agg{}
		for _, p := range runs {
			if !keep(p) {
				continue
			}
			k := pd{p.probe, p.start.Format(time.DateOnly)}
			if m[k] == nil {
				m[k] = &agg{}
			}
			a := m[k]
			a.runs++
			if p.command == "survey" {
				a.stests += p.tests
				a.sok += p.ok
			} else {
				a.tests += p.tests
				a.ok += p.ok
			}
		}
		var rows []string
		for k, a := range m {
			rows = append(rows, fmt.Sprintf("%s,%s,%d,ok=%d,%d,%.2f,0,%d,%.2f", k.probe, k.day, a.runs, a.runs, a.tests,
				100*float64(a.ok)/float64(a.tests), a.stests, 100*float64(a.sok)/float64(max(a.stests, 1))))
		}
		sort.Strings(rows)
		return rows
	}
	fromRollups := func(args ...string) []string {
		var rows []string
		for _, r := range csvRows(t, append(append(slices.Clone(db), args...), "--section", "fleet-probe-buckets")...) {
			c := strings.Split(r, ",")
			if c[9] == "0" {
				c[10] = "0.00" // no survey that day: the truth's share of nothing
			}
			rows = append(rows, strings.Join(append(c[:7:7], c[9], c[10]), ","))
		}
		sort.Strings(rows)
		return rows
	}
	assert.Equal(t, truth(all), fromRollups())
	assert.Equal(t, truth(func(p planted) bool { return p.probe == "p2" }), fromRollups("--probe", "p2"))
	assert.Equal(t, truth(func(p planted) bool { return !p.start.Before(day1) && p.start.Before(day2) }),
		fromRollups("--since", "2026-11-02", "--until", "2026-11-03"))
	win := csvRows(t, append(db, "--until", "2026-11-03", "--section", "fleet-window")...)
	require.Len(t, win, 1)
	assert.True(t, strings.HasPrefix(win[0], "2026-10-01T00:00:00Z,2026-11-03T00:00:00Z,day,all,"), win[0])
	prov := csvRows(t, append(db, "--probe", "p2", "--section", "provenance")...)
	assert.Contains(t, strings.Join(prov, "\n"), "filters,probe=p2 since=2026-10-01T00:00:00Z until=")
	assert.Contains(t, prov, "inputs,7")

	// The fleet figures are drawn (per probe: three probes, three series).
	svg := t.TempDir()
	r := readJSON(t, append(db, "--svg", svg)...)
	for _, name := range []string{"fleet-runs", "fleet-reachability", "fleet-rtt", "fleet-cell-reachability", "fleet-cell-rtt"} {
		i := slices.IndexFunc(r.Figures, func(f analysis.Figure) bool { return f.Name == name })
		require.GreaterOrEqual(t, i, 0, name)
		assert.Len(t, r.Figures[i].Series, 3, name)
		_, err := os.Stat(filepath.Join(svg, name+".svg"))
		assert.NoError(t, err)
	}

	// The same runs as files give the same pattern and survey tables.
	dir := t.TempDir()
	var files []string
	for _, p := range runs {
		fn := filepath.Join(dir, p.id+".jsonl")
		require.NoError(t, os.WriteFile(fn, p.body, 0o644))
		files = append(files, fn)
	}
	for _, sec := range []string{"pattern-metrics", "pattern-status", "unresponsive", "rtt"} {
		assert.Equal(t, csvRows(t, append(files, "--section", sec)...), csvRows(t, append(db, "--section", sec)...), sec)
	}
	// A raw upload changed after upload is named, exit 2. Small uploads
	// are kept in the index (raw_inline), larger ones as files.
	driver := "sqlite"
	if strings.HasPrefix(dsn, "postgres") {
		driver = "pgx"
	}
	sdb, err := sql.Open(driver, dsn)
	require.NoError(t, err)
	defer sdb.Close()
	var id string
	var b []byte
	require.NoError(t, sdb.QueryRow(`SELECT run_id, body FROM raw_inline ORDER BY run_id LIMIT 1`).Scan(&id, &b))
	b = bytes.Replace(b, []byte(`"status":"ok"`), []byte(`"status":"ko"`), 1)
	q := `UPDATE raw_inline SET body = ? WHERE run_id = ?`
	if driver == "pgx" {
		q = `UPDATE raw_inline SET body = $1 WHERE run_id = $2`
	}
	_, err = sdb.Exec(q, b, id)
	require.NoError(t, err)
	// Skipped, not failing the fleet's report, and said so.
	out, errOut, err := execute(t, append(db, "--section", "provenance")...)
	require.NoError(t, err)
	assert.Contains(t, errOut, "warning: run "+id+" skipped")
	assert.Contains(t, errOut, "the file changed after upload")
	assert.Contains(t, out, "skipped")
	assert.Contains(t, out, id)
}

func TestDBReportSQLite(t *testing.T) {
	dir := t.TempDir()
	testDBReport(t, filepath.Join(dir, "collect.db"), dir)
}

// TestDBReportPostgres: the same against a real PostgreSQL server (a
// throwaway one, as collect's store suite starts it).
func TestDBReportPostgres(t *testing.T) {
	dsn := pgtest.Database(t, pgtest.Server(t))
	data := t.TempDir()
	testDBReport(t, dsn, data, "--data", data)
}

func TestDBBadFlags(t *testing.T) {
	dir := t.TempDir()
	dsn := filepath.Join(dir, "collect.db")
	newFleetServer(t, dsn, dir, nil)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--probe", "p1", inputs[0]}, "--probe filters a collect store"},
		{[]string{"--db", dsn, inputs[0]}, "give it without files"},
		{[]string{"--db", filepath.Join(dir, "nope.db")}, "no such SQLite file"},
		{[]string{"--db", dsn, "--since", "yesterday"}, "--since \"yesterday\""},
		{[]string{"--db", dsn, "--type", "mobile"}, "--type \"mobile\""},
		{[]string{"--db", dsn, "--since", "2026-11-02", "--until", "2026-11-01"}, "--until must be after --since"},
		{[]string{"--db", "postgres://x@127.0.0.1:1/db"}, "give --data"},
		{nil, "give result files, or --db DSN"},
	} {
		_, _, err := execute(t, tc.args...)
		require.Error(t, err, tc.args)
		assert.ErrorContains(t, err, tc.want)
		assert.Equal(t, cmdutil.ExitUsage, cmdutil.ExitCode(err), tc.args)
	}
	_, err := os.Stat(filepath.Join(dir, "nope.db"))
	assert.True(t, os.IsNotExist(err), "a mistyped --db is not created")
}

// nanoLayout is the schema's time format (nine fraction digits, UTC).
const nanoLayout = "2006-01-02T15:04:05.000000000Z"

// TestDBUnparsedUploadIsListed: an upload the server kept raw but could not
// parse (a newer schema major: 202, status unparsed) is listed in the
// inputs table as not read (the window holds it by when it was stored: it
// has no start time), and the rest is reported (the fleet views leave it
// out).
func TestDBUnparsedUploadIsListed(t *testing.T) {
	dir := t.TempDir()
	dsn := filepath.Join(dir, "collect.db")
	f := newFleetServer(t, dsn, dir, []string{"p1"})
	ok := genRun(headerLine(t), rand.New(rand.NewPCG(1, 1)), "p1", "run", time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC), 4, 3, 5)
	f.upload(t, ok)
	id := uuid.NewString()
	req, err := http.NewRequest(http.MethodPut, f.url+"/v1/runs/"+id,
		strings.NewReader(`{"type":"header","schema_version":"9.0","run_id":"`+id+`","probe_id":"p1","command":"run"}`+"\n"))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+f.tokens["p1"])
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	// Its start is unknown: a window holds it by when it was stored (now).
	rows := csvRows(t, "--db", dsn, "--since", "2026-10-01", "--section", "inputs")
	require.Len(t, rows, 2)
	assert.Contains(t, rows[1], "db:"+id)
	assert.Contains(t, rows[1], "not read: the server could not parse this upload")
	// Its start is unknown: the fleet views hold the run that was read.
	assert.Equal(t, wantSeries([]planted{ok}, func(planted) bool { return true }), csvRows(t, "--db", dsn, "--since", "2026-10-01", "--section", "fleet-series"))
}

// TestDBReportPostgresS3: a collector on a real PostgreSQL keeps every
// upload as an object in a real S3 server (SeaweedFS, with an identity:
// credentials from the environment, as the AWS tools take them). `report
// --db postgres://… --raw s3://…` reads them with collect's flags and
// gives the server's own /v1/report for the same runs, table for table;
// without --raw (the uploads are not in --data) it fails naming a run.
func TestDBReportPostgresS3(t *testing.T) {
	dsn := pgtest.Database(t, pgtest.Server(t))
	dir := t.TempDir()
	conf := filepath.Join(dir, "s3.json")
	require.NoError(t, os.WriteFile(conf, []byte(`{"identities":[{"name":"collect",
		"credentials":[{"accessKey":"AKIDREPORTTEST","secretKey":"report-secret-for-tests"}],
		"actions":["Admin","Read","Write","List"]}]}`), 0o600))
	srv := s3test.Start(t, conf)
	srv.Bucket(t, "fleet", "AKIDREPORTTEST", "report-secret-for-tests")
	for _, k := range []string{"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDREPORTTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "report-secret-for-tests")
	t.Setenv("AWS_REGION", "us-east-1")
	flags := rawstore.Flags{Raw: "s3://fleet/collect", S3: rawstore.S3Config{Endpoint: srv.Endpoint, PathStyle: true}}
	cfg, err := flags.Config(filepath.Join(dir, "spool"))
	require.NoError(t, err)
	raw, err := rawstore.NewS3(*cfg)
	require.NoError(t, err)

	ctx := context.Background()
	st, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	f := &fleetServer{st: st, tokens: map[string]string{}, admin: collect.NewToken()}
	for _, p := range []string{"p1", "p2", "p3"} {
		f.tokens[p] = collect.NewToken()
		require.NoError(t, st.AddProbe(ctx, p, collect.HashToken(f.tokens[p]), time.Now()))
	}
	require.NoError(t, st.AddAdmin(ctx, "ops", collect.HashToken(f.admin), time.Now()))
	cs, err := collect.New(collect.Config{Store: st, Data: t.TempDir(), Raw: raw, InlineMax: -1, Limits: collect.DefaultLimits()})
	require.NoError(t, err)
	hs := httptest.NewServer(cs.Handler())
	t.Cleanup(hs.Close)
	f.url, f.srv = hs.URL, cs
	runs := plantFleet(t, f)
	n := 0
	require.NoError(t, raw.List(ctx, func(rawstore.Info) error { n++; return nil }))
	require.Len(t, runs, n, "every upload is an object in the bucket")

	get := func(probe string) jsonReport {
		q := "format=json"
		if probe != "" {
			q += "&probe=" + probe
		} else {
			q += "&since=2026-11-02&until=2026-11-03" // one day of the fleet: the exact report
		}
		req, err := http.NewRequest(http.MethodGet, f.url+"/v1/report?"+q, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+f.admin)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		var r jsonReport
		require.NoError(t, json.Unmarshal(body, &r))
		return r
	}
	args := []string{"--db", dsn, "--raw", "s3://fleet/collect", "--s3-endpoint", srv.Endpoint, "--s3-path-style"}
	for _, probe := range []string{"", "p2"} {
		cli := args
		if probe != "" {
			// The server's probe report is all its runs: the same window.
			cli = append(slices.Clone(args), "--probe", probe, "--since", "2026-10-01")
		} else {
			cli = append(slices.Clone(args), "--since", "2026-11-02", "--until", "2026-11-03")
		}
		want, got := get(probe), readJSON(t, cli...)
		require.NotEmpty(t, want.Tables)
		// Provenance names the source (collect server / db postgres); the
		// fleet's aggregates come from the roll-ups in report --db (the
		// server's exact path reads them from the runs); the rest is the
		// same report.
		rolled := map[string]bool{"provenance": true, "fleet-runs": true, "fleet-reachability": true, "fleet-rtt": true}
		keep := func(r jsonReport) map[string]any {
			m := map[string]any{}
			for _, tb := range r.Tables {
				if !rolled[tb.Name] && !strings.HasPrefix(tb.Name, "fleet-window") && !strings.HasPrefix(tb.Name, "fleet-buckets") &&
					!strings.HasPrefix(tb.Name, "fleet-probe-") && tb.Name != "fleet-figures" {
					m[tb.Name] = tb
				}
			}
			for _, fg := range r.Figures {
				if !rolled[fg.Name] {
					m["figure "+fg.Name] = fg
				}
			}
			return m
		}
		assert.Equal(t, keep(want), keep(got), "probe %q", probe)
	}
	assert.Equal(t, wantSeries(runs, func(planted) bool { return true }), csvRows(t, append(args, "--since", "2026-10-01", "--section", "fleet-series")...))

	// The uploads are not in a data directory.
	_, _, err = execute(t, "--db", dsn, "--since", "2026-10-01", "--data", t.TempDir())
	require.Error(t, err)
	_, _, err = execute(t, append(args, "--data", dir)...)
	assert.ErrorContains(t, err, "give it without --data")
	assert.Equal(t, cmdutil.ExitUsage, cmdutil.ExitCode(err))
}

// TestDBReportDefaultWindow: without --since/--until report --db covers
// the last 7 UTC days, as the fleet page, and says so; a run of 10 days
// ago is left out of every section, and is in with --since.
func TestDBReportDefaultWindow(t *testing.T) {
	dir := t.TempDir()
	dsn := filepath.Join(dir, "collect.db")
	f := newFleetServer(t, dsn, dir, []string{"p1"})
	rng := rand.New(rand.NewPCG(7, 7))
	now := time.Now().UTC()
	old := genRun(headerLine(t), rng, "p1", "run", now.Add(-10*24*time.Hour), 4, 3, 5)
	recent := genRun(headerLine(t), rng, "p1", "run", now.Add(-time.Hour), 4, 2, 5)
	f.upload(t, old)
	f.upload(t, recent)
	f.rollUp(t)
	one := func(planted) bool { return true }
	assert.Equal(t, wantSeries([]planted{recent}, one), csvRows(t, "--db", dsn, "--section", "fleet-series"))
	runsIn := func(args ...string) string {
		rows := csvRows(t, append([]string{"--db", dsn, "--section", "fleet-probe-window"}, args...)...)
		require.Len(t, rows, 1)
		return strings.Split(rows[0], ",")[1]
	}
	assert.Equal(t, "1", runsIn())
	win := csvRows(t, "--db", dsn, "--section", "fleet-window")
	require.Len(t, win, 1)
	since := now.Truncate(24 * time.Hour).Add(-6 * 24 * time.Hour)
	assert.True(t, strings.HasPrefix(win[0], since.Format(time.RFC3339)+","+since.Add(7*24*time.Hour).Format(time.RFC3339)+",day,"), win[0])
	prov := strings.Join(csvRows(t, "--db", dsn, "--section", "provenance"), "\n")
	assert.Contains(t, prov, "since="+since.Format(time.RFC3339))
	// With --since (a span back, as the fleet page takes it) both are in.
	assert.Equal(t, wantSeries([]planted{old, recent}, one), csvRows(t, "--db", dsn, "--since", "14d", "--section", "fleet-series"))
	assert.Equal(t, "2", runsIn("--since", "14d"))
}
