package congestion

import (
	"math"
	"time"
)

// CUBIC (RFC 9438), mpquic's default Controller, replaces New Reno's
// congestion avoidance and its halving (RFC 9002 §7 allows any controller
// of its family): after a loss the window drops to β = 0.7 of itself and
// grows back along a cubic curve of the time since, toward the window
// where the loss happened (§4.2), never slower than the Reno-friendly
// estimate (§4.3), with fast convergence (§4.7). Growth is per byte
// acknowledged: the Sender calls Grow for every acknowledged packet with
// its size, so an ACK frame covering ten packets grows the window as ten
// ACKs would. Slow start, HyStart++, recovery periods, the
// application-limited rule and pacing are the Sender's (sender.go).
const (
	cubicC    = 0.4 // RFC 9438 §5.1, in segments per second cubed
	cubicBeta = 0.7 // §4.6
	// renoAlpha is the Reno-friendly estimate's growth in segments per
	// RTT until it reaches the window before the last reduction:
	// 3(1-β)/(1+β) = 0.53, as fair to Reno as a flow that halves (§4.3);
	// 1 after.
	renoAlpha = 3 * (1 - cubicBeta) / (1 + cubicBeta)
)

// Cubic is RFC 9438's congestion avoidance (a Controller). Windows are in
// bytes; the curve's constant C is per segment (mss bytes).
type Cubic struct {
	wMax      float64       // W_max: the window at the last congestion event (after fast convergence)
	cwndPrior float64       // cwnd_prior: the window just before the last reduction
	k         float64       // K: seconds from the epoch to reach wMax again
	epoch     time.Time     // t_epoch: start of this congestion avoidance stage; zero before its first ACK
	wEst      float64       // W_est, the Reno-friendly window
	frac      float64       // increase not yet a whole byte
	rtt       time.Duration // the smoothed RTT
}

// OnCongestion is §4.6-4.7: the new window (cwnd * β), remembering where
// the loss happened, with fast convergence when it happened below the last
// one (the window is released for new flows).
func (cu *Cubic) OnCongestion(cwnd, mss int) int {
	w := float64(cwnd)
	if w < cu.wMax {
		cu.wMax = w * (1 + cubicBeta) / 2
	} else {
		cu.wMax = w
	}
	cu.cwndPrior = w
	cu.epoch = time.Time{}
	return max(int(w*cubicBeta), MinimumWindowPkts*mss)
}

// wCubic is §4.2's W_cubic(t) in bytes, t seconds into the epoch.
func (cu *Cubic) wCubic(t float64, mss int) float64 {
	d := t - cu.k
	return cubicC*d*d*d*float64(mss) + cu.wMax
}

// Grow is §4.2-4.4 for acked bytes in congestion avoidance at now: the
// window's new size.
func (cu *Cubic) Grow(cwnd, mss, acked int, now time.Time) int {
	w, seg := float64(cwnd), float64(mss)
	if cu.epoch.IsZero() {
		// §4.2: K from the window at the start of the stage; after slow
		// start (no loss yet) or above W_max the curve starts at cwnd.
		cu.epoch, cu.wEst = now, w
		if cu.wMax > w {
			cu.k = math.Cbrt((cu.wMax - w) / seg / cubicC)
		} else {
			cu.k, cu.wMax = 0, w
		}
	}
	t := now.Sub(cu.epoch).Seconds()
	// §4.3: W_est grows by alpha segments per window of acknowledged
	// segments.
	alpha := renoAlpha
	if cu.wEst >= cu.cwndPrior {
		alpha = 1
	}
	cu.wEst += alpha * float64(acked) / w * seg
	var inc float64
	if cu.wCubic(t, mss) < cu.wEst {
		inc = cu.wEst - w // the Reno-friendly region: cwnd = W_est
	} else {
		// §4.4-4.5: toward W_cubic one RTT ahead, at least not shrinking
		// and at most 1.5 times the window, by (target - cwnd)/cwnd per
		// acknowledged segment.
		target := min(max(cu.wCubic(t+cu.rtt.Seconds(), mss), w), 1.5*w)
		inc = (target - w) * float64(acked) / w
	}
	return cwnd + takeWhole(&cu.frac, max(inc, 0))
}

// SetRTT gives the smoothed RTT (§4.4's RTT).
func (cu *Cubic) SetRTT(rtt time.Duration) { cu.rtt = rtt }

// Reset starts over after persistent congestion: no curve, no memory of
// the window before.
func (cu *Cubic) Reset() { *cu = Cubic{rtt: cu.rtt} }
