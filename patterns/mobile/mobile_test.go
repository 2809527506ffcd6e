package mobile

import (
	"testing"
	"time"

	"github.com/mptester/mptester/patterns/transport"
)

const tick = 100 * time.Millisecond

// plant builds a connection's 100 ms series in which Wi-Fi sends until
// lastSent and receives until lastRecv, cellular sends from firstCell on,
// and wifi(t) gives the Wi-Fi state's timers at time t. Events fall at
// arbitrary times between samples, like real ones.
func plant(n int, lastSent, lastRecv, firstCell time.Duration, wifi func(t time.Duration, p *transport.PathState)) Conn {
	var c Conn
	var w, cell transport.PathState
	w.Path, cell.Path, cell.Backup = "wlan0", "wwan0", true
	w.Active, cell.Active = true, true
	cell.SRTT, cell.RTO = 40*time.Millisecond, 240*time.Millisecond
	off := 37 * time.Millisecond // sample clock not aligned with events
	for i := range n {
		t := off + time.Duration(i)*tick
		// Counters of everything that happened up to t (an event every
		// 10 ms while the path is live).
		count := func(from, to time.Duration) uint64 {
			if t < from {
				return 0
			}
			return uint64((min(t, to)-from)/(10*time.Millisecond)) + 1
		}
		w.Sent = 1000 * count(0, lastSent)
		w.Received = 1000 * count(0, lastRecv)
		cell.Sent = 1000 * count(firstCell, time.Hour)
		w.SRTT, w.RTO, w.RTOs, w.InFlight = 20*time.Millisecond, 220*time.Millisecond, 0, 0
		if wifi != nil {
			wifi(t, &w)
		}
		c = append(c, Sample{T: t, Paths: []transport.PathState{w, cell}})
	}
	return c
}

func near(t *testing.T, what string, got, want, tol time.Duration) {
	t.Helper()
	if d := got - want; d < -tol || d > tol {
		t.Errorf("%s = %v, planted %v (tolerance %v)", what, got, want, tol)
	}
}

func TestCauses(t *testing.T) {
	sw := 3*time.Second + 13*time.Millisecond
	cases := []struct {
		name string
		wifi func(time.Duration, *transport.PathState)
		want Cause
	}{
		{"rtt", func(tt time.Duration, p *transport.PathState) {
			if tt > sw-150*time.Millisecond {
				p.SRTT, p.RTO = 700*time.Millisecond, 900*time.Millisecond
			}
		}, CauseRTTThreshold},
		{"under-rto", func(tt time.Duration, p *transport.PathState) {
			if tt > sw-150*time.Millisecond {
				p.RTOs, p.InFlight, p.RTO = 1, 4000, 440*time.Millisecond
			}
		}, CauseUnderRTO},
		{"rto-idle", func(tt time.Duration, p *transport.PathState) {
			// In timeout with nothing in flight: not "under RTO".
			if tt > sw-150*time.Millisecond {
				p.RTOs = 1
			}
		}, CauseOther},
		{"rto-threshold", func(tt time.Duration, p *transport.PathState) {
			if tt > sw-150*time.Millisecond {
				p.SRTT, p.RTO = 400*time.Millisecond, 1600*time.Millisecond
			}
		}, CauseRTOThreshold},
		{"other", nil, CauseOther},
		{"too-early", func(tt time.Duration, p *transport.PathState) {
			// The state came back to normal 1 s before the switch: not
			// the cause.
			if tt > sw-1500*time.Millisecond && tt < sw-time.Second {
				p.SRTT = 700 * time.Millisecond
			}
		}, CauseOther},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := plant(60, 5*time.Second, 5*time.Second, sw, tc.wifi)
			h := Analyse([]Conn{c}, DefaultThresholds)
			if h.Status != StatusHandover || h.Cause != tc.want || h.Primary != "wlan0" || h.Backup != "wwan0" {
				t.Fatalf("got %s %s (%s/%s), want handover %s", h.Status, h.Cause, h.Primary, h.Backup, tc.want)
			}
			if h.PrimaryState == nil {
				t.Fatal("no primary state")
			}
			// The rule first held shortly before the switch (or never).
			if want := tc.want; want != CauseOther && (h.Rule != want || h.RuleAt > sw || h.RuleAt < sw-250*time.Millisecond) {
				t.Errorf("rule %s at %v, want %s just before %v", h.Rule, h.RuleAt, want, sw)
			}
		})
	}
}

