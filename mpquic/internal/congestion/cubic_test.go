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

// RFC 9438 §4.2 and §4.4 step by step: after a loss at W = 1000 segments
// (1000-byte segments) the window is 700 segments, K = cbrt((1000-700)/C)
// = cbrt(750) s, and an acknowledged segment t seconds into the epoch
// grows the window by (W_cubic(t+RTT) - cwnd)/cwnd segments, W_cubic(t) =
// C(t-K)^3 + W_max; at t = K - RTT the target is W_max itself.
func TestCubicWindowStepByStep(t *testing.T) {
	const seg = 1000
	cu := &Cubic{}
	if got := cu.OnCongestion(1000*seg, seg); got != 700*seg {
		t.Fatalf("window after the loss %d, want %d", got, 700*seg)
	}
	rtt := 100 * time.Millisecond
	cu.SetRTT(rtt)
	t0 := time.Unix(1000, 0)
	cu.Grow(700*seg, seg, seg, t0) // the epoch starts
	k := math.Cbrt(300 / 0.4)
	if math.Abs(cu.k-k) > 1e-9 {
		t.Fatalf("K %.6f s, want %.6f", cu.k, k)
	}
	wCubic := func(t float64) float64 { return (0.4*math.Pow(t-k, 3) + 1000) * seg }
	for _, tc := range []struct {
		at   float64 // seconds into the epoch
		cwnd int
	}{
		{2, 700 * seg},
		{5, 800 * seg},
		{k - rtt.Seconds(), 999 * seg},
		{k + 3, 1000 * seg},
	} {
		before := *cu
		got := cu.Grow(tc.cwnd, seg, seg, t0.Add(time.Duration(tc.at*float64(time.Second))))
		target := min(max(wCubic(tc.at+rtt.Seconds()), float64(tc.cwnd)), 1.5*float64(tc.cwnd))
		want := float64(tc.cwnd) + (target-float64(tc.cwnd))*seg/float64(tc.cwnd) + before.frac
		if math.Abs(float64(got)-want) > 1 {
			t.Errorf("t = %.2f s, cwnd %d: grew to %d, want %.1f (W_cubic(t+RTT) = %.0f)", tc.at, tc.cwnd, got, want, wCubic(tc.at+rtt.Seconds()))
		}
	}
}

// RFC 9438 §4.3: where W_cubic is below the Reno-friendly estimate (a small
// window at a short RTT) the window is W_est, which grows by alpha =
// 3(1-β)/(1+β) = 0.53 segments per window of acknowledged segments until
// it reaches the window before the reduction (cwnd_prior), and by one
// segment after.
func TestCubicRenoFriendlyRegion(t *testing.T) {
	const seg = 1000
	cu := &Cubic{}
	cwnd := cu.OnCongestion(20*seg, seg)
	cu.SetRTT(20 * time.Millisecond)
	now := time.Unix(1000, 0)
	rounds := func(n int) (segsPerRTT float64) {
		before := cwnd
		for range n {
			now = now.Add(20 * time.Millisecond)
			for range cwnd / seg {
				cwnd = cu.Grow(cwnd, seg, seg, now)
			}
		}
		return float64(cwnd-before) / seg / float64(n)
	}
	if got, want := rounds(5), 3*(1-0.7)/(1+0.7); math.Abs(got-want) > 0.05 {
		t.Errorf("below cwnd_prior: %.3f segments per RTT, want alpha = %.3f", got, want)
	}
	for cu.wEst < cu.cwndPrior {
		rounds(1)
	}
	if got := rounds(5); math.Abs(got-1) > 0.05 {
		t.Errorf("past cwnd_prior: %.3f segments per RTT, want 1", got)
	}
}

// RFC 9438 §4.7: a loss below the last W_max releases bandwidth: W_max =
// cwnd (1+β)/2; at or above it W_max = cwnd. Persistent congestion forgets
// both.
func TestCubicFastConvergence(t *testing.T) {
	const seg = 1000
	cu := &Cubic{}
	cu.OnCongestion(100*seg, seg)
	if cu.wMax != 100*seg || cu.cwndPrior != 100*seg {
		t.Fatalf("first loss: W_max %.0f, cwnd_prior %.0f", cu.wMax, cu.cwndPrior)
	}
	cu.OnCongestion(80*seg, seg)
	if want := 80 * seg * (1 + 0.7) / 2; math.Abs(cu.wMax-want) > 1e-6 || cu.cwndPrior != 80*seg {
		t.Fatalf("loss below W_max: W_max %.0f, want %.0f", cu.wMax, want)
	}
	// Below the window of the last loss (80) but above the reduced W_max
	// (68): no fast convergence (RFC 9438 compares with W_max).
	cu.OnCongestion(75*seg, seg)
	if cu.wMax != 75*seg {
		t.Fatalf("loss above W_max: W_max %.0f, want %d", cu.wMax, 75*seg)
	}
	cu.Reset()
	if cu.wMax != 0 || cu.cwndPrior != 0 || !cu.epoch.IsZero() {
		t.Fatalf("after Reset: %+v", *cu)
	}
}
