package recovery

import (
	"slices"
	"testing"
	"time"

	"github.com/mptester/mptester/mpquic/internal/wire"
)

// newHistory has packets 0..n-1 sent 1 ms apart from t0.
func newHistory(t0 time.Time, n int) *History {
	var h History
	h.Reset()
	for pn := range n {
		h.OnSent(&SentPacket{PN: uint64(pn), Time: t0.Add(time.Duration(pn) * ms), Size: 1200, AckEliciting: true, InFlight: true, LargestAcked: -1})
	}
	return &h
}

func pns(ps []*SentPacket) []uint64 {
	var out []uint64
	for _, p := range ps {
		out = append(out, p.PN)
	}
	return out
}

// An ACK frame's ranges remove exactly the packets they cover (RFC 9002
// A.7), whatever the gaps, and raise the largest acknowledged.
func TestHistoryOnAck(t *testing.T) {
	t0 := time.Unix(1000, 0)
	h := newHistory(t0, 12)
	if h.LastEliciting != t0.Add(11*ms) || !h.AckElicitingInFlight() {
		t.Fatalf("last ack-eliciting %v, in flight %v", h.LastEliciting, h.AckElicitingInFlight())
	}
	newly := h.OnAck([]wire.AckRange{{Smallest: 9, Largest: 10}, {Smallest: 5, Largest: 6}, {Smallest: 0, Largest: 1}}, nil)
	if got, want := pns(newly), []uint64{0, 1, 5, 6, 9, 10}; !slices.Equal(got, want) {
		t.Errorf("acknowledged %v, want %v", got, want)
	}
	if got, want := pns(h.Sent), []uint64{2, 3, 4, 7, 8, 11}; !slices.Equal(got, want) {
		t.Errorf("still awaiting %v, want %v", got, want)
	}
	if h.LargestAcked != 10 {
		t.Errorf("largest acknowledged %d, want 10", h.LargestAcked)
	}
	// An older ACK acknowledges nothing new and does not lower it.
	if newly := h.OnAck([]wire.AckRange{{Smallest: 0, Largest: 6}}, nil); len(newly) != 3 || h.LargestAcked != 10 {
		t.Errorf("ACK of 0-6: newly %v, largest %d; want 2-4 and 10", pns(newly), h.LargestAcked)
	}
}

