package congestion

import (
	"math"
	"testing"
	"time"
)

const mss = 1200

// RFC 9002 §7.3.1-7.3.2: slow start grows the window by every
// acknowledged byte; a loss is one congestion event per recovery period
// (packets sent before it began do not reduce again), and a packet sent
// before the peer's address changed is no congestion signal at all.
func TestSenderSlowStartAndRecovery(t *testing.T) {
	cc := NewSender(mss, &NewReno{})
	t0 := time.Unix(1000, 0)
	if cc.Cwnd != InitialWindowPkts*mss || !cc.InSlowStart() {
		t.Fatalf("initial window %d, slow start %v", cc.Cwnd, cc.InSlowStart())
	}
	for range InitialWindowPkts {
		cc.OnSent(mss)
	}
	if cc.CanSend(1) {
		t.Fatal("a full window still admits a byte")
	}
	for range InitialWindowPkts {
		cc.OnAcked(mss, t0)
	}
	if cc.Cwnd != 2*InitialWindowPkts*mss || cc.InFlight != 0 {
		t.Fatalf("after a window of ACKs in slow start: cwnd %d (want %d), in flight %d", cc.Cwnd, 2*InitialWindowPkts*mss, cc.InFlight)
	}
	for range 4 {
		cc.OnSent(mss)
	}
	lossAt := t0.Add(100 * time.Millisecond)
	cc.OnLost(mss, t0.Add(time.Millisecond), lossAt)
	if cc.Cwnd != InitialWindowPkts*mss || cc.CongestionEvents != 1 || cc.InSlowStart() {
		t.Fatalf("after a loss: cwnd %d (want half, %d), events %d, slow start %v", cc.Cwnd, InitialWindowPkts*mss, cc.CongestionEvents, cc.InSlowStart())
	}
	// Sent before the recovery period began: no second reduction, and
	// its ACK does not grow the window.
	cc.OnLost(mss, t0.Add(2*time.Millisecond), lossAt.Add(time.Millisecond))
	cc.OnAcked(mss, t0.Add(3*time.Millisecond))
	if cc.Cwnd != InitialWindowPkts*mss || cc.CongestionEvents != 1 {
		t.Fatalf("second loss in one recovery period: cwnd %d, events %d", cc.Cwnd, cc.CongestionEvents)
	}
	// Sent after recovery began but before the address changed.
	cc.AddrChanged = lossAt.Add(20 * time.Millisecond)
	cc.OnLost(mss, lossAt.Add(10*time.Millisecond), lossAt.Add(30*time.Millisecond))
	if cc.Cwnd != InitialWindowPkts*mss || cc.CongestionEvents != 1 || cc.InFlight != 0 {
		t.Fatalf("loss to the old address: cwnd %d, events %d, in flight %d", cc.Cwnd, cc.CongestionEvents, cc.InFlight)
	}
	cc.OnPersistentCongestion()
	if cc.Cwnd != MinimumWindowPkts*mss {
		t.Fatalf("persistent congestion: cwnd %d, want %d", cc.Cwnd, MinimumWindowPkts*mss)
	}
}

// RFC 9002 §7.8: in congestion avoidance a window the sender does not
// fill does not grow.
func TestSenderNoGrowthWhenAppLimited(t *testing.T) {
	cc := NewSender(mss, &NewReno{})
	t0 := time.Unix(1000, 0)
	cc.ssthresh = 0
	cc.Cwnd = 20 * mss
	cc.OnSent(2 * mss)
	cc.OnAcked(mss, t0)
	if cc.Cwnd != 20*mss {
		t.Fatalf("app-limited window grew to %d", cc.Cwnd)
	}
	cc.OnSent(18 * mss)
	for range 20 {
		cc.OnAcked(mss, t0)
		cc.OnSent(mss)
	}
	// New Reno: about a segment a window (a little less, as the window
	// grows during it).
	if grown := cc.Cwnd - 20*mss; grown < mss*95/100 || grown > mss {
		t.Fatalf("a full window of ACKs in congestion avoidance grew it by %d bytes, want about %d", grown, mss)
	}
}

// RFC 9406 §4.2: slow start ends when a round's minimum RTT (over at least
// N_RTT_SAMPLE samples) exceeds the previous round's by eta =
// clamp(lastRoundMinRTT/8, 4 ms, 16 ms), and not for a smaller rise.
func TestHyStartExitsSlowStart(t *testing.T) {
	for _, c := range []struct {
		name     string
		rise     time.Duration
		wantExit bool
	}{
		{"rise below eta", 6 * time.Millisecond, false}, // eta = 50/8 = 6.25 ms
		{"rise of eta", 6250 * time.Microsecond, true},
		{"rise of 20 ms", 20 * time.Millisecond, true},
	} {
		cc := NewSender(mss, &Cubic{})
		pn := uint64(0)
		round := func(rtt time.Duration) {
			end := pn + 10 // the round's packets are those sent so far
			for range hsNRTTSample {
				cc.OnRTTSample(rtt, rtt, pn, end)
				pn++
			}
			pn = end
		}
		round(50 * time.Millisecond)
		round(50*time.Millisecond + c.rise)
		if got := !cc.InSlowStart(); got != c.wantExit {
			t.Errorf("%s: left slow start %v, want %v", c.name, got, c.wantExit)
		}
	}
}

