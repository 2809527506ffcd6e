package recovery

import (
	"time"

	"github.com/mptester/mptester/mpquic/internal/wire"
)

// Loss detection thresholds (RFC 9002 §6.1.1, §6.1.2).
const (
	PacketThreshold  = 3 // kPacketThreshold
	timeThresholdNum = 9 // kTimeThreshold = 9/8
	timeThresholdDen = 8
)

// SentFrame records what a frame carried, so that its loss re-queues the
// data or the signal (not the frame bytes) and its acknowledgment frees
// it. Kind and the meaning of the other fields are the connection's.
type SentFrame struct {
	Kind   uint8
	Fin    bool
	PathID uint32 // path ID of the path frames
	ID     uint64 // stream ID, or sequence number
	Off, N uint64
}

// SentPacket is a packet awaiting acknowledgment (RFC 9002 Appendix A.1.1).
type SentPacket struct {
	PN           uint64
	Time         time.Time
	Size         int
	AckEliciting bool
	InFlight     bool
	LargestAcked int64 // the largest packet its ACK frame acknowledged, -1 without one
	Frames       []SentFrame
	MTUProbe     bool // a PMTU probe: its loss is no congestion signal
	ECT          bool // sent with ECT(0): counted by ECN validation when acknowledged
	// AckedAfter: a packet sent after this one and before the next one
	// still held was acknowledged (what breaks a persistent congestion
	// period, RFC 9002 §7.6.2).
	AckedAfter bool
}

// History is one packet number space's sent packets awaiting
// acknowledgment, and its loss detection state. Its zero value is not
// ready: Reset it first (LargestAcked -1).
type History struct {
	Sent          []*SentPacket // ascending packet numbers
	LargestAcked  int64         // the largest packet the peer acknowledged, -1 if none
	LossTime      time.Time     // when the earliest packet not yet lost counts as lost; zero if none
	LastEliciting time.Time     // when the last ack-eliciting packet was sent
	// Spurious counts packets declared lost that the peer acknowledged
	// later (they had arrived: the loss was a late ACK or reordering,
	// not a drop); recentLost holds the last lostMemory packet numbers
	// declared lost, ascending, to recognize them.
	Spurious   uint64
	recentLost []uint64
}

// lostMemory is how many declared-lost packet numbers a History keeps to
// recognize a spurious loss: a few round trips' worth of losses.
const lostMemory = 64

// Reset forgets every packet (the space was discarded, RFC 9002 §6.4).
func (h *History) Reset() { *h = History{LargestAcked: -1} }

// OnSent records an ack-eliciting packet (the only kind kept: the others
// are neither retransmitted nor in flight).
func (h *History) OnSent(p *SentPacket) {
	h.Sent = append(h.Sent, p)
	if p.AckEliciting {
		h.LastEliciting = p.Time
	}
}

// AckElicitingInFlight reports whether an ack-eliciting packet awaits
// acknowledgment (what arms the PTO, §6.2.1).
func (h *History) AckElicitingInFlight() bool {
	for _, p := range h.Sent {
		if p.AckEliciting {
			return true
		}
	}
	return false
}

// OnAck removes the packets an ACK frame's ranges (descending, as the
// frame has them) acknowledge and appends them to newly, ascending
// (RFC 9002 Appendix A.7); the caller has checked that the largest was
// sent.
func (h *History) OnAck(ranges []wire.AckRange, newly []*SentPacket) []*SentPacket {
	if l := int64(ranges[0].Largest); l > h.LargestAcked {
		h.LargestAcked = l
	}
	kept := h.Sent[:0]
	acked := rangeWalk{ranges, len(ranges) - 1}
	for _, p := range h.Sent {
		if acked.covers(p.PN) {
			newly = append(newly, p)
			if len(kept) > 0 {
				kept[len(kept)-1].AckedAfter = true
			}
			continue
		}
		kept = append(kept, p)
	}
	clear(h.Sent[len(kept):])
	h.Sent = kept
	h.spuriousIn(ranges)
	return newly
}

// rangeWalk answers, for packet numbers asked in ascending order, whether
// an ACK frame's ranges (descending, as the frame has them) cover them:
// one pass over both.
type rangeWalk struct {
	ranges []wire.AckRange
	i      int // the range to look at next, from the last (smallest)
}

func (w *rangeWalk) covers(pn uint64) bool {
	for w.i >= 0 && w.ranges[w.i].Largest < pn {
		w.i--
	}
	return w.i >= 0 && pn >= w.ranges[w.i].Smallest
}

// spuriousIn counts and forgets the recently lost packets that ranges
// acknowledge.
func (h *History) spuriousIn(ranges []wire.AckRange) {
	if len(h.recentLost) == 0 || h.recentLost[0] > ranges[0].Largest {
		return
	}
	kept := h.recentLost[:0]
	acked := rangeWalk{ranges, len(ranges) - 1}
	for _, pn := range h.recentLost {
		if acked.covers(pn) {
			h.Spurious++
			continue
		}
		kept = append(kept, pn)
	}
	h.recentLost = kept
}

// DetectLost is RFC 9002 Appendix A.10: a packet sent before the largest
// acknowledged is lost when kPacketThreshold later packets were
// acknowledged or when it was sent lossDelay or longer ago (§6.1); lost
// is called for each, in ascending order, and LossTime is set to when
// the earliest one kept would count as lost.
func (h *History) DetectLost(now time.Time, lossDelay time.Duration, lost func(*SentPacket)) {
	h.LossTime = time.Time{}
	if h.LargestAcked < 0 {
		return
	}
	lostBefore := now.Add(-lossDelay)
	kept := h.Sent[:0]
	for _, p := range h.Sent {
		if int64(p.PN) > h.LargestAcked {
			kept = append(kept, p)
			continue
		}
		if !p.Time.After(lostBefore) || int64(p.PN)+PacketThreshold <= h.LargestAcked {
			if len(h.recentLost) == lostMemory {
				h.recentLost = append(h.recentLost[:0], h.recentLost[1:]...)
			}
			h.recentLost = append(h.recentLost, p.PN)
			lost(p)
			continue
		}
		if t := p.Time.Add(lossDelay); h.LossTime.IsZero() || t.Before(h.LossTime) {
			h.LossTime = t
		}
		kept = append(kept, p)
	}
	clear(h.Sent[len(kept):])
	h.Sent = kept
}

// PTOTime is when this space's probe timeout fires (RFC 9002 Appendix
// A.8): the last ack-eliciting packet's time plus the path's PTO period
// after ptoCount PTOs in a row.
func (h *History) PTOTime(rtt *RTTStats, ptoCount int, maxAckDelay time.Duration) time.Time {
	return h.LastEliciting.Add(rtt.PTOPeriod(ptoCount, maxAckDelay))
}

// PersistentCongestion is RFC 9002 §7.6.2 over the packets one DetectLost
// declared lost (ascending): whether two ack-eliciting ones, both sent
// after the path's first RTT sample (firstSample), lie more than duration
// apart with no packet sent between them acknowledged.
func PersistentCongestion(lost []*SentPacket, firstSample time.Time, duration time.Duration) bool {
	if firstSample.IsZero() {
		return false
	}
	var start *SentPacket
	for i, p := range lost {
		if i > 0 && lost[i-1].AckedAfter {
			start = nil // an acknowledgment between the two
		}
		if !p.AckEliciting || !p.Time.After(firstSample) {
			continue
		}
		if start == nil {
			start = p
		} else if p.Time.Sub(start.Time) > duration {
			return true
		}
	}
	return false
}
