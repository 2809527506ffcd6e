package congestion

import (
	"math"
	"time"
)

// Window constants (RFC 9002 §7.2, Appendix B.2), and the pacer's bursts:
// at least the initial window (RFC 9002 §7.7 limits bursts to it), at most
// maxBurstPkts (a larger one overflows a 500-packet device queue on the
// way: seen in the lab as datagrams sent and never carried).
const (
	InitialWindowPkts = 10
	MinimumWindowPkts = 2
	minBurstPkts      = InitialWindowPkts
	maxBurstPkts      = 32
	granularity       = time.Millisecond // the timer granularity (RFC 9002 §6.1.2)
	// pacingQuantum is how long a burst lasts at the pacing rate: two
	// timer granularities, as a sleep is rarely shorter and the bucket
	// holds no more, so a shorter quantum would cap the rate at
	// burst/sleep.
	pacingQuantum = 2 * granularity
)

// A Controller is how a Sender's window shrinks on a congestion event and
// grows in congestion avoidance; slow start, recovery and pacing are the
// Sender's, the same for all.
type Controller interface {
	// OnCongestion is the window after a congestion event at cwnd.
	OnCongestion(cwnd, mss int) int
	// Grow is the window after acked bytes in congestion avoidance.
	Grow(cwnd, mss, acked int, now time.Time) int
	// SetRTT gives the latest RTT sample.
	SetRTT(rtt time.Duration)
	// Reset starts over after persistent congestion.
	Reset()
}

// Sender is a path's congestion control (RFC 9002 §7), in bytes: the
// window, slow start with HyStart++, recovery periods, and a pacer (§7.7)
// that spreads a window over the smoothed RTT at 5/4 of cwnd/srtt.
type Sender struct {
	MSS      int // the datagram size the window counts in (PMTU discovery raises it)
	Cwnd     int
	InFlight int // bytes in flight
	// AddrChanged: the peer's address changed then; a packet sent before
	// it and lost went to the old address, which is no sign of
	// congestion on the new one.
	AddrChanged time.Time
	// CongestionEvents counts window reductions on loss or ECN-CE.
	CongestionEvents uint64

	ssthresh      int
	recoveryStart time.Time
	ctrl          Controller
	priorInFlight int // bytes in flight before the ACK frame being processed

	tokens   float64 // pacer budget in bytes
	lastFill time.Time

	// HyStart++ (RFC 9406) round state: slow start ends when a round's
	// minimum RTT rises by eta over the previous round's, before the
	// queue it is filling overflows.
	roundEnd           uint64 // a round ends when this packet is acknowledged
	roundStarted       bool
	lastRoundMinRTT    time.Duration
	currentRoundMinRTT time.Duration
	rttSamples         int
}

// HyStart++ constants (RFC 9406 §4.3).
const (
	hsMinRTTThresh  = 4 * time.Millisecond
	hsMaxRTTThresh  = 16 * time.Millisecond
	hsMinRTTDivisor = 8
	hsNRTTSample    = 8
)

// NewSender is a path's controller in slow start with the initial window.
func NewSender(mss int, ctrl Controller) *Sender {
	return &Sender{MSS: mss, Cwnd: InitialWindowPkts * mss, ssthresh: math.MaxInt, ctrl: ctrl}
}

// InSlowStart reports whether the window is below the slow start threshold.
func (cc *Sender) InSlowStart() bool { return cc.Cwnd < cc.ssthresh }

// OnRTTSample feeds HyStart++ one sample (rtt) taken when packet largest
// was acknowledged, and the controller the smoothed RTT after it; nextPN is
// the next packet number to be sent.
func (cc *Sender) OnRTTSample(rtt, smoothed time.Duration, largest, nextPN uint64) {
	cc.ctrl.SetRTT(smoothed)
	if cc.Cwnd >= cc.ssthresh {
		return
	}
	if !cc.roundStarted || largest >= cc.roundEnd {
		cc.roundStarted = true
		cc.roundEnd = nextPN
		cc.lastRoundMinRTT = cc.currentRoundMinRTT
		cc.currentRoundMinRTT = 0
		cc.rttSamples = 0
	}
	if cc.currentRoundMinRTT == 0 || rtt < cc.currentRoundMinRTT {
		cc.currentRoundMinRTT = rtt
	}
	cc.rttSamples++
	if cc.rttSamples >= hsNRTTSample && cc.lastRoundMinRTT > 0 {
		eta := min(max(cc.lastRoundMinRTT/hsMinRTTDivisor, hsMinRTTThresh), hsMaxRTTThresh)
		if cc.currentRoundMinRTT >= cc.lastRoundMinRTT+eta {
			cc.ssthresh = cc.Cwnd // leave slow start (no conservative phase)
		}
	}
}

// CanSend reports whether size more bytes fit in the window.
func (cc *Sender) CanSend(size int) bool { return cc.InFlight+size <= cc.Cwnd }

