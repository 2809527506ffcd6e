package congestion

import (
	"math"
	"time"
)

// CUBIC (RFC 9438), mpquic's default Controller, replaces New
// Reno's congestion avoidance and its halving
// (RFC 9002 §7 allows any controller of its family): after a loss the
// window drops to 0.7 of itself and grows back along a cubic curve toward
// the window where the loss happened, and never slower than Reno would
// (the Reno-friendly estimate, §4.3, here at quic-go's pace: it runs Reno
// with β = 0.7, see renoAlpha). With NewReno mpquic reached 0.67-0.89 of its goodput over a 20 Mbit/s lab path with
// 0.5% loss (docs/benchmarks.md). Slow start, HyStart++, recovery periods
// and pacing are the Sender's (sender.go).
const (
	cubicC    = 0.4 // RFC 9438 §5.1, in segments per second cubed
	cubicBeta = 0.7
	// renoAlpha is the Reno-friendly region's growth in segments per RTT.
	// RFC 9438 §4.3 takes 3(1-β)/(1+β) = 0.53, fair to a Reno that halves;
	// quic-go runs Reno with β = 0.7 and grows one segment per RTT, and
	// with 0.53 mpquic reached 0.86x its goodput over a 20 Mbit/s lab path
	// with 0.5% loss (its window grew 24 KB/s between losses, quic-go's 57
	// KB/s; docs/benchmarks.md). One segment: never slower than quic-go.
	renoAlpha = 1.0
)

// Cubic is RFC 9438's congestion avoidance (a Controller).
type Cubic struct {
	wMax, wLastMax float64   // windows (bytes) at the last two congestion events
	k              float64   // seconds from the epoch to reach wMax again
	epoch          time.Time // start of this congestion avoidance stage; zero before its first ACK
	wEst           float64   // Reno-friendly window (bytes)
	rtt            time.Duration
}

// OnCongestion is §4.6-4.7: the new window, remembering where the loss
// happened (with fast convergence when it happened below the last one).
func (cu *Cubic) OnCongestion(cwnd, mss int) int {
	w := float64(cwnd)
	if w < cu.wLastMax {
		cu.wLastMax = w
		cu.wMax = w * (1 + cubicBeta) / 2
	} else {
		cu.wLastMax = w
		cu.wMax = w
	}
	cu.epoch = time.Time{}
	return max(int(w*cubicBeta), MinimumWindowPkts*mss)
}

// Grow is §4.2-4.4 for acked bytes in congestion avoidance: the window's
// new size.
func (cu *Cubic) Grow(cwnd, mss, acked int, now time.Time) int {
	w := float64(cwnd)
	if cu.epoch.IsZero() {
		cu.epoch = now
		cu.wEst = w
		if cu.wMax <= w {
			cu.k, cu.wMax = 0, w
		} else {
			cu.k = math.Cbrt((cu.wMax - w) / float64(mss) / cubicC)
		}
	}
	seg := float64(mss)
	wAt := func(t float64) float64 { d := t - cu.k; return cubicC*d*d*d*seg + cu.wMax }
	t := now.Sub(cu.epoch).Seconds()
	cu.wEst += renoAlpha * float64(acked) / w * seg
	if wAt(t) < cu.wEst {
		return max(cwnd, int(cu.wEst))
	}
	target := min(max(wAt(t+cu.rtt.Seconds()), w), 1.5*w)
	return cwnd + int((target-w)*float64(acked)/w)
}

func (cu *Cubic) SetRTT(rtt time.Duration) { cu.rtt = rtt }
func (cu *Cubic) Reset()                   { cu.epoch = time.Time{} }
