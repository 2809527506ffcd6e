package export_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect/export"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/duckdbtest"
	"github.com/mptester/mptester/internal/pgtest"
)

// planted is a small fleet: two probes over three days, each day a survey
// (cells, probe records), a pattern run (tests, per-path bytes) and, on
// one day, a mobile run. Values are exact in binary so sums compare exactly.
func plant(t *testing.T, st store.Store) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 1, 23, 30, 0, 0, time.UTC)
	for _, p := range []string{"pi1", "pi2"} {
		require.NoError(t, st.AddProbe(ctx, p, "hash-"+p, t0))
	}
	n := 0
	for d := 0; d < 3; d++ {
		for pi, p := range []string{"pi1", "pi2"} {
			for _, cmd := range []string{"survey", "run"} {
				n++
				id := fmt.Sprintf("00000000-0000-0000-0000-%012d", n)
				start := t0.Add(time.Duration(d)*24*time.Hour + time.Duration(pi)*time.Hour) // pi2 starts past midnight
				r := store.Run{RunID: id, ProbeID: p, Command: cmd, SchemaVersion: "1.0", Status: "ok", Parsed: true,
					StartedAt: start, FinishedAt: start.Add(90 * time.Second), Records: int64(n), Bytes: int64(1000 * n),
					SHA256: fmt.Sprintf("%064d", n), RawPath: store.RawInline, Raw: []byte("x"), ContentType: "application/x-ndjson", StoredAt: start}
				_, o, err := st.PutRun(ctx, r, store.Report{Probe: p, Seen: start})
				require.NoError(t, err)
				require.Equal(t, store.Stored, o)
				var dv store.Derived
				if cmd == "survey" {
					for c := 0; c < 4; c++ {
						dv.Cells = append(dv.Cells, store.SurveyCell{ProbePath: "p" + strconv.Itoa(c), ResolvePath: "r", Targets: 100,
							Responsive: int64(90 - c), Unresponsive: int64(10 + c), UnresponsivePct: float64(10+c) / 100,
							RTTP50ms: 10.5 + float64(c+n), RTTMeanms: 12.25 * float64(c+1)})
					}
					for k := 0; k < 50+n; k++ {
						dv.Probes = append(dv.Probes, store.SurveyProbe{ProbePath: "wlan0", ResolvePath: "wwan0",
							Address: fmt.Sprintf("198.18.%d.%d", n, k), Method: "tcp-syn", Sent: 3, Received: int64(k % 4), Responsive: k%4 > 0, Valid: true})
					}
				} else {
					for k := 0; k < 3; k++ {
						dv.Tests = append(dv.Tests, store.PatternTest{Index: int64(k), Pattern: "bulk", Transport: "mptcp", Path: "wlan0",
							Status: "success", PathBytes: []store.PathBytes{{Path: "wlan0", Sent: int64(1000 * (k + n)), Received: int64(5000000 + k)},
								{Path: "wwan0", Sent: 80, Received: int64(4000 * n)}}})
					}
					if d == 1 {
						dv.Mobile = []store.MobileSummary{{Index: 3, Transport: "mptcp", Primary: "wlan0", Backup: "wwan0", Ended: "primary-lost",
							Status: "success", HandoverStatus: "handover", Cause: "under-rto", DurationSent: -296000000, DurationReceived: -295000000,
							Upload: store.Delays{Count: 40, P50: 20000000, Max: 1271000000 + int64(n)}}}
					}
				}
				require.NoError(t, st.PutDerived(ctx, id, dv))
			}
		}
	}
}

// truth is what the store says, read back run by run (not through Export).
type truth struct {
	rows                                 map[string]int64
	bytes, sent, received, rttP50, delay int64
}