// RFC 9002 §7.7: the pacer sends at 5/4 of cwnd/srtt after an initial
// burst, and not before an RTT sample.
func TestPacerRate(t *testing.T) {
	cc := NewSender(mss, &Cubic{})
	cc.Cwnd = 100 * mss
	srtt := 100 * time.Millisecond
	now := time.Unix(1000, 0)
	if at := cc.Pace(now, mss, 0, false); !at.IsZero() {
		t.Fatalf("paced before an RTT sample: %v", at)
	}
	sent := 0
	end := now.Add(time.Second)
	for now.Before(end) {
		if at := cc.Pace(now, mss, srtt, true); !at.IsZero() {
			now = at
			continue
		}
		cc.OnPaced(mss)
		sent += mss
	}
	want := 1.25 * float64(cc.Cwnd) / srtt.Seconds() // bytes in one second
	burst := max(want*pacingQuantum.Seconds(), minBurstPkts*mss)
	if got := float64(sent); math.Abs(got-want-burst) > 0.02*want {
		t.Errorf("paced %0.f bytes in 1 s, want %.0f at 5/4 cwnd/srtt plus a %.0f-byte burst", got, want, burst)
	}
}

// A burst (what the pacer lets go at one instant after an idle spell) is
// pacingQuantum's worth at the pacing rate, at least the initial window
// (RFC 9002 §7.7), at most maxBurstPkts: ten packets at a rate a shared
// 20 Mbit/s link carries, and a full GSO train on loopback.
func TestPacerBurst(t *testing.T) {
	for _, c := range []struct {
		name string
		cwnd int
		srtt time.Duration
		want int // packets
	}{
		{"low rate", 20 * mss, 100 * time.Millisecond, 10},             // 300 kB/s: 0.5 packet in 2 ms
		{"shared 20 Mbit/s link", 50 * mss, 30 * time.Millisecond, 10}, // 2.5 MB/s: 4.2 packets in 2 ms
		{"loopback", 1000 * mss, 200 * time.Microsecond, maxBurstPkts}, // 7.5 GB/s
		{"100 Mbit/s", 100 * mss, 12 * time.Millisecond, 20},           // 12.5 MB/s: 20.8 packets in 2 ms
	} {
		cc := NewSender(mss, &Cubic{})
		cc.Cwnd = c.cwnd
		now := time.Unix(1000, 0)
		cc.Pace(now, mss, c.srtt, true)
		now = now.Add(time.Second) // idle: the bucket fills to one burst
		n := 0
		for cc.Pace(now, mss, c.srtt, true).IsZero() && n < 1000 {
			cc.OnPaced(mss)
			n++
		}
		if n != c.want {
			t.Errorf("%s: a burst of %d packets, want %d", c.name, n, c.want)
		}
	}
}

// Growth is per byte acknowledged, whatever the ACK frames: ten packets
// acknowledged by one frame grow a full window as much as ten frames of
// one packet each (the window was used before the frame; judged packet
// by packet while the frame empties it, only the first few would count).
func TestSenderGrowsForEveryPacketOfAnAckFrame(t *testing.T) {
	t0 := time.Unix(1000, 0)
	grow := func(perFrame int) int {
		cc := NewSender(mss, &NewReno{})
		cc.ssthresh = 0
		cc.Cwnd = 20 * mss
		cc.OnSent(20 * mss)
		for i := range 10 {
			if i%perFrame == 0 {
				cc.OnAckFrame()
			}
			cc.OnAcked(mss, t0)
			if (i+1)%perFrame == 0 {
				cc.OnSent(perFrame * mss) // the sender fills the window again
			}
		}
		return cc.Cwnd - 20*mss
	}
	one, ten := grow(1), grow(10)
	if want := 10 * mss * mss / (20 * mss); one < want-10 || ten < one-2 || ten > one+2 {
		t.Errorf("ten packets grew the window by %d bytes in one ACK frame, %d in ten; want both about %d", ten, one, want)
	}
}

// RFC 9002 §7.1, B.7: a CE increase reduces the window like a loss, once
// per recovery period: a second CE report for packets sent before the
// reduction does nothing, one for a packet sent after it reduces again.
func TestSenderCEOncePerRoundTrip(t *testing.T) {
	cc := NewSender(mss, &NewReno{})
	t0 := time.Unix(1000, 0)
	cc.Cwnd = 40 * mss
	cc.ssthresh = 20 * mss // congestion avoidance
	at := t0.Add(50 * time.Millisecond)
	if !cc.OnCE(t0.Add(10*time.Millisecond), at) || cc.Cwnd != 20*mss || cc.CongestionEvents != 1 {
		t.Fatalf("first CE: cwnd %d (want %d), events %d", cc.Cwnd, 20*mss, cc.CongestionEvents)
	}
	if cc.OnCE(t0.Add(40*time.Millisecond), at.Add(10*time.Millisecond)) || cc.Cwnd != 20*mss {
		t.Fatalf("CE for a packet sent before the reduction reduced again: cwnd %d", cc.Cwnd)
	}
	if !cc.OnCE(at.Add(time.Millisecond), at.Add(60*time.Millisecond)) || cc.Cwnd != 10*mss || cc.CongestionEvents != 2 {
		t.Fatalf("CE a round trip later: cwnd %d (want %d), events %d", cc.Cwnd, 10*mss, cc.CongestionEvents)
	}
}
