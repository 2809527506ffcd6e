package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mptester/mptester/patterns/transport"
)

// TestPresetGrids: the presets are 004 §IV's parameters exactly.
func TestPresetGrids(t *testing.T) {
	sizes := []int64{131072, 262144, 524288, 1048576, 2097152}
	ms := time.Millisecond
	t.Run("004-rtt", func(t *testing.T) {
		s, err := GetPreset("004-rtt", false)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		wantRTT := []time.Duration{20 * ms, 50 * ms, 100 * ms, 150 * ms, 200 * ms, 250 * ms, 300 * ms, 350 * ms, 400 * ms, 450 * ms, 500 * ms}
		var p2 []time.Duration
		seen := map[time.Duration]bool{}
		for _, c := range s.Cells() {
			p1, p := c.Paths[0], c.Paths[1]
			if p1.Name != "wlan0" || p1.RTT != 20*ms || p1.Delay != 10*ms || p1.Loss != 0.001 || p1.Jitter != 0 || p1.RateBps != 0 {
				t.Fatalf("path 1 = %+v, want 20ms RTT, 0.1%% loss", p1)
			}
			if p.Name != "wwan0" || p.Loss != 0.001 || p.Jitter != 0 || p.RateBps != 0 || p.Delay*2 != p.RTT {
				t.Fatalf("path 2 = %+v", p)
			}
			if !seen[p.RTT] {
				seen[p.RTT] = true
				p2 = append(p2, p.RTT)
			}
		}
		if !equal(p2, wantRTT) {
			t.Errorf("path 2 RTTs %v, want %v", p2, wantRTT)
		}
		checkRest(t, s, sizes, 11)
	})
	t.Run("004-loss", func(t *testing.T) {
		s, err := GetPreset("004-loss", false)
		if err != nil {
			t.Fatal(err)
		}
		var want []float64
		for i := 0; i <= 20; i++ {
			want = append(want, float64(i)*0.5/100)
		}
		want = append(want, 0.15, 0.20)
		var got []float64
		seen := map[float64]bool{}
		for _, c := range s.Cells() {
			p1, p := c.Paths[0], c.Paths[1]
			if p1.RTT != 20*ms || p1.Loss != 0 || p.RTT != 20*ms {
				t.Fatalf("paths = %+v, want both 20ms RTT, path 1 no loss", c.Paths)
			}
			if !seen[p.Loss] {
				seen[p.Loss] = true
				got = append(got, p.Loss)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("path 2 losses %v, want %v", got, want)
		}
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-12 {
				t.Fatalf("path 2 losses %v, want %v", got, want)
			}
		}
		checkRest(t, s, sizes, 23)
	})
	for _, n := range PresetNames() {
		q, err := GetPreset(n, true)
		if err != nil || q.Validate() != nil || q.Reps < 2 || q.Reps > 3 || q.Runs() > 40 {
			t.Errorf("quick %s: %v %v reps %d runs %d", n, err, q.Validate(), q.Reps, q.Runs())
		}
	}
	if _, err := GetPreset("005", false); !errors.Is(err, ErrUnknownPreset) {
		t.Errorf("unknown preset: %v", err)
	}
}

