package mpquic

import (
	"context"
	"math"
	"testing"
	"time"
)

// RFC 6356's alpha and increase: one path grows as New Reno; two equal
// paths have alpha 1/2, so together they grow half a segment per round
// trip where two uncoupled flows would grow two; a path is never faster
// than New Reno on its own.
func TestLIAIncrease(t *testing.T) {
	const mss = 1200
	ms := time.Millisecond
	for _, c := range []struct {
		name      string
		paths     []liaPath
		wantAlpha float64
	}{
		{"one path", []liaPath{{100 * mss, 10 * ms}}, 1},
		{"two equal paths", []liaPath{{100 * mss, 10 * ms}, {100 * mss, 10 * ms}}, 0.5},
		// alpha = 150 * (100/1) / (100/1 + 50/4)^2 = 15000/12656.25
		{"unequal", []liaPath{{100 * mss, 10 * ms}, {50 * mss, 40 * ms}}, 15000 / 12656.25},
		{"no RTT yet", []liaPath{{100 * mss, 0}}, 0},
	} {
		a, _ := liaAlpha(c.paths)
		if math.Abs(a-c.wantAlpha) > 1e-9 {
			t.Errorf("%s: alpha %v, want %v", c.name, a, c.wantAlpha)
		}
	}

	// A window's worth of ACKs on each of two equal paths.
	paths := []liaPath{{100 * mss, 10 * ms}, {100 * mss, 10 * ms}}
	grown := 0
	for i := range paths {
		l := &lia{paths: func() []liaPath { return paths }}
		w := paths[i].cwnd
		for range 100 {
			w = l.grow(w, mss, mss, time.Time{})
		}
		grown += w - paths[i].cwnd
	}
	if want := mss / 2; grown < want-2 || grown > want+2 {
		t.Errorf("two equal coupled paths grew %d bytes in a round trip, want %d (half a segment)", grown, want)
	}
	// One path alone: New Reno's segment a window (a little less: the
	// window grows during the round).
	one := []liaPath{{100 * mss, 10 * ms}}
	l, r := &lia{paths: func() []liaPath { return one }}, &newReno{}
	wl, wr := one[0].cwnd, one[0].cwnd
	for range 100 {
		wl, wr = l.grow(wl, mss, mss, time.Time{}), r.grow(wr, mss, mss, time.Time{})
	}
	if wl != wr || wr-one[0].cwnd < mss*99/100 || wr-one[0].cwnd > mss {
		t.Errorf("one path: LIA grew to %d, New Reno to %d (from %d)", wl, wr, one[0].cwnd)
	}
	if got := r.onCongestion(100*mss, mss); got != 50*mss {
		t.Errorf("New Reno after a loss at 100 segments: %d, want 50", got/mss)
	}
}

func TestCongestionConfig(t *testing.T) {
	if _, err := (&Config{Congestion: "bbr"}).withDefaults(); err == nil {
		t.Fatal("unknown congestion control accepted")
	}
	conf, err := (&Config{}).withDefaults()
	if err != nil || conf.Congestion != CongestionCUBIC {
		t.Fatalf("default %q, %v", conf.Congestion, err)
	}
}

// Each controller carries a two-path transfer; the paths' controllers are
// the one configured.
func TestCongestionControllersTwoPaths(t *testing.T) {
	for _, cc := range CongestionControls() {
		t.Run(string(cc), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			conf := &Config{Congestion: cc}
			mp := newMPPair(t, ctx, udpLoopback(t), conf, conf)
			if _, err := mp.c.AddPath(ctx, udpLoopback(t), mp.l.Addr()); err != nil {
				t.Fatal(err)
			}
			exchange(t, ctx, mp.open, testData(2<<20, 5))
			srv := mp.server(t)
			srv.mu.Lock()
			defer srv.mu.Unlock()
			for _, id := range srv.pathIDs() {
				var ok bool
				switch srv.paths[id].cc.avoid.(type) {
				case *cubic:
					ok = cc == CongestionCUBIC
				case *newReno:
					ok = cc == CongestionNewReno
				case *lia:
					ok = cc == CongestionLIA
				}
				if !ok {
					t.Errorf("path %d: %T, want %s", id, srv.paths[id].cc.avoid, cc)
				}
			}
		})
	}
}