func storeTruth(t *testing.T, st store.Store, f store.ExportFilter) truth {
	ctx := context.Background()
	tr := truth{rows: map[string]int64{}}
	runs, err := st.ListRuns(ctx, store.RunFilter{Probe: f.Probe, Since: f.Since, Until: f.Until})
	require.NoError(t, err)
	for _, r := range runs {
		tr.rows["runs"]++
		tr.bytes += r.Bytes
		d, err := st.GetDerived(ctx, r.RunID)
		require.NoError(t, err)
		tr.rows["survey_cells"] += int64(len(d.Cells))
		tr.rows["survey_probes"] += int64(len(d.Probes))
		tr.rows["pattern_tests"] += int64(len(d.Tests))
		tr.rows["mobile_summaries"] += int64(len(d.Mobile))
		for _, c := range d.Cells {
			tr.rttP50 += int64(c.RTTP50ms * 1e6)
		}
		for _, x := range d.Tests {
			tr.rows["pattern_path_bytes"] += int64(len(x.PathBytes))
			for _, b := range x.PathBytes {
				tr.sent += b.Sent
				tr.received += b.Received
			}
		}
		for _, m := range d.Mobile {
			tr.delay += m.Upload.Max
		}
	}
	ps, err := st.ListProbes(ctx)
	require.NoError(t, err)
	for _, p := range ps {
		if f.Probe == "" || p.Name == f.Probe {
			tr.rows["probes"]++
		}
	}
	return tr
}

func duckTruth(t *testing.T, dir string) truth {
	g := func(table string) string { return "'" + filepath.Join(dir, table, "*.parquet") + "'" }
	q := []string{}
	for _, tb := range export.Tables {
		q = append(q, "SELECT count(*) AS n FROM read_parquet("+g(tb)+")")
	}
	q = append(q,
		"SELECT sum(bytes) AS v FROM read_parquet("+g("runs")+")",
		"SELECT sum(bytes_sent) AS v FROM read_parquet("+g("pattern_path_bytes")+")",
		"SELECT sum(bytes_received) AS v FROM read_parquet("+g("pattern_path_bytes")+")",
		"SELECT sum(rtt_p50_ns) AS v FROM read_parquet("+g("survey_cells")+")",
		"SELECT sum(upload_max_ns) AS v FROM read_parquet("+g("mobile_summaries")+")",
		// typed columns: a timestamp and a string enum, as DuckDB sees them
		"SELECT typeof(started_at) AS v FROM read_parquet("+g("runs")+") LIMIT 1",
		"SELECT typeof(status) AS v FROM read_parquet("+g("runs")+") LIMIT 1",
	)
	res := duckdbtest.Query(t, q...)
	num := func(rows []map[string]any, col string) int64 {
		require.Len(t, rows, 1)
		n, err := strconv.ParseInt(fmt.Sprint(rows[0][col]), 10, 64)
		require.NoError(t, err, "%v", rows)
		return n
	}
	tr := truth{rows: map[string]int64{}}
	for i, tb := range export.Tables {
		tr.rows[tb] = num(res[i], "n")
	}
	k := len(export.Tables)
	tr.bytes, tr.sent, tr.received, tr.rttP50, tr.delay = num(res[k], "v"), num(res[k+1], "v"), num(res[k+2], "v"), num(res[k+3], "v"), num(res[k+4], "v")
	assert.Equal(t, "TIMESTAMP WITH TIME ZONE", res[k+5][0]["v"], "UTC instants")
	assert.Equal(t, "VARCHAR", res[k+6][0]["v"])
	return tr
}

func testExport(t *testing.T, dsn string) {
	ctx := context.Background()
	st, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	plant(t, st)
	for name, f := range map[string]store.ExportFilter{
		"all":   {},
		"probe": {Probe: "pi2"},
		"day":   {Since: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC), Until: time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			files, err := export.Parquet(ctx, st, f, dir)
			require.NoError(t, err)
			want := storeTruth(t, st, f)
			require.Positive(t, want.rows["runs"])
			got := duckTruth(t, dir)
			assert.Equal(t, want, got)
			// one file per table and day of the runs' start
			days := map[string]bool{}
			for _, fl := range files {
				if fl.Table == "runs" {
					days[filepath.Base(fl.Path)] = true
				}
				_, err := os.Stat(fl.Path)
				assert.NoError(t, err)
			}
			left, _ := filepath.Glob(filepath.Join(dir, "*", ".*tmp*"))
			assert.Empty(t, left, "temporary files left")
			if f.Probe == "" && f.Since.IsZero() {
				assert.Equal(t, map[string]bool{"2026-11-01.parquet": true, "2026-11-02.parquet": true, "2026-11-03.parquet": true, "2026-11-04.parquet": true}, days)
			}
		})
	}
}

// TestParquetDuckDB: DuckDB reads the export back with the store's row
// counts and sums of bytes and RTTs, for both store backends.
func TestParquetDuckDB(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testExport(t, filepath.Join(t.TempDir(), "collect.db")) })
	t.Run("postgres", func(t *testing.T) { testExport(t, pgtest.DSN(t)) })
}
