// Package grafana holds the fleet dashboard; its test runs a real
// Prometheus over a collector and a node_exporter textfile.
package grafana

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/fleetfig"
	"github.com/mptester/mptester/internal/promtest"
)

// TestDashboardQueries: Prometheus (Debian's prometheus) scrapes the
// collector's /metrics/fleet and node_exporter's textfile collector
// (Debian's prometheus-node-exporter) over a probe's textfile; every query
// of the shipped dashboard returns exactly the series and values the
// store's figures and the textfile hold for the planted runs.
func TestDashboardQueries(t *testing.T) {
	if !promtest.Need(t) {
		return
	}
	dash := promtest.LoadDashboard(t, "mptester-fleet.json")
	dir := t.TempDir()
	ctx := context.Background()

	// The collector with planted runs of two probes.
	st, err := store.Open(ctx, filepath.Join(dir, "collect.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	admin := collect.NewToken()
	if err := st.AddAdmin(ctx, "ops", collect.HashToken(admin), time.Now()); err != nil {
		t.Fatal(err)
	}
	paths := []store.Path{{Name: "wlan0", Kind: "wifi"}, {Name: "wwan0", Kind: "cellular"}}
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	plant := func(probe, cmd string, at time.Time, d store.Derived) {
		id := fmt.Sprintf("%s-%s-%d", probe, cmd, at.Unix())
		if _, _, err := st.PutRun(ctx, store.Run{RunID: id, ProbeID: probe, Command: cmd, SchemaVersion: "1.1", Status: "ok", Parsed: true,
			StartedAt: at, FinishedAt: at, SHA256: id, RawPath: "x", ContentType: "application/json", StoredAt: at, Paths: paths},
			store.Report{Probe: probe, Seen: at, Backlog: 2}); err != nil {
			t.Fatal(err)
		}
		if err := st.PutDerived(ctx, id, d); err != nil {
			t.Fatal(err)
		}
	}
	ms := func(v float64) *float64 { return &v }
	for i, probe := range []string{"pi1", "pi2"} {
		plant(probe, "survey", t0, store.Derived{Cells: []store.SurveyCell{
			{ProbePath: "wlan0", ResolvePath: "wlan0", Targets: 200, Responsive: int64(150 - 10*i), RTTP50ms: 12.5, RTTMeanms: 20,
				RTTP10ms: ms(2.5), RTTP25ms: ms(6), RTTP75ms: ms(31.25), RTTP90ms: ms(float64(70 + i))},
			{ProbePath: "wwan0", ResolvePath: "wlan0", Targets: 100, Responsive: 40, RTTP50ms: 48.25, RTTMeanms: 50}}})
		plant(probe, "run", t0.Add(time.Minute), store.Derived{
			Tests: []store.PatternTest{
				{Index: 0, Pattern: "bulk", Transport: "mptcp", Status: "success", Result: &store.TestResult{Goodput: ms(float64(40e6 + 8e6*i))}},
				{Index: 1, Pattern: "ping", Transport: "quic", Status: "timeout"},
				{Index: 3, Pattern: "iperf", Transport: "quic", Status: "success", Result: &store.TestResult{
					Upload: &store.TestDirection{GoodputBps: ms(12e6)}, Download: &store.TestDirection{GoodputBps: ms(24e6)}}}},
			Mobile: []store.MobileSummary{{Index: 2, Transport: "mptcp", Upload: store.Delays{Max: int64(1271+i) * 1e6}, Download: store.Delays{Max: 1072e6}}}})
	}
	srv, err := collect.New(collect.Config{Store: st, Data: filepath.Join(dir, "data"), Limits: collect.DefaultLimits()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln, nil, time.Second) }()
	defer func() { cancel(); <-done }()

	// A probe without the collector's view: its textfile.
	tdir := filepath.Join(dir, "textfile")
	if err := os.MkdirAll(tdir, 0o755); err != nil {
		t.Fatal(err)
	}
	var tf bytes.Buffer
	local := fleetfig.Probe{Name: "pi-local", LastSeen: t0, Spool: &fleetfig.Spool{Backlog: 5},
		Survey: &fleetfig.Survey{StartedAt: t0, Cells: []fleetfig.Cell{{ProbePath: "eth0", ResolvePath: "eth0", Targets: 10, Responsive: 9, RTTMedian: 3 * time.Millisecond, RTTMean: 4 * time.Millisecond,
			RTTQuantiles: []fleetfig.Quantile{{Q: 0.1, Value: time.Millisecond}, {Q: 0.9, Value: 9 * time.Millisecond}}}}},
		Run: &fleetfig.Run{StartedAt: t0, Tests: []fleetfig.TestCount{{Transport: "tcp", Status: "success", Tests: 4}},
			Goodputs: []fleetfig.Goodput{{Transport: "tcp", Pattern: "bulk", Direction: "download", BytesPerSecond: 6.25e6, Tests: 4}}}}
	if err := (fleetfig.Figures{Probes: []fleetfig.Probe{local}}).WriteText(&tf, t0); err != nil {
		t.Fatal(err)
	}
	// node_exporter's own figures time would collide with the collector's
	tfPage := bytes.ReplaceAll(tf.Bytes(), []byte(fleetfig.FiguresTime), []byte("mptester_textfile_figures_timestamp_seconds"))
	tfPage = bytes.ReplaceAll(tfPage, []byte(fleetfig.FiguresProbes), []byte("mptester_textfile_probes"))
	if err := os.WriteFile(filepath.Join(tdir, "mptester.prom"), tfPage, 0o644); err != nil {
		t.Fatal(err)
	}

	want := map[string]float64{}
	req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/metrics/fleet", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	_, _ = page.ReadFrom(resp.Body)
	resp.Body.Close()
	promtest.Parse(t, page.Bytes(), want)
	promtest.Parse(t, tfPage, want)

	nodePort := promtest.NodeExporter(t, tdir)
	tokFile := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(tokFile, []byte(admin), 0o600); err != nil {
		t.Fatal(err)
	}
	promPort := promtest.Prometheus(t, fmt.Sprintf(`  - job_name: mptester-fleet
    metrics_path: /metrics/fleet
    authorization: {credentials_file: %s}
    static_configs: [{targets: ["%s"]}]
  - job_name: node
    static_configs: [{targets: ["127.0.0.1:%d"]}]
`, tokFile, ln.Addr().String(), nodePort))
	dash.Check(t, promPort, want, false)
}