// RFC 9002 §6.1: with packets 0-9 sent 1 ms apart and packet 9
// acknowledged, the packet threshold (3) declares 0-6 lost at once; 7
// and 8 are lost by the time threshold, 9/8 of the RTT after they were
// sent, and LossTime says when.
func TestDetectLostByPacketAndTimeThreshold(t *testing.T) {
	t0 := time.Unix(1000, 0)
	rtt := RTTStats{}
	rtt.Update(80*ms, 0, true, 0)
	delay := rtt.LossDelay() // 90 ms
	h := newHistory(t0, 10)
	now := t0.Add(10 * ms)
	h.OnAck([]wire.AckRange{{Smallest: 9, Largest: 9}}, nil)
	var lost []*SentPacket
	collect := func(p *SentPacket) { lost = append(lost, p) }
	h.DetectLost(now, delay, collect)
	if got, want := pns(lost), []uint64{0, 1, 2, 3, 4, 5, 6}; !slices.Equal(got, want) {
		t.Fatalf("lost by packet threshold %v, want %v", got, want)
	}
	if got, want := pns(h.Sent), []uint64{7, 8}; !slices.Equal(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
	if want := t0.Add(7*ms + delay); !h.LossTime.Equal(want) {
		t.Fatalf("loss time %v, want packet 7's send time + 9/8 RTT (%v)", h.LossTime.Sub(t0), want.Sub(t0))
	}
	// Just before the loss time nothing more is lost; at it, packet 7.
	lost = nil
	h.DetectLost(h.LossTime.Add(-time.Microsecond), delay, collect)
	if len(lost) != 0 {
		t.Fatalf("lost %v before the time threshold", pns(lost))
	}
	h.DetectLost(t0.Add(7*ms+delay), delay, collect)
	if got := pns(lost); !slices.Equal(got, []uint64{7}) {
		t.Fatalf("lost at packet 7's time threshold: %v, want [7]", got)
	}
	if want := t0.Add(8*ms + delay); !h.LossTime.Equal(want) {
		t.Fatalf("next loss time %v, want %v", h.LossTime.Sub(t0), want.Sub(t0))
	}
	// Packets above the largest acknowledged are never declared lost.
	h2 := newHistory(t0, 10)
	h2.OnAck([]wire.AckRange{{Smallest: 2, Largest: 2}}, nil)
	lost = nil
	h2.DetectLost(t0.Add(time.Hour), delay, collect)
	if got := pns(lost); !slices.Equal(got, []uint64{0, 1}) {
		t.Fatalf("an hour later, largest acked 2: lost %v, want [0 1]", got)
	}
	// Nothing acknowledged yet: no loss detection at all.
	h3 := newHistory(t0, 5)
	lost = nil
	h3.DetectLost(t0.Add(time.Hour), delay, collect)
	if len(lost) != 0 || !h3.LossTime.IsZero() {
		t.Fatalf("without an ACK: lost %v, loss time %v", pns(lost), h3.LossTime)
	}
}

// RFC 9002 §6.2.1 and A.8: the PTO fires a PTO period after the last
// ack-eliciting packet, and each PTO in a row doubles the period.
func TestPTOTime(t *testing.T) {
	t0 := time.Unix(1000, 0)
	rtt := RTTStats{}
	rtt.Update(100*ms, 0, true, 0) // smoothed 100, rttvar 50: PTO 300 ms
	h := newHistory(t0, 3)         // last ack-eliciting at t0+2ms
	for count, want := range []time.Duration{325 * ms, 650 * ms, 1300 * ms} {
		if got := h.PTOTime(&rtt, count, 25*ms).Sub(t0); got != 2*ms+want {
			t.Errorf("after %d PTOs: fires at +%v, want +%v", count, got, 2*ms+want)
		}
	}
	// The handshake spaces leave out max_ack_delay.
	if got := h.PTOTime(&rtt, 0, 0).Sub(t0); got != 302*ms {
		t.Errorf("handshake space: +%v, want +302ms", got)
	}
	h.Reset()
	if h.AckElicitingInFlight() || h.LargestAcked != -1 || len(h.Sent) != 0 {
		t.Errorf("after Reset: %+v", h)
	}
}

// RFC 9002 §7.6.3's example: smoothed_rtt 1 s, rttvar 0 (PTO 1 s,
// kGranularity aside), max_ack_delay 0, so the persistent congestion
// duration is 3 s. Packet 0 is sent at t=0 and acknowledged at t=1.2 (the
// first RTT sample), packets 1-6 are sent at t=1..6 and packet 7 at t=8;
// the ACK of 7 alone at t=12 declares 1-6 lost: packets 2 and 6 (sent
// after the sample, t=2 and t=6) span 4 s > 3 s with nothing acknowledged
// between: persistent congestion. Packet 1 (sent before the sample) does
// not count. An acknowledgment of packet 4 in between breaks the period
// into spans of at most 2 s: none.
func TestPersistentCongestion(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := func(x float64) time.Time { return t0.Add(time.Duration(x * float64(time.Second))) }
	rtt := RTTStats{Smoothed: time.Second, HasSample: true}
	dur := rtt.PersistentCongestionDuration(0)
	if dur != 3*(time.Second+Granularity) {
		t.Fatalf("duration %v, want 3 x (1 s + kGranularity)", dur)
	}
	for _, tc := range []struct {
		name    string
		ackAlso []wire.AckRange // acknowledged before packet 7's ACK
		want    bool
	}{
		{"nothing acknowledged between", nil, true},
		{"packet 4 acknowledged", []wire.AckRange{{Smallest: 4, Largest: 4}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h History
			h.Reset()
			send := func(pn uint64, at float64) {
				h.OnSent(&SentPacket{PN: pn, Time: s(at), Size: 1200, AckEliciting: true, InFlight: true, LargestAcked: -1})
			}
			send(0, 0)
			for pn := uint64(1); pn <= 6; pn++ {
				send(pn, float64(pn))
			}
			h.OnAck([]wire.AckRange{{Smallest: 0, Largest: 0}}, nil) // t=1.2
			h.DetectLost(s(1.2), rtt.LossDelay(), func(*SentPacket) {})
			firstSample := s(1.2)
			send(7, 8)
			if tc.ackAlso != nil {
				h.OnAck(tc.ackAlso, nil)
			}
			h.OnAck([]wire.AckRange{{Smallest: 7, Largest: 7}}, nil)
			var lost []*SentPacket
			h.DetectLost(s(12), rtt.LossDelay(), func(p *SentPacket) { lost = append(lost, p) })
			if got := PersistentCongestion(lost, firstSample, dur); got != tc.want {
				t.Errorf("lost %v: persistent congestion %v, want %v", pns(lost), got, tc.want)
			}
			// Without an RTT sample there is none.
			if PersistentCongestion(lost, time.Time{}, dur) {
				t.Error("persistent congestion declared before any RTT sample")
			}
		})
	}
}

// A packet declared lost and acknowledged later had arrived: Spurious
// counts it once, however many ACK frames cover it again, and counts no
// packet that was really lost; it remembers the last lostMemory losses.
func TestSpuriousLosses(t *testing.T) {
	t0 := time.Unix(1000, 0)
	h := newHistory(t0, 10)
	h.OnAck([]wire.AckRange{{Smallest: 9, Largest: 9}}, nil)
	var lost []uint64
	h.DetectLost(t0.Add(10*ms), time.Second, func(p *SentPacket) { lost = append(lost, p.PN) })
	if want := []uint64{0, 1, 2, 3, 4, 5, 6}; !slices.Equal(lost, want) {
		t.Fatalf("lost %v, want %v", lost, want)
	}
	// 2, 3 and 5 had arrived (their ACK was late); 0, 1, 4 and 6 had not.
	for range 2 {
		h.OnAck([]wire.AckRange{{Smallest: 9, Largest: 9}, {Smallest: 5, Largest: 5}, {Smallest: 2, Largest: 3}}, nil)
		if h.Spurious != 3 {
			t.Fatalf("spurious %d after the late ACK of 2, 3 and 5, want 3", h.Spurious)
		}
	}
	// Beyond lostMemory losses, the oldest are forgotten.
	h = newHistory(t0, lostMemory+20)
	last := uint64(lostMemory + 19)
	h.OnAck([]wire.AckRange{{Smallest: last, Largest: last}}, nil)
	h.DetectLost(t0.Add(time.Second), time.Millisecond, func(*SentPacket) {})
	h.OnAck([]wire.AckRange{{Smallest: 0, Largest: last}}, nil)
	if h.Spurious != lostMemory {
		t.Errorf("spurious %d after acknowledging all %d lost packets, want the %d remembered", h.Spurious, lostMemory+19, lostMemory)
	}
}
