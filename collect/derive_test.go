package collect_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/store"
)

// TestDerivedTables: uploads fill the derived tables (in the background),
// and reindex rebuilds them identically from the raw files.
func TestDerivedTables(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()

	sid := uuid.NewString()
	survey := derivableSurvey(t, sid)
	require.Equal(t, http.StatusCreated, e.put(t, sid, []byte(survey), e.probeTok, "").code)

	rid := uuid.NewString()
	doc := strings.Replace(string(fixture(t, "document.json", rid, "pi1", 0)), `"records": [`, `"records": [
    {"type":"pattern_test","index":0,"config":{"pattern":"bulk","transport":"mptcp","path":"wlan0","family":4},"status":"success","path_bytes":[{"path":"wlan0","bytes_sent":1200,"bytes_received":5000000},{"path":"wwan0","bytes_sent":80,"bytes_received":4000}]},
    {"type":"pattern_test","index":1,"config":{"pattern":"ping","transport":"quic","path":"wwan0","family":6},"status":"timeout","invalid":true,"path_bytes":[]},
    {"type":"mobile_summary","primary":"wlan0","backup":"wwan0","ended":"primary-lost","transports":[
      {"transport":"mptcp","index":2,"status":"success","handover":{"status":"handover","cause":"under-rto","first_backup_data_ns":1500000000,"duration_sent_ns":-296000000,"duration_received_ns":-295000000},
       "upload_delays":{"count":40,"lost":1,"p50_ns":20000000,"p99_ns":900000000,"max_ns":1271000000},"download_delays":{"count":41,"lost":0,"p50_ns":21000000,"p99_ns":800000000,"max_ns":1072000000}},
      {"transport":"mpquic","index":3,"status":"success","handover":{"status":"handover","cause":"rto","first_backup_data_ns":1200000000,"duration_sent_ns":-100000000,"duration_received_ns":-90000000},
       "upload_delays":{"count":40,"lost":0,"p50_ns":19000000,"p99_ns":70000000,"max_ns":81000000},"download_delays":{"count":40,"lost":0,"p50_ns":18000000,"p99_ns":60000000,"max_ns":61000000}}],
     "mptcp_max_delay_ratios":[{"other":"mpquic","upload":15.69,"download":17.57}]},`, 1)
	a := e.put(t, rid, []byte(doc), e.probeTok, "")
	require.Equal(t, http.StatusCreated, a.code, "%s", a.body)

	ms := func(v float64) *float64 { return &v }
	wantSurvey := store.Derived{
		Cells: []store.SurveyCell{
			{ProbePath: "wlan0", ResolvePath: "wlan0", Targets: 3, Responsive: 2, Unresponsive: 1, UnresponsivePct: 33.3, RTTP50ms: 10.5, RTTMeanms: 12.25,
				RTTP10ms: ms(1), RTTP25ms: ms(1.5), RTTP75ms: ms(20), RTTP90ms: ms(20.5)},
			{ProbePath: "wwan0", ResolvePath: "wlan0", Targets: 3, Responsive: 3, RTTP50ms: 40.125, RTTMeanms: 41}},
		Probes: []store.SurveyProbe{
			{ProbePath: "wlan0", ResolvePath: "wwan0", Address: "198.18.9.1", Method: "tcp-syn", Sent: 10, Received: 9, Responsive: true, Valid: true},
			{ProbePath: "wwan0", ResolvePath: "wwan0", Address: "fd00::9", Method: "tcp-syn", Sent: 10, Valid: true}},
	}
	wantRun := store.Derived{Tests: []store.PatternTest{
		{Index: 0, Pattern: "bulk", Transport: "mptcp", Path: "wlan0", Status: "success",
			PathBytes: []store.PathBytes{{Path: "wlan0", Sent: 1200, Received: 5000000}, {Path: "wwan0", Sent: 80, Received: 4000}}},
		{Index: 1, Pattern: "ping", Transport: "quic", Path: "wwan0", Status: "timeout", Invalid: true, PathBytes: []store.PathBytes{}}},
		Mobile: []store.MobileSummary{
			{Index: 2, Transport: "mptcp", Primary: "wlan0", Backup: "wwan0", Ended: "primary-lost", Status: "success", HandoverStatus: "handover",
				Cause: "under-rto", FirstBackupData: 1500000000, DurationSent: -296000000, DurationReceived: -295000000,
				Upload:   store.Delays{Count: 40, Lost: 1, P50: 20000000, P99: 900000000, Max: 1271000000},
				Download: store.Delays{Count: 41, P50: 21000000, P99: 800000000, Max: 1072000000}},
			{Index: 3, Transport: "mpquic", Primary: "wlan0", Backup: "wwan0", Ended: "primary-lost", Status: "success", HandoverStatus: "handover",
				Cause: "rto", FirstBackupData: 1200000000, DurationSent: -100000000, DurationReceived: -90000000,
				Upload:           store.Delays{Count: 40, P50: 19000000, P99: 70000000, Max: 81000000},
				Download:         store.Delays{Count: 40, P50: 18000000, P99: 60000000, Max: 61000000},
				MPTCPRatioUpload: 15.69, MPTCPRatioDownload: 17.57}}}
	check := func(id string, want store.Derived) {
		require.Eventually(t, func() bool {
			got, err := e.st.GetDerived(ctx, id)
			return err == nil && assert.ObjectsAreEqual(want, got)
		}, 5*time.Second, 20*time.Millisecond, "derived rows of %s", id)
	}
	check(sid, wantSurvey)
	check(rid, wantRun)

	require.NoError(t, e.st.PutDerived(ctx, sid, store.Derived{}))
	require.NoError(t, e.st.PutDerived(ctx, rid, store.Derived{}))
	n, err := e.srv.ReindexAll(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	check(sid, wantSurvey)
	check(rid, wantRun)
}

// derivableSurvey is the stream fixture with two probe records and a
// summary of two cells: rows in every survey table.
func derivableSurvey(t testing.TB, sid string) string {
	lines := strings.Split(strings.TrimSpace(string(stream(t, sid, "pi1"))), "\n")
	recs := []string{
		`{"type":"probe","probe_path":"wlan0","resolve_path":"wwan0","resolve_paths":["wwan0"],"address":"198.18.9.1","domains":["a.example"],"method":"tcp-syn","sent":10,"received":9,"rtts_ms":[1],"answer":"syn-ack","responsive":true,"bytes":600,"valid":true}`,
		`{"type":"probe","probe_path":"wwan0","resolve_path":"wwan0","resolve_paths":["wwan0"],"address":"fd00::9","domains":["a.example"],"method":"tcp-syn","sent":10,"received":0,"rtts_ms":[],"answer":"","responsive":false,"bytes":600,"valid":true}`,
		`{"type":"summary","status":"ok","cells":[{"probe_path":"wlan0","resolve_path":"wlan0","targets":3,"responsive":2,"unresponsive":1,"unresponsive_pct":33.3,"rtt_ms":{"min":1,"p10":1,"p25":1.5,"p50":10.5,"p75":20,"p90":20.5,"max":20,"mean":12.25}},{"probe_path":"wwan0","resolve_path":"wlan0","targets":3,"responsive":3,"unresponsive":0,"unresponsive_pct":0,"rtt_ms":{"p50":40.125,"mean":41}}]}`,
	}
	trailer := strings.Replace(lines[3], `"records":2`, fmt.Sprintf(`"records":%d`, 2+len(recs)), 1)
	return strings.Join(append(append(lines[:3:3], recs...), trailer), "\n") + "\n"
}

// TestDerivedCatchUp: a stored run whose derived rows were never written
// (the collector stopped, or the queue was full, before the deriver got to
// it) is derived when the next collector starts, without a reindex.
func TestDerivedCatchUp(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	// The env's own collector is stopped first: its deriver would catch the
	// run up before the test looks (the collector that stopped).
	e.cancel()
	e.done <- <-e.done // stopped; the value stays for the cleanup
	// What an upload leaves when its derivation is lost: the row and the
	// raw body, no derived rows.
	sid := uuid.NewString()
	body := []byte(derivableSurvey(t, sid))
	_, o, err := e.st.PutRun(ctx, store.Run{RunID: sid, ProbeID: "pi1", Command: "survey", SchemaVersion: "1.1", Status: "ok",
		Parsed: true, SHA256: sha(body), Bytes: int64(len(body)), RawPath: store.RawInline, Raw: body,
		ContentType: "application/x-ndjson", StoredAt: time.Now()}, store.Report{})
	require.NoError(t, err)
	require.Equal(t, store.Stored, o)
	und, err := e.st.ListUnderived(ctx, 0)
	require.NoError(t, err)
	require.Len(t, und, 1)

	srv, err := collect.New(collect.Config{Store: e.st, Data: e.data, Limits: collect.DefaultLimits()})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln, nil, time.Second) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool {
		d, err := e.st.GetDerived(ctx, sid)
		return err == nil && len(d.Probes) == 2 && len(d.Cells) == 2
	}, 10*time.Second, 20*time.Millisecond, "the restarted collector derives the run")
	und, err = e.st.ListUnderived(ctx, 0)
	require.NoError(t, err)
	assert.Empty(t, und)
}