// TestDurations: both liveliness definitions, a smooth handover (Wi-Fi
// lives on 2.5 s after cellular is used) and an abrupt one (Wi-Fi dead
// 1.2 s before), within half a sample of the planted times each.
func TestDurations(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		lastSent, lastRecv, sw time.Duration
	}{
		{"smooth", 5500 * time.Millisecond, 5200 * time.Millisecond, 3 * time.Second},
		{"abrupt", 2 * time.Second, 1800 * time.Millisecond, 3200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := Analyse([]Conn{plant(80, tc.lastSent, tc.lastRecv, tc.sw, nil)}, DefaultThresholds)
			if h.Status != StatusHandover || h.Resolution != tick {
				t.Fatalf("%+v", h)
			}
			near(t, "first backup data", h.FirstBackupData, tc.sw, tick/2)
			near(t, "duration (sent)", h.DurationSent, tc.lastSent-tc.sw, tick)
			near(t, "duration (received)", h.DurationReceived, tc.lastRecv-tc.sw, tick)
			if abrupt := tc.lastRecv < tc.sw; abrupt != (h.DurationReceived < 0) {
				t.Errorf("abrupt %v but duration %v", abrupt, h.DurationReceived)
			}
		})
	}
}

// TestTwoConnections: MPTCP's interactive pattern has an upload and a
// download connection; the first backup use is the earlier one, Wi-Fi's
// last activity the later one.
func TestTwoConnections(t *testing.T) {
	up := plant(60, 4*time.Second, 4*time.Second, 3*time.Second, nil)
	down := plant(60, 4500*time.Millisecond, 4700*time.Millisecond, 2500*time.Millisecond, func(tt time.Duration, p *transport.PathState) {
		if tt > 2300*time.Millisecond {
			p.RTOs, p.InFlight = 2, 2000
		}
	})
	h := Analyse([]Conn{up, down}, DefaultThresholds)
	near(t, "first backup data", h.FirstBackupData, 2500*time.Millisecond, tick/2)
	near(t, "duration (received)", h.DurationReceived, 2200*time.Millisecond, tick)
	if h.Cause != CauseUnderRTO {
		t.Fatalf("cause %s from the download connection's state", h.Cause)
	}
	b := BytesPerPath([]Conn{up, down})
	if len(b) != 2 || b[0].Path != "wlan0" || b[0].Sent != up[59].Paths[0].Sent+down[59].Paths[0].Sent || b[1].Sent != up[59].Paths[1].Sent+down[59].Paths[1].Sent {
		t.Fatalf("bytes %+v", b)
	}
}

func TestNoBackupNoHandover(t *testing.T) {
	c := plant(30, time.Hour, time.Hour, time.Hour, nil)
	if h := Analyse([]Conn{c}, DefaultThresholds); h.Status != StatusNoHandover || h.Cause != "" {
		t.Fatalf("backup never used: %+v", h)
	}
	for i := range c {
		c[i].Paths = c[i].Paths[:1]
	}
	if h := Analyse([]Conn{c}, DefaultThresholds); h.Status != StatusNoBackup {
		t.Fatalf("no backup path: %+v", h)
	}
	if h := Analyse(nil, DefaultThresholds); h.Status != StatusNoBackup {
		t.Fatalf("no samples: %+v", h)
	}
}

