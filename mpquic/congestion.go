package mpquic

import (
	"fmt"
	"time"
)

// CongestionControl names the congestion avoidance of every path
// (Config.Congestion).
type CongestionControl string

const (
	// CUBIC (RFC 9438), each path on its own: the default.
	CongestionCUBIC CongestionControl = "cubic"
	// CongestionNewReno is RFC 9002 §7's: half the window on a congestion
	// event, one segment a window's worth of ACKs, each path on its own.
	CongestionNewReno CongestionControl = "newreno"
	// CongestionLIA couples the paths' increase (RFC 6356, the Linked
	// Increases Algorithm): together they take no more of a shared
	// bottleneck than one New Reno flow would, and move traffic to the
	// less congested paths.
	CongestionLIA CongestionControl = "lia"
)

// CongestionControls lists the controllers by name, the default first.
func CongestionControls() []CongestionControl {
	return []CongestionControl{CongestionCUBIC, CongestionNewReno, CongestionLIA}
}

// ParseCongestionControl checks a controller's name.
func ParseCongestionControl(s string) (CongestionControl, error) {
	cc := CongestionControl(s)
	return cc, cc.valid()
}

func (cc CongestionControl) valid() error {
	for _, c := range CongestionControls() {
		if cc == c {
			return nil
		}
	}
	return fmt.Errorf("mpquic: unknown congestion control %q (want one of %v)", string(cc), CongestionControls())
}

// avoidance is how a controller's window shrinks on a congestion event and
// grows in congestion avoidance; slow start, recovery and pacing are the
// controller's, the same for all.
type avoidance interface {
	// onCongestion is the window after a congestion event at cwnd.
	onCongestion(cwnd, mss int) int
	// grow is the window after acked bytes in congestion avoidance.
	grow(cwnd, mss, acked int, now time.Time) int
	setRTT(rtt time.Duration)
	// reset starts over after persistent congestion.
	reset()
}

// newController is a new path's controller.
func (c *Conn) newController() *controller {
	var a avoidance
	switch c.conf.Congestion {
	case CongestionNewReno:
		a = &newReno{}
	case CongestionLIA:
		a = &lia{paths: c.liaPaths}
	default:
		a = &cubic{}
	}
	return newController(c.mss, a)
}

// newReno is RFC 9002 §7.3.3's congestion avoidance: half the window on a
// congestion event, one segment for each window of acknowledged bytes.
type newReno struct{ frac float64 }

func (r *newReno) onCongestion(cwnd, mss int) int { return max(cwnd/2, minimumWindowPkts*mss) }
func (r *newReno) grow(cwnd, mss, acked int, _ time.Time) int {
	return cwnd + takeWhole(&r.frac, float64(acked)*float64(mss)/float64(cwnd))
}
func (r *newReno) setRTT(time.Duration) {}
func (r *newReno) reset()               { r.frac = 0 }

// takeWhole adds inc to *frac and takes out its whole bytes: increases of
// a fraction of a byte an ACK add up.
func takeWhole(frac *float64, inc float64) int {
	*frac += inc
	n := int(*frac)
	*frac -= float64(n)
	return n
}

// liaPath is one path's window and smoothed RTT, for LIA's coupling.
type liaPath struct {
	cwnd int
	rtt  time.Duration
}

// liaPaths lists the open paths' windows and RTTs (under c.mu, as every
// controller call is).
func (c *Conn) liaPaths() []liaPath {
	out := c.liaScratch[:0]
	for _, id := range c.pathIDs() {
		p := c.paths[id]
		if p.abandoned || p.closed || !p.rtt.hasSample {
			continue
		}
		out = append(out, liaPath{p.cc.cwnd, p.rtt.smoothed})
	}
	c.liaScratch = out
	return out
}

// lia is RFC 6356 §4's coupled increase: for bytes acked on path i the
// window grows by min(alpha * acked * MSS / cwnd_total, acked * MSS /
// cwnd_i), with alpha = cwnd_total * max_i(cwnd_i / rtt_i^2) /
// (sum_i cwnd_i / rtt_i)^2; a congestion event halves the path's window,
// as New Reno's does.
type lia struct {
	paths func() []liaPath
	frac  float64
}

func (l *lia) onCongestion(cwnd, mss int) int { return max(cwnd/2, minimumWindowPkts*mss) }
func (l *lia) setRTT(time.Duration)           {}
func (l *lia) reset()                         { l.frac = 0 }

func (l *lia) grow(cwnd, mss, acked int, _ time.Time) int {
	uncoupled := float64(acked) * float64(mss) / float64(cwnd)
	inc := uncoupled
	if a, total := liaAlpha(l.paths()); total > 0 {
		inc = min(a*float64(acked)*float64(mss)/total, uncoupled)
	}
	return cwnd + takeWhole(&l.frac, inc)
}

// liaAlpha is RFC 6356's alpha over the paths and their total window; 0,
// 0 when no path has an RTT yet.
func liaAlpha(ps []liaPath) (alpha, total float64) {
	var best, sum float64
	for _, p := range ps {
		if p.rtt <= 0 {
			continue
		}
		w, r := float64(p.cwnd), p.rtt.Seconds()
		total += w
		best = max(best, w/(r*r))
		sum += w / r
	}
	if sum == 0 {
		return 0, 0
	}
	return total * best / (sum * sum), total
}

func (cu *cubic) setRTT(rtt time.Duration) { cu.rtt = rtt }
func (cu *cubic) reset()                   { cu.epoch = time.Time{} }
