package congestion

import (
	"math"
	"testing"
	"time"
)

// After a loss CUBIC keeps 0.7 of the window, and growing along its curve
// it is back at the window of the loss about K = cbrt(0.3 W/C) seconds
// later (RFC 9438 §4.2), not sooner, and does not stall below it. (With
// a small window and RTT the Reno-friendly estimate is faster and wins,
// as §4.3 wants; 1000 packets at 100 ms is CUBIC's own region.)
func TestCubicRecoversAlongItsCurve(t *testing.T) {
	const mss = 1200
	cc := NewSender(mss, &Cubic{})
	cc.ssthresh = 0 // congestion avoidance
	cc.Cwnd = 1000 * mss
	start := time.Unix(1000, 0)
	cc.OnLost(mss, start.Add(time.Millisecond), start.Add(time.Millisecond))
	if cc.Cwnd != 700*mss {
		t.Fatalf("window after a loss %d, want %d", cc.Cwnd, 700*mss)
	}
	k := math.Cbrt(300 / cubicC) // seconds
	cc.ctrl.SetRTT(100 * time.Millisecond)
	now := start.Add(2 * time.Millisecond)
	var reached time.Duration
	for i := 0; i < 20000 && reached == 0; i++ {
		now = now.Add(time.Millisecond)
		// one window's worth of ACKs per 100 ms RTT
		for n := 0; n < cc.Cwnd/mss/100; n++ {
			cc.Cwnd = cc.ctrl.Grow(cc.Cwnd, mss, mss, now)
		}
		if cc.Cwnd >= 1000*mss {
			reached = now.Sub(start)
		}
	}
	t.Logf("K %.2f s; back at the loss window after %v", k, reached)
	if reached == 0 || reached.Seconds() < 0.7*k || reached.Seconds() > 1.3*k {
		t.Errorf("back at the loss window after %v, want about K = %.2f s", reached, k)
	}
}

// In the Reno-friendly region (small window, short RTT, as on a 20 Mbit/s
// access path with loss) the window grows one segment per RTT, as quic-go's
// Reno does, not RFC 9438's 0.53 (0.86x quic-go's goodput there).
func TestCubicRenoFriendlyGrowsOneSegmentPerRTT(t *testing.T) {
	const mss = 1200
	cc := NewSender(mss, &Cubic{})
	cc.ssthresh = 0
	cc.Cwnd = 20 * mss
	start := time.Unix(1000, 0)
	cc.OnLost(mss, start.Add(time.Millisecond), start.Add(time.Millisecond))
	cc.ctrl.SetRTT(20 * time.Millisecond)
	after := cc.Cwnd
	now := start.Add(2 * time.Millisecond)
	for range 10 { // ten RTTs, a window of ACKs each
		now = now.Add(20 * time.Millisecond)
		for range cc.Cwnd / mss {
			cc.Cwnd = cc.ctrl.Grow(cc.Cwnd, mss, mss, now)
		}
	}
	if got := float64(cc.Cwnd-after) / mss; got < 9 || got > 11 {
		t.Errorf("grew %.1f segments in 10 RTTs, want about 10", got)
	}
}
