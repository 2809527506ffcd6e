package congestion

import "time"

// LIAPath is one path's window and smoothed RTT, for LIA's coupling.
type LIAPath struct {
	Cwnd int
	RTT  time.Duration
}

// LIA is RFC 6356 §4's coupled increase: for bytes acked on path i the
// window grows by min(alpha * acked * MSS / cwnd_total, acked * MSS /
// cwnd_i), with alpha = cwnd_total * max_i(cwnd_i / rtt_i^2) /
// (sum_i cwnd_i / rtt_i)^2; a congestion event halves the path's window,
// as New Reno's does.
type LIA struct {
	paths func() []LIAPath
	frac  float64
}

// NewLIA is one path's LIA; paths lists every open path of the
// connection (with an RTT sample) when it is called.
func NewLIA(paths func() []LIAPath) *LIA { return &LIA{paths: paths} }

func (l *LIA) OnCongestion(cwnd, mss int) int { return max(cwnd/2, MinimumWindowPkts*mss) }
func (l *LIA) SetRTT(time.Duration)           {}
func (l *LIA) Reset()                         { l.frac = 0 }

func (l *LIA) Grow(cwnd, mss, acked int, _ time.Time) int {
	uncoupled := float64(acked) * float64(mss) / float64(cwnd)
	inc := uncoupled
	if a, total := liaAlpha(l.paths()); total > 0 {
		inc = min(a*float64(acked)*float64(mss)/total, uncoupled)
	}
	return cwnd + takeWhole(&l.frac, inc)
}

// liaAlpha is RFC 6356's alpha over the paths and their total window; 0,
// 0 when no path has an RTT yet.
func liaAlpha(ps []LIAPath) (alpha, total float64) {
	var best, sum float64
	for _, p := range ps {
		if p.RTT <= 0 {
			continue
		}
		w, r := float64(p.Cwnd), p.RTT.Seconds()
		total += w
		best = max(best, w/(r*r))
		sum += w / r
	}
	if sum == 0 {
		return 0, 0
	}
	return total * best / (sum * sum), total
}