// OnSent counts a packet of size bytes in flight.
func (cc *Sender) OnSent(size int) { cc.InFlight += size }

// OnAckFrame is called before the packets one ACK frame acknowledges:
// whether the window was used is judged by what was in flight before it.
func (cc *Sender) OnAckFrame() { cc.priorInFlight = cc.InFlight }

// OnAcked takes an acknowledged packet of size bytes, sent at sent, out of
// flight and grows the window: by its size in slow start, by the
// Controller's rule in congestion avoidance, not at all for packets sent
// before the recovery period began.
func (cc *Sender) OnAcked(size int, sent time.Time) {
	cc.InFlight -= size
	if !sent.After(cc.recoveryStart) {
		return
	}
	// RFC 9002 §7.8 (RFC 9438 §5.8): no growth while not using the window,
	// judged by the bytes in flight before the ACK frame: an ACK of many
	// packets empties the window as it is processed, and judged packet by
	// packet all but its first few packets would not grow it.
	if max(cc.priorInFlight, cc.InFlight+size)+3*cc.MSS < cc.Cwnd && cc.Cwnd >= cc.ssthresh {
		return
	}
	if cc.Cwnd < cc.ssthresh {
		cc.Cwnd += size
		return
	}
	cc.Cwnd = cc.ctrl.Grow(cc.Cwnd, cc.MSS, size, time.Now())
}

// OnLost removes a lost packet's bytes from flight; one congestion event
// per round trip (packets sent before the recovery period started are no
// new event).
func (cc *Sender) OnLost(size int, sent, now time.Time) {
	cc.InFlight -= size
	if !sent.After(cc.recoveryStart) || !sent.After(cc.AddrChanged) {
		return
	}
	cc.congestion(now)
}

// OnCE takes an increase of the peer's ECN-CE count (RFC 9002 §7.1, B.7)
// as a congestion event, sent being when the largest newly acknowledged
// packet was sent: like a loss, at most one reduction per round trip.
// True if the window was reduced.
func (cc *Sender) OnCE(sent, now time.Time) bool {
	if !sent.After(cc.recoveryStart) {
		return false
	}
	cc.congestion(now)
	return true
}

func (cc *Sender) congestion(now time.Time) {
	cc.CongestionEvents++
	cc.recoveryStart = now
	cc.ssthresh = cc.ctrl.OnCongestion(cc.Cwnd, cc.MSS)
	cc.Cwnd = cc.ssthresh
}

// OnPersistentCongestion collapses the window to the minimum (RFC 9002
// §7.6.2).
func (cc *Sender) OnPersistentCongestion() {
	cc.Cwnd = MinimumWindowPkts * cc.MSS
	cc.recoveryStart = time.Time{}
	cc.ctrl.Reset()
}

// Discard drops a packet's bytes from flight without a congestion signal
// (a discarded packet number space, RFC 9002 §6.4, or a lost PMTU probe).
func (cc *Sender) Discard(size int) { cc.InFlight -= size }

// Pace reports when a packet of size may go: zero if now. Before the first
// RTT sample (hasSample false) it does not pace.
func (cc *Sender) Pace(now time.Time, size int, srtt time.Duration, hasSample bool) time.Time {
	if !hasSample || srtt <= 0 {
		return time.Time{}
	}
	rate := 1.25 * float64(cc.Cwnd) / srtt.Seconds() // bytes per second
	// A burst is what the rate sends in pacingQuantum (as Linux sizes
	// its TSO bursts and fq its quantum), at least minBurstPkts and at
	// most maxBurstPkts: at high rates a GSO train. At low rates the
	// bucket still holds the initial window, as quic-go's does: a
	// smoother sender meets a tail-drop queue another flow keeps full in
	// more of its overflows (Aggarwal, Savage and Anderson, "Understanding
	// the performance of TCP pacing", 2000) and backs off in each; with
	// two packets here one mpquic CUBIC flow took 46% beside one paced
	// kernel TCP flow, with ten 49.7% (docs/benchmarks.md).
	burst := min(max(rate*pacingQuantum.Seconds(), float64(minBurstPkts*cc.MSS)), float64(maxBurstPkts*cc.MSS))
	if !cc.lastFill.IsZero() {
		cc.tokens += rate * now.Sub(cc.lastFill).Seconds()
	} else {
		cc.tokens = burst
	}
	cc.tokens = min(cc.tokens, burst)
	cc.lastFill = now
	if cc.tokens >= float64(size) {
		return time.Time{}
	}
	wait := time.Duration((float64(size) - cc.tokens) / rate * float64(time.Second))
	return now.Add(max(wait, 100*time.Microsecond))
}

// OnPaced spends size bytes of the pacer's budget.
func (cc *Sender) OnPaced(size int) { cc.tokens -= float64(size) }

// Controller is the avoidance the Sender was made with.
func (cc *Sender) Controller() Controller { return cc.ctrl }