func checkRest(t *testing.T, s Spec, sizes []int64, settings int) {
	t.Helper()
	if !equal(s.Sizes, sizes) || !equal(s.Transports, []string{"mptcp", "tcp"}) || !equal(s.Primaries, []string{"wlan0", "wwan0"}) || s.Reps != 100 {
		t.Errorf("sizes %v transports %v primaries %v reps %d", s.Sizes, s.Transports, s.Primaries, s.Reps)
	}
	if n := len(s.Cells()); n != settings*5*2*2 {
		t.Errorf("%d cells, want %d", n, settings*5*2*2)
	}
	if s.Runs() != settings*5*2*2*100 {
		t.Errorf("%d runs", s.Runs())
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParse(t *testing.T) {
	// A transport without HTTP (the bulk download is HTTP): every
	// registered one carries it, so the test registers one that does not.
	defer transport.Register(transport.Descriptor{Name: "streams-only", Network: "tcp", ServedBy: "tcp",
		Families: []string{"x-stream"}, New: func(transport.Options) (transport.Transport, error) { return nil, errors.New("test only") }})()
	s, err := Parse([]byte(`
name: mine
paths:
  wlan0: {rtt: [20ms], loss: ["0.1%"], rate: [100mbit]}
  wwan0: {delay: [10ms, 50ms], jitter: [2ms], loss: ["1%", "0.02"]}
sizes: [128KiB, 1MB, "5000"]
transports: [mptcp, tcp]
primaries: [wwan0]
repetitions: 4
timeout: 30s
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Cells()) != 4*3*2 || s.Runs() != 96 || s.Timeout != 30*time.Second {
		t.Fatalf("cells %d runs %d", len(s.Cells()), s.Runs())
	}
	c := s.Cells()[0]
	if c.Paths[0].Delay != 10*time.Millisecond || c.Paths[0].RateBps != 100e6 || c.Paths[0].Loss != 0.001 ||
		c.Paths[1].Jitter != 2*time.Millisecond || c.Paths[1].Loss != 0.01 || c.Size != 128<<10 || s.Sizes[1] != 1e6 || s.Sizes[2] != 5000 {
		t.Fatalf("cell 0 %+v sizes %v", c, s.Sizes)
	}
	for _, tc := range []struct{ in, field string }{
		{`paths: {wlan1: {rtt: [1ms]}}`, "paths.wlan1"},
		{`paths: {wwan0: {rtt: [1xs]}}`, "paths.wwan0.rtt[0]"},
		{`paths: {wwan0: {loss: ["0%", "150%"]}}`, "paths.wwan0.loss[1]"},
		{`paths: {wwan0: {rate: [fast]}}`, "paths.wwan0.rate[0]"},
		{`paths: {wwan0: {delay: [-1ms]}}`, "paths.wwan0.delay[0]"},
		{`sizes: [1KiB, 0]`, "sizes[1]"},
		{`sizes: [12 parsecs]`, "sizes[0]"},
		{`sizes: [NaN]`, "sizes[0]"},
		{`paths: {wwan0: {loss: [NaN]}}`, "paths.wwan0.loss[0]"},
		{`sizes: [1KiB]
transports: [mptcp, carrier-pigeon]`, "transports[1]"},
		{`sizes: [1KiB]
transports: [tcp]
primaries: [eth0]`, "primaries[0]"},
		{`sizes: [1KiB]
transports: [tcp, streams-only]`, "transports[1]: \"streams-only\" does not carry HTTP"},
		{`sizes: [1KiB]
transports: [tcp]
primaries: [wlan0]
repetitions: 0`, "repetitions"},
		{`bogus: 1`, "field bogus not found"},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%q: error %v, want it to name %s", tc.in, err, tc.field)
		}
	}
}

// fakeEnv: every transfer takes Size/rate with a share from path 2's RTT.
type fakeEnv struct {
	paths  []PathConfig
	emu    map[string]uint64
	config int
	failAt int // the n-th transfer returns an error (0: never)
	n      int
}

func (f *fakeEnv) Configure(_ context.Context, p []PathConfig) error {
	f.paths, f.config = p, f.config+1
	return nil
}
func (f *fakeEnv) EmuBytes() map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range f.emu {
		out[k] = v
	}
	return out
}
func (f *fakeEnv) Transfer(_ context.Context, c Cell, _ time.Duration) (Transfer, error) {
	f.n++
	if f.n == f.failAt {
		return Transfer{}, errors.New("interrupted")
	}
	share2 := 0.0
	if c.Transport == "mptcp" {
		share2 = 0.5 * float64(20*time.Millisecond) / float64(f.paths[1].RTT)
	}
	k := map[string]uint64{}
	if c.Transport == "mptcp" {
		k["wlan0"], k["wwan0"] = uint64(float64(c.Size)*(1-share2)), uint64(float64(c.Size)*share2)
	}
	f.emu["wlan0"] += uint64(float64(c.Size)*(1-share2)) * 105 / 100
	f.emu["wwan0"] += uint64(float64(c.Size)*share2) * 105 / 100
	d := time.Duration(f.n) * time.Millisecond
	t := Transfer{Status: "success", Bytes: c.Size, Completion: d, GoodputBps: float64(c.Size) * 8 / d.Seconds(), Kernel: k}
	if c.Transport == "mptcp" {
		yes := true
		t.MPTCPNegotiated, t.Subflows = &yes, 2
		if f.paths[1].RTT == 500*time.Millisecond {
			t.Subflows = 1
		}
	}
	return t, nil
}

func TestRunResume(t *testing.T) {
	s, _ := GetPreset("004-rtt", true)
	env := &fakeEnv{emu: map[string]uint64{}, failAt: 10}
	var out bytes.Buffer
	_, err := Run(context.Background(), Options{Spec: s, Env: env, Out: &out})
	if err == nil {
		t.Fatal("want the interruption")
	}
	// A line cut short by the interruption.
	out.WriteString(`{"type":"sweep_run","cel`)
	done, err := ReadResume(bytes.NewReader(out.Bytes()), s)
	if err != nil || len(done) != 9 {
		t.Fatalf("resume: %d runs, %v", len(done), err)
	}
	env2 := &fakeEnv{emu: map[string]uint64{}}
	var out2 bytes.Buffer
	var last Progress
	sums, err := Run(context.Background(), Options{Spec: s, Env: env2, Out: &out2, Done: done, Progress: func(p Progress) { last = p }})
	if err != nil {
		t.Fatal(err)
	}
	if env2.n != s.Runs()-9 || last.Done != last.Total || last.Total != s.Runs()-9 {
		t.Fatalf("resumed sweep ran %d transfers (progress %+v), want %d", env2.n, last, s.Runs()-9)
	}
	if env2.config != 3 {
		t.Errorf("paths configured %d times, want once per path setting (3)", env2.config)
	}
	// Every (cell, rep) exactly once in the new output.
	seen := map[[2]int]int{}
	for _, line := range strings.Split(strings.TrimSpace(out2.String()), "\n") {
		var r Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.Type == "sweep_run" {
			seen[[2]int{r.Index, r.Rep}]++
		}
	}
	if len(seen) != s.Runs() {
		t.Fatalf("%d distinct runs, want %d", len(seen), s.Runs())
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("run %v written %d times", k, n)
		}
	}
	// Summaries: planted shares come back (kernel for mptcp, emulator for tcp).
	for _, c := range sums {
		if c.OK != s.Reps {
			t.Fatalf("cell %d: %d ok", c.Index, c.OK)
		}
		if one := c.Transport == "mptcp" && c.Paths[1].RTT == 500*time.Millisecond; (c.OneSubflow == s.Reps) != one || c.NotNegotiated != 0 {
			t.Errorf("cell %d: %d one-subflow runs, %d not negotiated", c.Index, c.OneSubflow, c.NotNegotiated)
		}
		want2 := 0.0
		if c.Transport == "mptcp" {
			want2 = 0.5 * 20 / float64(c.Paths[1].RTT/time.Millisecond)
		}
		if math.Abs(c.Share[1]-want2) > 1e-3 || math.Abs(c.EmuShare[1]-want2) > 1e-3 {
			t.Errorf("cell %d %s rtt %v: share %v emu %v, want %.3f", c.Index, c.Transport, c.Paths[1].RTT, c.Share, c.EmuShare, want2)
		}
		if c.GoodputP25 > c.GoodputMedian || c.GoodputMedian > c.GoodputP75 || c.GoodputMedian <= 0 {
			t.Errorf("cell %d goodput %v %v %v", c.Index, c.GoodputP25, c.GoodputMedian, c.GoodputP75)
		}
	}
	var csvb bytes.Buffer
	if err := WriteCSV(&csvb, sums); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(csvb.String(), "\n"); n != len(sums)+1 {
		t.Errorf("csv has %d lines", n)
	}
	// Another grid's output cannot be resumed.
	other, _ := GetPreset("004-loss", true)
	if _, err := ReadResume(bytes.NewReader(out2.Bytes()), other); !errors.Is(err, ErrOtherSweep) {
		t.Errorf("resume of another sweep: %v", err)
	}
}

func TestQuantile(t *testing.T) {
	xs := []float64{1, 2, 3, 4}
	if quantile(xs, 0.5) != 2.5 || quantile(xs, 0.25) != 1.75 || quantile(xs, 1) != 4 || quantile([]float64{7}, 0.75) != 7 {
		t.Fatal("quantile")
	}
}