func TestDelaysAndRatio(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	d := SummariseDelays(ds, 3)
	if d.Count != 100 || d.Lost != 3 || d.P50 != 50*time.Millisecond || d.P90 != 90*time.Millisecond || d.P99 != 99*time.Millisecond || d.Max != 100*time.Millisecond {
		t.Fatalf("%+v", d)
	}
	if z := SummariseDelays(nil, 0); z.Max != 0 {
		t.Fatalf("%+v", z)
	}
	r := MaxDelayRatio("quic-handover", 3*time.Second, time.Second, time.Second, 0)
	if r.Upload != 3 || r.Download != 0 || r.Other != "quic-handover" {
		t.Fatalf("%+v", r)
	}
}

// TestAnalyseCapture: packet times replace the samples' (exact, no
// resolution), the cause is read from the samples around the captured
// first use, and a backup the capture never saw data on is no handover.
func TestAnalyseCapture(t *testing.T) {
	sw := 3 * time.Second
	c := plant(60, 5*time.Second, 5*time.Second, sw, func(tt time.Duration, p *transport.PathState) {
		if tt > sw-150*time.Millisecond {
			p.RTOs, p.InFlight = 1, 3000
		}
	})
	start := time.Unix(100, 0)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	h := AnalyseCapture([]Conn{c}, DefaultThresholds, start,
		PathActivity{LastOut: at(2900 * time.Millisecond), LastIn: at(2500 * time.Millisecond)},
		PathActivity{FirstDataOut: at(sw + 7*time.Millisecond)})
	if h.Source != SourceCapture || h.Status != StatusHandover || h.FirstBackupData != sw+7*time.Millisecond ||
		h.DurationSent != -107*time.Millisecond || h.DurationReceived != -507*time.Millisecond || h.Cause != CauseUnderRTO || h.Resolution != 0 {
		t.Fatalf("%+v", h)
	}
	if h := AnalyseCapture([]Conn{c}, DefaultThresholds, start, PathActivity{LastOut: at(time.Second)}, PathActivity{}); h.Status != StatusNoHandover || h.Cause != "" {
		t.Fatalf("no data on the backup: %+v", h)
	}
}

// TestStandbyBackup: a transport that holds its backup in standby
// (quic-handover) probes it every second before using it; the probes are
// not data. Samples and capture both put the first backup data where the
// backup became the path in use, not at the first probe.
func TestStandbyBackup(t *testing.T) {
	sw := 3 * time.Second
	c := plant(60, 2900*time.Millisecond, 2900*time.Millisecond, sw, func(tt time.Duration, p *transport.PathState) {
		if tt > sw-250*time.Millisecond {
			p.RTOs, p.InFlight = 1, 3000
		}
	})
	for i := range c {
		cell := &c[i].Paths[1]
		cell.Active = c[i].T >= sw
		if !cell.Active {
			cell.Sent = 1200 * uint64(c[i].T/time.Second+1) // a probe a second from the start
		} else {
			c[i].Paths[0].Active = false
		}
	}
	h := Analyse([]Conn{c}, DefaultThresholds)
	near(t, "samples: first backup data", h.FirstBackupData, sw, tick)
	if h.Status != StatusHandover || h.Cause != CauseUnderRTO {
		t.Fatalf("samples: %+v", h)
	}
	start := time.Unix(100, 0)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	hc := AnalyseCapture([]Conn{c}, DefaultThresholds, start,
		PathActivity{LastOut: at(2900 * time.Millisecond), LastIn: at(2900 * time.Millisecond)},
		PathActivity{FirstDataOut: at(40 * time.Millisecond)}) // the first probe
	near(t, "capture: first backup data", hc.FirstBackupData, sw, tick)
	if hc.Status != StatusHandover || hc.DurationReceived >= 0 || hc.Resolution == 0 {
		t.Fatalf("capture: %+v", hc)
	}
	// Probes only, never used: no handover, whatever the capture saw.
	for i := range c {
		c[i].Paths[1].Active, c[i].Paths[1].Sent = false, 1200*uint64(c[i].T/time.Second+1)
	}
	if h := AnalyseCapture([]Conn{c}, DefaultThresholds, start, PathActivity{LastOut: at(5 * time.Second)},
		PathActivity{FirstDataOut: at(40 * time.Millisecond)}); h.Status != StatusNoHandover {
		t.Fatalf("probes only: %+v", h)
	}
}
