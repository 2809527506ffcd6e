// Package promtest runs a real Prometheus (and node_exporter) for a test
// and checks a shipped Grafana dashboard's queries against the figures a
// test expects: the figures reach the dashboard through what operators
// run, not through our own parser only.
package promtest

import (
	"bytes"
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

	"github.com/mptester/mptester/internal/nstest"
)

// Tools are Debian's packages the checks run; under CI=true a missing one
// fails the test (nstest.SkipUnless).
var Tools = []string{"prometheus", "prometheus-node-exporter"}

// Need skips (fails under CI=true) unless Prometheus and node_exporter are
// installed, and reports whether the test may go on.
func Need(t *testing.T) bool {
	t.Helper()
	for _, tool := range Tools {
		if _, err := exec.LookPath(tool); err != nil {
			nstest.SkipUnless(t, tool+" not found: apt-get install prometheus prometheus-node-exporter")
			return false
		}
	}
	return true
}

// FreePort is a loopback TCP port free a moment ago.
func FreePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Start runs a process until the test ends; its output is logged when
// the test failed.
func Start(t *testing.T, name string, args ...string) {
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

// NodeExporter runs node_exporter with only its textfile collector over
// dir and returns its port.
func NodeExporter(t *testing.T, dir string) int {
	t.Helper()
	port := FreePort(t)
	Start(t, "prometheus-node-exporter", "--collector.disable-defaults", "--collector.textfile",
		"--collector.textfile.directory="+dir, fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
	return port
}

// Prometheus runs Prometheus scraping every second with the given
// scrape_configs (YAML list items, indented by two spaces) and returns
// its port.
func Prometheus(t *testing.T, scrapeConfigs string) int {
	t.Helper()
	dir := t.TempDir()
	cfg := "global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n" + scrapeConfigs
	file := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	port := FreePort(t)
	Start(t, "prometheus", "--config.file="+file, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
	return port
}

// Series keys a sample by name and sorted labels (job and instance,
// which Prometheus adds, left out; an empty label is no label to
// Prometheus).
func Series(name string, labels map[string]string) string {
	var ls []string
	for k, v := range labels {
		if k != "job" && k != "instance" && k != "__name__" && v != "" {
			ls = append(ls, k+"="+v)
		}
	}
	sort.Strings(ls)
	return name + "{" + strings.Join(ls, ",") + "}"
}

// Parse adds a text-format page's samples to into, keyed by Series.
func Parse(t *testing.T, page []byte, into map[string]float64) {
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
			into[Series(name, l)] = v
		}
	}
}

// Dashboard is what the checks read of a Grafana dashboard.
type Dashboard struct {
	Panels []struct {
		Title   string
		Targets []struct{ Expr string }
	}
}

// LoadDashboard reads a dashboard's JSON.
func LoadDashboard(t *testing.T, file string) Dashboard {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// query runs an instant query.
func query(port int, expr string) ([]map[string]string, []float64, error) {
	u := fmt.Sprintf("http://127.0.0.1:%d/api/v1/query?query=%s", port, url.QueryEscape(expr))
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

// Check runs every query of the dashboard ($probe: every probe) on the
// Prometheus at port until it returns as many series as want holds of its
// metric (60 s at most), then compares each value with want's (a query's
// " * 1000" scale applied). A query that selects nothing in want fails
// the test unless skipEmpty; Check returns the queries it compared.
func (d Dashboard) Check(t *testing.T, port int, want map[string]float64, skipEmpty bool) int {
	t.Helper()
	checked := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			expr := strings.ReplaceAll(tg.Expr, "$probe", ".+")
			sel, scale := expr, 1.0
			if s, ok := strings.CutSuffix(expr, " * 1000"); ok {
				sel, scale = s, 1000
			}
			name, _, _ := strings.Cut(sel, "{")
			n := 0 // the series of name want holds
			for k := range want {
				if strings.HasPrefix(k, name+"{") && (!strings.Contains(sel, `quantile="0.5"`) || strings.Contains(k, "quantile=0.5")) {
					n++
				}
			}
			if n == 0 {
				if !skipEmpty {
					t.Errorf("%s: %s selects nothing planted", p.Title, expr)
				}
				continue
			}
			var ls []map[string]string
			var vs []float64
			var err error
			deadline := time.Now().Add(60 * time.Second)
			for {
				ls, vs, err = query(port, expr)
				if err == nil && len(vs) == n || time.Now().After(deadline) {
					break
				}
				time.Sleep(500 * time.Millisecond)
			}
			if err != nil || len(vs) != n {
				t.Errorf("%s: %s: %d series, want %d (%v)", p.Title, expr, len(vs), n, err)
				continue
			}
			checked++
			for i, l := range ls {
				key := Series(name, l)
				w, ok := want[key]
				if !ok || vs[i] != w*scale {
					t.Errorf("%s: %s = %v, the figures say %v (present %v)", p.Title, key, vs[i], w*scale, ok)
				}
			}
		}
	}
	return checked
}
