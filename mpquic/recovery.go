package mpquic

import "time"

// Loss detection and congestion control constants (RFC 9002 §6.1, §6.2,
// §7.2, Appendix A.2 and B.2).
const (
	packetThreshold   = 3
	timeThresholdNum  = 9 // kTimeThreshold = 9/8
	timeThresholdDen  = 8
	granularity       = time.Millisecond
	initialRTT        = 333 * time.Millisecond
	persistentCongest = 3
	maxAckRanges      = 64
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
