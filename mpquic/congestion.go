package mpquic

import (
	"fmt"

	"github.com/mptester/mptester/mpquic/internal/congestion"
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

// newController is a new path's controller.
func (c *Conn) newController() *congestion.Sender {
	var a congestion.Controller
	switch c.conf.Congestion {
	case CongestionNewReno:
		a = &congestion.NewReno{}
	case CongestionLIA:
		a = congestion.NewLIA(c.liaPaths)
	default:
		a = &congestion.Cubic{}
	}
	return congestion.NewSender(c.mss, a)
}

// liaPaths lists the open paths' windows and RTTs (under c.mu, as every
// controller call is).
func (c *Conn) liaPaths() []congestion.LIAPath {
	out := c.liaScratch[:0]
	for _, id := range c.pathIDs() {
		p := c.paths[id]
		if p.abandoned || p.closed || !p.rtt.HasSample {
			continue
		}
		out = append(out, congestion.LIAPath{Cwnd: p.cc.Cwnd, RTT: p.rtt.Smoothed})
	}
	c.liaScratch = out
	return out
}
