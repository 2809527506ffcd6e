package recovery

import (
	"testing"
	"time"
)

const ms = time.Millisecond

// RFC 9002 §5.2-5.3, sample by sample: the first sample sets min_rtt and
// smoothed_rtt to itself and rttvar to half of it; later ones move
// smoothed_rtt by 1/8 and rttvar by 1/4 of the difference, after taking
// out the ack delay (capped at max_ack_delay once the handshake is
// confirmed, and only while that leaves at least min_rtt).
func TestRTTUpdate(t *testing.T) {
	const maxAckDelay = 25 * ms
	var r RTTStats
	if r.SmoothedOrInitial() != InitialRTT {
		t.Fatalf("before a sample: %v, want kInitialRtt", r.SmoothedOrInitial())
	}
	steps := []struct {
		name                  string
		sample, ackDelay      time.Duration
		confirmed             bool
		min, smoothed, rttvar time.Duration
	}{
		// First sample: the ack delay is ignored (§5.3).
		{"first", 100 * ms, 10 * ms, true, 100 * ms, 100 * ms, 50 * ms},
		// adjusted = 120 - 10 = 110: rttvar = 3/4*50 + 1/4*|100-110| = 40,
		// smoothed = 7/8*100 + 1/8*110 = 101.25.
		{"ack delay taken out", 120 * ms, 10 * ms, true, 100 * ms, 101250 * time.Microsecond, 40 * ms},
		// 105 < min_rtt + 10: the delay is not taken out, adjusted = 105:
		// rttvar = 3/4*40 + 1/4*3.75 = 30.9375, smoothed = 7/8*101.25 + 105/8 = 101.71875.
		{"delay would go below min_rtt", 105 * ms, 10 * ms, true, 100 * ms, 101718750 * time.Nanosecond, 30937500 * time.Nanosecond},
		// Confirmed: an ack delay of 50 counts as max_ack_delay 25,
		// adjusted = 175: rttvar = 3/4*30.9375 + 1/4*73.28125 = 41.5234375,
		// smoothed = 7/8*101.71875 + 175/8 = 110.87890625.
		{"ack delay capped", 200 * ms, 50 * ms, true, 100 * ms, 110878906 * time.Nanosecond, 41523437 * time.Nanosecond},
		// A new minimum (min_rtt ignores ack delay, §5.2).
		{"new min", 80 * ms, 0, true, 80 * ms, 0, 0},
	}
	for _, s := range steps {
		r.Update(s.sample, s.ackDelay, s.confirmed, maxAckDelay)
		if r.Latest != s.sample || r.Min != s.min {
			t.Errorf("%s: latest %v min %v, want %v %v", s.name, r.Latest, r.Min, s.sample, s.min)
		}
		if s.smoothed != 0 && (absDur(r.Smoothed-s.smoothed) > time.Microsecond || absDur(r.RTTVar-s.rttvar) > time.Microsecond) {
			t.Errorf("%s: smoothed %v rttvar %v, want %v %v", s.name, r.Smoothed, r.RTTVar, s.smoothed, s.rttvar)
		}
	}

	// Before confirmation the peer's ack delay is not capped (§5.3).
	a, b := RTTStats{}, RTTStats{}
	for _, r := range []*RTTStats{&a, &b} {
		r.Update(100*ms, 0, false, maxAckDelay)
	}
	a.Update(200*ms, 50*ms, false, maxAckDelay)
	b.Update(200*ms, 50*ms, true, maxAckDelay)
	if want := (7*100*ms + 150*ms) / 8; a.Smoothed != want {
		t.Errorf("unconfirmed: smoothed %v, want %v (the whole 50 ms delay out)", a.Smoothed, want)
	}
	if want := (7*100*ms + 175*ms) / 8; b.Smoothed != want {
		t.Errorf("confirmed: smoothed %v, want %v (25 ms of the delay out)", b.Smoothed, want)
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// RFC 9002 §6.2.1: PTO = smoothed_rtt + max(4*rttvar, kGranularity) +
// max_ack_delay, doubled after each PTO in a row (§6.2.1's backoff);
// §6.1.2: the loss delay is 9/8 of max(latest_rtt, smoothed_rtt), at
// least kGranularity.
func TestPTOAndLossDelay(t *testing.T) {
	r := RTTStats{HasSample: true, Smoothed: 100 * ms, RTTVar: 10 * ms, Latest: 120 * ms, Min: 90 * ms}
	if got := r.PTO(); got != 140*ms {
		t.Errorf("PTO %v, want 100 + 4*10 = 140 ms", got)
	}
	for count, want := range []time.Duration{165 * ms, 330 * ms, 660 * ms, 1320 * ms} {
		if got := r.PTOPeriod(count, 25*ms); got != want {
			t.Errorf("PTO period after %d PTOs: %v, want %v", count, got, want)
		}
	}
	if got := r.LossDelay(); got != 135*ms {
		t.Errorf("loss delay %v, want 9/8 * 120 = 135 ms", got)
	}
	// rttvar near zero: the granularity term.
	tiny := RTTStats{HasSample: true, Smoothed: 100 * time.Microsecond, RTTVar: 10 * time.Microsecond, Latest: 100 * time.Microsecond}
	if got := tiny.PTO(); got != 100*time.Microsecond+Granularity {
		t.Errorf("PTO %v, want smoothed + kGranularity", got)
	}
	if got := tiny.LossDelay(); got != Granularity {
		t.Errorf("loss delay %v, want kGranularity", got)
	}
	// Before a sample the loss delay is 9/8 of kInitialRtt.
	var none RTTStats
	if got, want := none.LossDelay(), InitialRTT*9/8; got != want {
		t.Errorf("loss delay before a sample %v, want %v", got, want)
	}
	if got := none.PTO(); got != 999*time.Millisecond {
		t.Errorf("PTO before a sample %v, want 999ms (RFC 9002 §6.2.2: 333 ms + 4 x 166.5 ms)", got)
	}
}
