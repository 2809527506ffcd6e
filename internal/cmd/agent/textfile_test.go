package agent

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/fleetfig"
	"github.com/mptester/mptester/upload"
)

const (
	tfPaths  = `"paths":[{"name":"wlan0","kind":"wifi"},{"name":"wwan0","kind":"cellular"}]`
	tfSurvey = `{"type":"header","schema_version":"1.1","run_id":"11111111-1111-4111-8111-111111111111","probe_id":"pi1","command":"survey","started_at":"2026-11-22T10:00:00Z",` + tfPaths + `}
{"type":"summary","cells":[{"probe_path":"wlan0","resolve_path":"wlan0","targets":200,"responsive":150,"rtt_ms":{"p10":4.25,"p25":8,"p50":12.5,"p75":30,"p90":55.5,"mean":20}},{"probe_path":"wwan0","resolve_path":"wlan0","targets":100,"responsive":0}]}
{"type":"trailer","status":"ok"}
`
	tfRun = `{"schema_version":"1.1","run_id":"22222222-2222-4222-8222-222222222222","probe_id":"pi1","command":"run","started_at":"2026-11-22T11:00:00Z",` + tfPaths + `,"records":[
{"type":"pattern_test","index":0,"config":{"pattern":"bulk","transport":"mptcp","path":"wlan0"},"status":"success","path_bytes":[],"result":{"goodput_bps":41000000}},
{"type":"pattern_test","index":5,"config":{"pattern":"iperf","transport":"mptcp","path":"wwan0"},"status":"success","path_bytes":[],"result":{"upload":{"goodput_bps":9000000},"download":{"goodput_bps":17000000}}},
{"type":"pattern_test","index":1,"config":{"pattern":"ping","transport":"mptcp","path":"wlan0"},"status":"success","path_bytes":[]},
{"type":"pattern_test","index":2,"config":{"pattern":"ping","transport":"quic","path":"wwan0"},"status":"timeout","path_bytes":[]},
{"type":"pattern_test","index":3,"config":{"pattern":"bulk","transport":"quic","path":"wlan0"},"status":"success","invalid":true,"path_bytes":[],"result":{"goodput_bps":1000}},
{"type":"mobile_summary","primary":"wlan0","backup":"wwan0","transports":[{"transport":"mptcp","index":4,"status":"success","upload_delays":{"max_ns":1271000000},"download_delays":{"max_ns":1072000000}}]}
],"finished_at":"2026-11-22T11:01:00Z","status":"ok"}
`
)

func spoolResult(t *testing.T, sp *upload.Spool, id, ext, body string) {
	t.Helper()
	e, err := sp.Create(id, ext)
	require.NoError(t, err)
	_, err = e.Write([]byte(body))
	require.NoError(t, err)
	require.NoError(t, e.Commit())
}

// figureLines are a page's survey, run and mobile series, sorted (the
// parts a probe and the collector both know).
func figureLines(page string) []string {
	var out []string
	for _, l := range strings.Split(page, "\n") {
		for _, p := range []string{"mptester_fleet_survey_", "mptester_fleet_run_", "mptester_fleet_mobile_", "mptester_fleet_handover_"} {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestTextfile: the results a task spools become DIR/mptester.prom, which
// Prometheus' parser reads; its survey, run and mobile series are those
// the collector serves for the same results; a later pass that ran only
// one task still writes the others' figures (kept in the state).
func TestTextfile(t *testing.T) {
	dir := t.TempDir()
	sp, err := upload.OpenSpool(filepath.Join(dir, "spool"), upload.Quota{})
	require.NoError(t, err)
	prom := filepath.Join(dir, "textfile")
	require.NoError(t, os.MkdirAll(prom, 0o755))
	tf := &textfile{dir: prom, state: filepath.Join(dir, "figures.json"), probe: "pi1"}

	before := pending(sp)
	spoolResult(t, sp, "11111111-1111-4111-8111-111111111111", ".jsonl", tfSurvey)
	require.NoError(t, tf.add(sp, before))
	before = pending(sp)
	spoolResult(t, sp, "22222222-2222-4222-8222-222222222222", ".json", tfRun)
	require.NoError(t, tf.add(sp, before))
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	require.NoError(t, tf.write(sp, now))

	b, err := os.ReadFile(filepath.Join(prom, TextfileName))
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(b))
	require.NoError(t, err, "%s", b)
	assert.Equal(t, 2.0, fams[fleetfig.SpoolBacklog].Metric[0].GetGauge().GetValue())
	assert.Equal(t, float64(now.Unix()), fams[fleetfig.LastSeen].Metric[0].GetGauge().GetValue())
	assert.NotContains(t, fams, fleetfig.SpoolDropped, "the spool's unreported drops are no counter")
	ents, _ := os.ReadDir(prom)
	assert.Len(t, ents, 1, "temporary files left in the textfile directory")

	// The collector, given the same two results, serves the same series.
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(dir, "collect.db"))
	require.NoError(t, err)
	defer st.Close()
	for _, r := range []struct{ id, cmd, ct, body string }{
		{"11111111-1111-4111-8111-111111111111", "survey", "application/x-ndjson", tfSurvey},
		{"22222222-2222-4222-8222-222222222222", "run", "application/json", tfRun},
	} {
		started := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
		if r.cmd == "run" {
			started = started.Add(time.Hour)
		}
		_, _, err := st.PutRun(ctx, store.Run{RunID: r.id, ProbeID: "pi1", Command: r.cmd, SchemaVersion: "1.1", Status: "ok", Parsed: true,
			StartedAt: started, FinishedAt: started, SHA256: r.id, RawPath: "x", ContentType: r.ct, StoredAt: started,
			Paths: []store.Path{{Name: "wlan0", Kind: "wifi"}, {Name: "wwan0", Kind: "cellular"}}}, store.Report{Probe: "pi1", Seen: now})
		require.NoError(t, err)
		d, err := collect.Derive(strings.NewReader(r.body), r.ct)
		require.NoError(t, err)
		require.NoError(t, st.PutDerived(ctx, r.id, d))
	}
	f, err := st.Fleet(ctx)
	require.NoError(t, err)
	var page bytes.Buffer
	require.NoError(t, collect.FleetFigures(f).WriteText(&page, now))
	want := figureLines(page.String())
	// 14 figures, 4 more RTT quantiles, 3 goodputs (mptcp bulk; iperf up
	// and down; not the invalid quic test's).
	require.Len(t, want, 21, "%s", page.String())
	assert.Contains(t, want, `mptester_fleet_run_goodput_bytes_per_second{probe="pi1",transport="mptcp",pattern="iperf",direction="upload"} 1.125e+06`)
	assert.Contains(t, want, `mptester_fleet_survey_rtt_seconds{probe="pi1",probe_path="wlan0",resolve_path="wlan0",cell="WW",quantile="0.9"} 0.0555`)
	assert.Equal(t, want, figureLines(string(b)))

	// A later pass that ran nothing still writes the kept figures.
	tf2 := &textfile{dir: prom, state: tf.state, probe: "pi1"}
	require.NoError(t, tf2.write(sp, now.Add(time.Hour)))
	b2, err := os.ReadFile(filepath.Join(prom, TextfileName))
	require.NoError(t, err)
	assert.Equal(t, want, figureLines(string(b2)))
}
