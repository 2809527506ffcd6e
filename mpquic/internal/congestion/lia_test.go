package congestion

import (
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
		paths     []LIAPath
		wantAlpha float64
	}{
		{"one path", []LIAPath{{100 * mss, 10 * ms}}, 1},
		{"two equal paths", []LIAPath{{100 * mss, 10 * ms}, {100 * mss, 10 * ms}}, 0.5},
		// alpha = 150 * (100/1) / (100/1 + 50/4)^2 = 15000/12656.25
		{"unequal", []LIAPath{{100 * mss, 10 * ms}, {50 * mss, 40 * ms}}, 15000 / 12656.25},
		{"no RTT yet", []LIAPath{{100 * mss, 0}}, 0},
	} {
		a, _ := liaAlpha(c.paths)
		if math.Abs(a-c.wantAlpha) > 1e-9 {
			t.Errorf("%s: alpha %v, want %v", c.name, a, c.wantAlpha)
		}
	}

	// A window's worth of ACKs on each of two equal paths.
	paths := []LIAPath{{100 * mss, 10 * ms}, {100 * mss, 10 * ms}}
	grown := 0
	for i := range paths {
		l := NewLIA(func() []LIAPath { return paths })
		w := paths[i].Cwnd
		for range 100 {
			w = l.Grow(w, mss, mss, time.Time{})
		}
		grown += w - paths[i].Cwnd
	}
	if want := mss / 2; grown < want-2 || grown > want+2 {
		t.Errorf("two equal coupled paths grew %d bytes in a round trip, want %d (half a segment)", grown, want)
	}
	// One path alone: New Reno's segment a window (a little less: the
	// window grows during the round).
	one := []LIAPath{{100 * mss, 10 * ms}}
	l, r := NewLIA(func() []LIAPath { return one }), &NewReno{}
	wl, wr := one[0].Cwnd, one[0].Cwnd
	for range 100 {
		wl, wr = l.Grow(wl, mss, mss, time.Time{}), r.Grow(wr, mss, mss, time.Time{})
	}
	if wl != wr || wr-one[0].Cwnd < mss*99/100 || wr-one[0].Cwnd > mss {
		t.Errorf("one path: LIA grew to %d, New Reno to %d (from %d)", wl, wr, one[0].Cwnd)
	}
	if got := r.OnCongestion(100*mss, mss); got != 50*mss {
		t.Errorf("New Reno after a loss at 100 segments: %d, want 50", got/mss)
	}
}
