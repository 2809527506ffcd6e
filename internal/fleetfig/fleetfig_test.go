package fleetfig

import (
	"bytes"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestWriteTextParses: Prometheus' own parser reads the page, also with
// label values that need escaping, and gets the values back.
func TestWriteTextParses(t *testing.T) {
	at := time.Unix(1_800_000_000, 500_000_000)
	f := Figures{Probes: []Probe{
		{Name: "b\"ad\\probe\nname", LastSeen: at, Spool: &Spool{Backlog: 2, Dropped: new(int64)},
			Survey: &Survey{StartedAt: at, Cells: []Cell{{ProbePath: "wlan0", ResolvePath: "wwan0", Study: "WL", Targets: 0}}}},
		{Name: "a", Run: &Run{StartedAt: at, Tests: []TestCount{{Transport: "tcp", Status: "success", Tests: 4}}},
			Mobile: &Mobile{StartedAt: at, Handovers: []Handover{{Transport: "mptcp", MaxUpload: 1500 * time.Millisecond, MaxDown: time.Second}}}},
	}}
	var b bytes.Buffer
	if err := f.WriteText(&b, at); err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if got := fams[LastSeen].Metric[0].Label[0].GetValue(); got != f.Probes[0].Name {
		t.Errorf("probe label %q, want %q", got, f.Probes[0].Name)
	}
	if v := fams[SurveyReach].Metric[0].GetGauge().GetValue(); !math.IsNaN(v) {
		t.Errorf("reachable ratio of a cell without targets: %v, want NaN", v)
	}
	if v := fams[HandoverDelay].Metric[0].GetGauge().GetValue(); v != 1.5 {
		t.Errorf("handover delay %v", v)
	}
	if v := fams[FiguresTime].Metric[0].GetGauge().GetValue(); v != 1_800_000_000.5 {
		t.Errorf("figures time %v", v)
	}
	if _, ok := fams[SurveyRTT]; ok {
		t.Error("an RTT for a cell without answers")
	}
	// probes in name order
	if got := fams[RunTime].Metric[0].Label[0].GetValue(); got != "a" {
		t.Errorf("first probe %q", got)
	}
}

func TestStudy(t *testing.T) {
	k := map[string]string{"wlan0": "wifi", "wwan0": "cellular"}
	for _, c := range [][3]string{{"wlan0", "wwan0", "WL"}, {"wwan0", "wwan0", "LL"}, {"wwan0", "wlan0", "LW"}, {"eth0", "wlan0", ""}} {
		if got := Study(k, c[0], c[1]); got != c[2] {
			t.Errorf("%s/%s: %q, want %q", c[0], c[1], got, c[2])
		}
	}
	if got := Study(map[string]string{"wlan0": "wifi", "wlan1": "wifi", "wwan0": "cellular"}, "wlan0", "wwan0"); got != "" {
		t.Errorf("two Wi-Fi paths: %q", got)
	}
}

// TestMeanGoodputs: per transport, pattern and direction the mean in
// bytes per second; a bulk test's goodput is a download; a missing or
// non-finite figure is no sample; ordered by the three labels.
func TestMeanGoodputs(t *testing.T) {
	v := func(x float64) *float64 { return &x }
	got := MeanGoodputs([]Test{
		{Transport: "tcp", Pattern: "iperf", Upload: v(8e6), Download: v(16e6)},
		{Transport: "mptcp", Pattern: "bulk", Bulk: v(80e6)},
		{Transport: "tcp", Pattern: "iperf", Upload: v(24e6), Download: v(math.NaN())},
		{Transport: "mptcp", Pattern: "bulk", Bulk: v(40e6)},
		{Transport: "mptcp", Pattern: "bulk", Bulk: v(math.Inf(1))},
		{Transport: "quic", Pattern: "interactive"},
	})
	want := []Goodput{
		{Transport: "mptcp", Pattern: "bulk", Direction: "download", BytesPerSecond: 7.5e6, Tests: 2},
		{Transport: "tcp", Pattern: "iperf", Direction: "download", BytesPerSecond: 2e6, Tests: 1},
		{Transport: "tcp", Pattern: "iperf", Direction: "upload", BytesPerSecond: 2e6, Tests: 2},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("goodput %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestNewRun: tests counted by transport and status (an invalid one as
// "invalid", whatever its status), goodputs from the successful valid
// tests only.
func TestNewRun(t *testing.T) {
	v := func(x float64) *float64 { return &x }
	at := time.Unix(1_800_000_000, 0)
	r := NewRun(at, []Test{
		{Transport: "tcp", Pattern: "bulk", Status: "success", Bulk: v(8e6)},
		{Transport: "tcp", Pattern: "bulk", Status: "success", Invalid: true, Bulk: v(800e6)},
		{Transport: "tcp", Pattern: "bulk", Status: "timeout", Bulk: v(1e3)},
		{Transport: "quic", Pattern: "ping", Status: "success"},
	})
	wantTests := []TestCount{{"quic", "success", 1}, {"tcp", "invalid", 1}, {"tcp", "success", 1}, {"tcp", "timeout", 1}}
	if !r.StartedAt.Equal(at) || !slices.Equal(r.Tests, wantTests) {
		t.Errorf("tests %+v, want %+v", r.Tests, wantTests)
	}
	wantGood := []Goodput{{Transport: "tcp", Pattern: "bulk", Direction: "download", BytesPerSecond: 1e6, Tests: 1}}
	if !slices.Equal(r.Goodputs, wantGood) {
		t.Errorf("goodputs %+v, want %+v", r.Goodputs, wantGood)
	}
}
