// Package grafana holds the fleet dashboard; its test runs a real
// Prometheus over a collector and a node_exporter textfile.
package grafana

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mptester/mptester/collect"
	"github.com/mptester/mptester/collect/store"
	"github.com/mptester/mptester/internal/fleetfig"
	"github.com/mptester/mptester/internal/nstest"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func start(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s:\n%s", name, out.String())
		}
	})
}

// series keys a sample by name and sorted labels (job and instance,
// which Prometheus adds, left out).
func series(name string, labels map[string]string) string {
	var ls []string
	for k, v := range labels {
		// an empty label is no label to Prometheus
		if k != "job" && k != "instance" && k != "__name__" && v != "" {
			ls = append(ls, k+"="+v)
		}
	}
	sort.Strings(ls)
	return name + "{" + strings.Join(ls, ",") + "}"
}

func parse(t *testing.T, page []byte, into map[string]float64) {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(page))
	if err != nil {
		t.Fatalf("%v\n%s", err, page)
	}
	for name, f := range fams {
		for _, m := range f.Metric {
			l := map[string]string{}
			for _, lp := range m.Label {
				l[lp.GetName()] = lp.GetValue()
			}
			v := m.GetGauge().GetValue()
			if m.Counter != nil {
				v = m.GetCounter().GetValue()
			}
			into[series(name, l)] = v
		}
	}
}

type dashboard struct {
	Panels []struct {
		Title   string
		Targets []struct{ Expr string }
	}
}

// TestDashboardQueries: Prometheus (Debian's prometheus) scrapes the
// collector's /metrics/fleet and node_exporter's textfile collector
// (Debian's prometheus-node-exporter) over a probe's textfile; every query
// of the shipped dashboard returns exactly the series and values the
// store's figures and the textfile hold for the planted runs.
func TestDashboardQueries(t *testing.T) {
	for _, tool := range []string{"prometheus", "prometheus-node-exporter"} {
		if _, err := exec.LookPath(tool); err != nil {
			nstest.SkipUnless(t, tool+" not found: apt-get install prometheus prometheus-node-exporter")
			return
		}
	}
	b, err := os.ReadFile("mptester-fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash dashboard
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
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
	parse(t, page.Bytes(), want)
	parse(t, tfPage, want)

	nodePort, promPort := freePort(t), freePort(t)
	start(t, "prometheus-node-exporter", "--collector.disable-defaults", "--collector.textfile",
		"--collector.textfile.directory="+tdir, fmt.Sprintf("--web.listen-address=127.0.0.1:%d", nodePort))
	tokFile := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(tokFile, []byte(admin), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: mptester-fleet
    metrics_path: /metrics/fleet
    authorization: {credentials_file: %s}
    static_configs: [{targets: ["%s"]}]
  - job_name: node
    static_configs: [{targets: ["127.0.0.1:%d"]}]
`, tokFile, ln.Addr().String(), nodePort)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	start(t, "prometheus", "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort))

	query := func(expr string) ([]map[string]string, []float64, error) {
		u := fmt.Sprintf("http://127.0.0.1:%d/api/v1/query?query=%s", promPort, url.QueryEscape(expr))
		resp, err := http.Get(u)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		var r struct {
			Status string
			Error  string
			Data   struct {
				Result []struct {
					Metric map[string]string
					Value  [2]any
				}
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return nil, nil, err
		}
		if r.Status != "success" {
			return nil, nil, fmt.Errorf("%s: %s", expr, r.Error)
		}
		var ls []map[string]string
		var vs []float64
		for _, s := range r.Data.Result {
			v, _ := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
			ls, vs = append(ls, s.Metric), append(vs, v)
		}
		return ls, vs, nil
	}

	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			expr := strings.ReplaceAll(tg.Expr, "$probe", ".+")
			sel, scale := expr, 1.0
			if s, ok := strings.CutSuffix(expr, " * 1000"); ok {
				sel, scale = s, 1000
			}
			name, _, _ := strings.Cut(sel, "{")
			n := 0 // the series of name the two pages hold
			for k := range want {
				if strings.HasPrefix(k, name+"{") && (!strings.Contains(sel, `quantile="0.5"`) || strings.Contains(k, "quantile=0.5")) {
					n++
				}
			}
			if n == 0 {
				t.Errorf("%s: %s selects nothing planted", p.Title, expr)
				continue
			}
			var ls []map[string]string
			var vs []float64
			deadline := time.Now().Add(60 * time.Second)
			for {
				ls, vs, err = query(expr)
				if err == nil && len(vs) == n || time.Now().After(deadline) {
					break
				}
				time.Sleep(500 * time.Millisecond)
			}
			if err != nil || len(vs) != n {
				t.Errorf("%s: %s: %d series, want %d (%v)", p.Title, expr, len(vs), n, err)
				continue
			}
			for i, l := range ls {
				key := series(name, l)
				w, ok := want[key]
				if !ok || vs[i] != w*scale {
					t.Errorf("%s: %s = %v, the store's figures say %v (present %v)", p.Title, key, vs[i], w*scale, ok)
				}
			}
		}
	}
}
