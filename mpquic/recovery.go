package mpquic

import (
	"math"
	"time"
)

// Loss detection and congestion control constants (RFC 9002 §6.1, §6.2,
// §7.2, Appendix A.2 and B.2).
const (
	packetThreshold   = 3
	timeThresholdNum  = 9 // kTimeThreshold = 9/8
	timeThresholdDen  = 8
	granularity       = time.Millisecond
	initialRTT        = 333 * time.Millisecond
	persistentCongest = 3
	initialWindowPkts = 10
	minimumWindowPkts = 2
	maxAckRanges      = 64
	maxBurstPkts      = 32
)

// Kinds of sentFrame: what a lost packet's frame means to the sender.
const (
	sfStream uint8 = iota
	sfCrypto
	sfMaxData
	sfMaxStreamData
	sfMaxStreams
	sfHandshakeDone
	sfResetStream
	sfStopSending
	sfDataBlocked
	sfAck
	sfNewCID
	sfRetireCID
	sfPathChallenge
	sfPathAbandon
	sfPathStatus
	sfMaxPathID
)

// sentFrame records what a frame carried, so that its loss re-queues the
// data or the signal (not the frame bytes) and its acknowledgment frees it.
type sentFrame struct {
	kind   uint8
	fin    bool
	pid    uint32 // path ID of the path frames
	id     uint64 // stream ID, or sequence number
	off, n uint64
}

type sentPacket struct {
	pn           uint64
	time         time.Time
	size         int
	ackEliciting bool
	inFlight     bool
	largestAcked int64 // the ACK frame's largest, -1 without one
	frames       []sentFrame
	mtuProbe     bool // a PMTU probe (pmtud.go): its loss is no congestion signal
}

// rttStats is RFC 9002 §5's RTT estimator.
type rttStats struct {
	latest, smoothed, rttvar, min time.Duration
	hasSample                     bool
}

func (r *rttStats) update(sample, ackDelay time.Duration, confirmed bool, maxAckDelay time.Duration) {
	r.latest = sample
	if !r.hasSample {
		r.hasSample = true
		r.min, r.smoothed, r.rttvar = sample, sample, sample/2
		return
	}
	r.min = min(r.min, sample)
	if confirmed {
		ackDelay = min(ackDelay, maxAckDelay)
	}
	adjusted := sample
	if sample >= r.min+ackDelay {
		adjusted = sample - ackDelay
	}
	d := r.smoothed - adjusted
	if d < 0 {
		d = -d
	}
	r.rttvar = (3*r.rttvar + d) / 4
	r.smoothed = (7*r.smoothed + adjusted) / 8
}

func (r *rttStats) smoothedOrInitial() time.Duration {
	if !r.hasSample {
		return initialRTT
	}
	return r.smoothed
}

// pto is the probe timeout without the max_ack_delay term (RFC 9002 §6.2.1).
func (r *rttStats) pto() time.Duration {
	if !r.hasSample {
		return 2 * initialRTT
	}
	return r.smoothed + max(4*r.rttvar, granularity)
}

func (r *rttStats) lossDelay() time.Duration {
	d := max(r.latest, r.smoothed) * timeThresholdNum / timeThresholdDen
	if !r.hasSample {
		d = initialRTT * timeThresholdNum / timeThresholdDen
	}
	return max(d, granularity)
}

// controller is a path's congestion control (RFC 9002 §7), in bytes:
// the window, slow start with HyStart++, recovery periods, and a pacer
// (§7.7) that spreads a window over the smoothed RTT at 5/4 of cwnd/srtt.
// How the window shrinks on a congestion event and grows in congestion
// avoidance is its avoidance's: CUBIC (the default), New Reno or LIA
// (Config.Congestion).
type controller struct {
	mss           int
	cwnd          int
	ssthresh      int
	inFlight      int
	recoveryStart time.Time
	avoid         avoidance
	// addrChanged: the peer's address changed then (path.go); a packet
	// sent before it and lost went to the old address, which is no sign
	// of congestion on the new one.
	addrChanged time.Time
	// congestionEvents counts window reductions on loss.
	congestionEvents uint64

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

// onRTTSample feeds HyStart++ one sample taken when packet largest was
// acknowledged; nextPN is the next packet number to be sent.
func (cc *controller) onRTTSample(rtt time.Duration, largest, nextPN uint64) {
	cc.avoid.setRTT(rtt)
	if cc.cwnd >= cc.ssthresh {
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
			cc.ssthresh = cc.cwnd // leave slow start (no conservative phase)
		}
	}
}

func newController(mss int, avoid avoidance) *controller {
	return &controller{mss: mss, cwnd: initialWindowPkts * mss, ssthresh: math.MaxInt, avoid: avoid}
}

func (cc *controller) canSend(size int) bool { return cc.inFlight+size <= cc.cwnd }
func (cc *controller) onSent(size int)       { cc.inFlight += size }

func (cc *controller) onAcked(p *sentPacket) {
	cc.inFlight -= p.size
	if !p.time.After(cc.recoveryStart) {
		return
	}
	// RFC 9002 §7.8: no growth while not using the window.
	if cc.inFlight+3*cc.mss < cc.cwnd && cc.cwnd >= cc.ssthresh {
		return
	}
	if cc.cwnd < cc.ssthresh {
		cc.cwnd += p.size
		return
	}
	cc.cwnd = cc.avoid.grow(cc.cwnd, cc.mss, p.size, time.Now())
}

// onLost removes lost bytes from flight; one congestion event per round
// trip (packets sent before the recovery period started).
func (cc *controller) onLost(p *sentPacket, now time.Time) {
	cc.inFlight -= p.size
	if !p.time.After(cc.recoveryStart) || !p.time.After(cc.addrChanged) {
		return
	}
	cc.congestionEvents++
	cc.recoveryStart = now
	cc.ssthresh = cc.avoid.onCongestion(cc.cwnd, cc.mss)
	cc.cwnd = cc.ssthresh
}

func (cc *controller) onPersistentCongestion() {
	cc.cwnd = minimumWindowPkts * cc.mss
	cc.recoveryStart = time.Time{}
	cc.avoid.reset()
}

// discard drops packets of a discarded space from flight without a
// congestion signal (RFC 9002 §6.4).
func (cc *controller) discard(p *sentPacket) { cc.inFlight -= p.size }

// pace reports when a packet of size may go: zero if now. Before the first
// RTT sample it does not pace.
func (cc *controller) pace(now time.Time, size int, srtt time.Duration, hasSample bool) time.Time {
	if !hasSample || srtt <= 0 {
		return time.Time{}
	}
	rate := 1.25 * float64(cc.cwnd) / srtt.Seconds() // bytes per second
	// A burst covers up to two timer granularities (a sleep is rarely
	// shorter, and a smaller burst would cap the rate at burst/sleep), but
	// at most maxBurstPkts: a larger one overflows a 500-packet device
	// queue on the way (seen in the lab as datagrams sent and never
	// carried).
	burst := max(float64(initialWindowPkts*cc.mss), min(rate*float64(2*granularity)/float64(time.Second), float64(maxBurstPkts*cc.mss)))
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

func (cc *controller) onPaced(size int) { cc.tokens -= float64(size) }
