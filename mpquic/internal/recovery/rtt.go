package recovery

import "time"

// RFC 9002 §6.1.2, §6.2.2 and Appendix A.2.
const (
	Granularity = time.Millisecond // kGranularity, the timer granularity
	InitialRTT  = 333 * time.Millisecond
)

// RTTStats is RFC 9002 §5's RTT estimator.
type RTTStats struct {
	Latest, Smoothed, RTTVar, Min time.Duration
	HasSample                     bool
}

// Update takes one RTT sample (§5.1): the time from sending the largest
// newly acknowledged packet, if ack-eliciting, to its ACK, and the ACK's
// ack_delay; once the handshake is confirmed the delay counts at most
// maxAckDelay (§5.3).
func (r *RTTStats) Update(sample, ackDelay time.Duration, confirmed bool, maxAckDelay time.Duration) {
	r.Latest = sample
	if !r.HasSample {
		r.HasSample = true
		r.Min, r.Smoothed, r.RTTVar = sample, sample, sample/2
		return
	}
	r.Min = min(r.Min, sample)
	if confirmed {
		ackDelay = min(ackDelay, maxAckDelay)
	}
	adjusted := sample
	if sample >= r.Min+ackDelay {
		adjusted = sample - ackDelay
	}
	d := r.Smoothed - adjusted
	if d < 0 {
		d = -d
	}
	r.RTTVar = (3*r.RTTVar + d) / 4
	r.Smoothed = (7*r.Smoothed + adjusted) / 8
}

// SmoothedOrInitial is smoothed_rtt, or kInitialRtt before a sample.
func (r *RTTStats) SmoothedOrInitial() time.Duration {
	if !r.HasSample {
		return InitialRTT
	}
	return r.Smoothed
}

// PTO is the probe timeout without the max_ack_delay term (RFC 9002
// §6.2.1): smoothed_rtt + max(4*rttvar, kGranularity). Before a sample
// smoothed_rtt is kInitialRtt and rttvar kInitialRtt/2 (§6.2.2, A.4):
// 333 + 4*166.5 ms = 999 ms.
func (r *RTTStats) PTO() time.Duration {
	if !r.HasSample {
		return InitialRTT + 4*(InitialRTT/2)
	}
	return r.Smoothed + max(4*r.RTTVar, Granularity)
}

// PersistentCongestionThreshold is kPersistentCongestionThreshold (§7.6.1).
const PersistentCongestionThreshold = 3

// PersistentCongestionDuration is §7.6.1's: (smoothed_rtt +
// max(4*rttvar, kGranularity) + max_ack_delay) *
// kPersistentCongestionThreshold.
func (r *RTTStats) PersistentCongestionDuration(maxAckDelay time.Duration) time.Duration {
	return (r.PTO() + maxAckDelay) * PersistentCongestionThreshold
}

// PTOPeriod is the probe timeout after ptoCount consecutive PTOs: (PTO +
// max_ack_delay) * 2^ptoCount (§6.2.1); maxAckDelay is 0 for the Initial
// and Handshake spaces.
func (r *RTTStats) PTOPeriod(ptoCount int, maxAckDelay time.Duration) time.Duration {
	return (r.PTO() + maxAckDelay) << ptoCount
}

// LossDelay is the time threshold of loss detection (§6.1.2):
// kTimeThreshold (9/8) times the larger of the latest and the smoothed
// RTT, at least kGranularity.
func (r *RTTStats) LossDelay() time.Duration {
	d := max(r.Latest, r.Smoothed) * timeThresholdNum / timeThresholdDen
	if !r.HasSample {
		d = InitialRTT * timeThresholdNum / timeThresholdDen
	}
	return max(d, Granularity)
}
