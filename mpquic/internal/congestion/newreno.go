package congestion

import "time"

// NewReno is RFC 9002 §7.3.3's congestion avoidance: half the window on a
// congestion event, one segment for each window of acknowledged bytes.
type NewReno struct{ frac float64 }

func (r *NewReno) OnCongestion(cwnd, mss int) int { return max(cwnd/2, MinimumWindowPkts*mss) }
func (r *NewReno) Grow(cwnd, mss, acked int, _ time.Time) int {
	return cwnd + takeWhole(&r.frac, float64(acked)*float64(mss)/float64(cwnd))
}
func (r *NewReno) SetRTT(time.Duration) {}
func (r *NewReno) Reset()               { r.frac = 0 }

// takeWhole adds inc to *frac and takes out its whole bytes: increases of
// a fraction of a byte an ACK add up.
func takeWhole(frac *float64, inc float64) int {
	*frac += inc
	n := int(*frac)
	*frac -= float64(n)
	return n
}
