package transport

import (
	"net/netip"
	"testing"
	"time"

	"github.com/quic-go/quic-go/qlog"
)

// The monitor fed with planted qlog events (what quic-go records): its
// RTT, PTO and in-flight age against the values planted.

func sent(pn int64, tuple string, frames ...any) qlog.PacketSent {
	e := qlog.PacketSent{Header: qlog.PacketHeader{PacketType: qlog.PacketType1RTT, PacketNumber: qlog.PacketNumber(pn)}, Tuple: tuple}
	for _, f := range frames {
		e.Frames = append(e.Frames, qlog.Frame{Frame: f})
	}
	return e
}

func ackOf(ranges ...[2]int64) qlog.PacketReceived {
	a := &qlog.AckFrame{}
	for _, r := range ranges { // largest range first, as on the wire
		a.AckRanges = append(a.AckRanges, qlog.AckRange{Smallest: qlog.PacketNumber(r[0]), Largest: qlog.PacketNumber(r[1])})
	}
	return qlog.PacketReceived{Header: qlog.PacketHeader{PacketType: qlog.PacketType1RTT}, Frames: []qlog.Frame{{Frame: a}}}
}

func TestPathMonitorInFlightAge(t *testing.T) {
	p := newPathMonitor()
	stream := &qlog.StreamFrame{Length: 1000}
	p.RecordEvent(qlog.ParametersSet{Initiator: qlog.InitiatorRemote, MaxAckDelay: 10 * time.Millisecond})
	p.RecordEvent(qlog.MetricsUpdated{SmoothedRTT: 20 * time.Millisecond, RTTVariance: 5 * time.Millisecond, BytesInFlight: 3000})
	t0 := time.Now()
	p.RecordEvent(sent(1, "", stream))
	p.RecordEvent(sent(2, "", &qlog.AckFrame{}))            // ack only: not ack-eliciting
	p.RecordEvent(sent(3, "1", &qlog.PathChallengeFrame{})) // a probe on the other path
	time.Sleep(30 * time.Millisecond)
	t1 := time.Now()
	p.RecordEvent(sent(4, "", stream))
	p.RecordEvent(sent(5, "", stream))

	m := p.snapshot(time.Now())
	if m.srtt != 20*time.Millisecond || m.inFlight != 3000 || m.maxAckDelay != 10*time.Millisecond {
		t.Errorf("metrics %+v", m)
	}
	// PTO = 20 + max(4*5, 1) + 10 = 50 ms.
	if m.basePTO() != 50*time.Millisecond || m.pto() != 50*time.Millisecond {
		t.Errorf("PTO %v, want 50ms", m.basePTO())
	}
	if age := m.inFlightAge; age < time.Since(t1)+30*time.Millisecond-5*time.Millisecond || age > time.Since(t0) {
		t.Errorf("in-flight age %v, want the age of packet 1 (%v)", age, time.Since(t0))
	}
	// Packet 1 acked: the oldest is packet 4.
	p.RecordEvent(ackOf([2]int64{1, 1}))
	if age := p.snapshot(time.Now()).inFlightAge; age > time.Since(t1) {
		t.Errorf("after the ack of 1: age %v, want at most %v", age, time.Since(t1))
	}
	// Packet 4 lost: its data is still in flight (retransmitted) until an
	// ack of a packet sent after the loss.
	p.RecordEvent(qlog.PacketLost{Header: qlog.PacketHeader{PacketType: qlog.PacketType1RTT, PacketNumber: 4}})
	p.RecordEvent(ackOf([2]int64{5, 5}))
	if age := p.snapshot(time.Now()).inFlightAge; age < time.Since(t1)-time.Millisecond {
		t.Errorf("lost data: age %v, want its original %v", age, time.Since(t1))
	}
	p.RecordEvent(sent(6, "", stream))
	p.RecordEvent(ackOf([2]int64{6, 6}))
	if age := p.snapshot(time.Now()).inFlightAge; age != 0 {
		t.Errorf("all acked: age %v", age)
	}
	// PTO count as quic-go reports it; a reset forgets the path's state
	// but not the peer's parameters.
	var fired uint32
	p.onPTO = func(n uint32) { fired = n }
	p.RecordEvent(qlog.PTOCountUpdated{PTOCount: 2})
	if m := p.snapshot(time.Now()); m.ptos != 2 || fired != 2 || m.pto() != 200*time.Millisecond {
		t.Errorf("pto count %d (callback %d), backed-off PTO %v", m.ptos, fired, m.pto())
	}
	p.RecordEvent(sent(7, "", stream))
	p.RecordEvent(qlog.TupleAssigned{TupleID: ""})
	if m := p.snapshot(time.Now()); m.srtt != 0 || m.ptos != 0 || m.inFlightAge != 0 || m.maxAckDelay != 10*time.Millisecond {
		t.Errorf("after a migration: %+v", m)
	}
}

func TestInTimeout(t *testing.T) {
	m := pathMetrics{srtt: 20 * time.Millisecond, rttvar: 5 * time.Millisecond, maxAckDelay: 25 * time.Millisecond} // PTO 65 ms
	for _, c := range []struct {
		age   time.Duration
		n     int
		floor time.Duration
		want  bool
	}{
		{64 * time.Millisecond, 1, 0, false},
		{65 * time.Millisecond, 1, 0, true},
		{150 * time.Millisecond, 1, 200 * time.Millisecond, false},
		{200 * time.Millisecond, 1, 200 * time.Millisecond, true},
		{194 * time.Millisecond, 2, 0, false}, // 65 + 130
		{195 * time.Millisecond, 2, 0, true},
	} {
		m.inFlightAge = c.age
		if got := m.inTimeout(c.n, c.floor); got != c.want {
			t.Errorf("age %v, %d timeouts of at least %v: %v, want %v", c.age, c.n, c.floor, got, c.want)
		}
	}
	// Timeouts in a row: 65, 65+130, 65+130+260 ms; quic-go's count when
	// higher.
	for _, c := range []struct {
		age  time.Duration
		ptos uint32
		want uint32
	}{{64 * time.Millisecond, 0, 0}, {65 * time.Millisecond, 0, 1}, {195 * time.Millisecond, 0, 2},
		{455 * time.Millisecond, 0, 3}, {10 * time.Millisecond, 2, 2}} {
		m.inFlightAge, m.ptos = c.age, c.ptos
		if got := m.rtos(0); got != c.want {
			t.Errorf("age %v, quic-go count %d: %d timeouts, want %d", c.age, c.ptos, got, c.want)
		}
	}
	if (pathMetrics{inFlightAge: time.Hour}).inTimeout(1, 0) {
		t.Error("in timeout before any RTT sample")
	}
}

func TestHandoverConfig(t *testing.T) {
	c, err := HandoverConfig{InFlight: time.Second}.withDefaults()
	if err != nil || c.InFlight != time.Second || c.PTOs != 1 || c.MinTimeout != 200*time.Millisecond || c.Reprobe != time.Second {
		t.Errorf("defaults: %+v %v", c, err)
	}
	if _, err := New(nameQUICHandover, Options{Paths: []PathRole{{}}, TLS: nil}); err == nil {
		t.Error("no TLS accepted")
	}
	d, _ := Get(nameQUICHandover)
	if _, err := d.New(Options{Handover: HandoverConfig{Hold: -time.Second}}); err == nil {
		t.Error("a negative hold accepted")
	}
	if !d.Handover || !d.Multipath || d.Listener() != nameQUIC {
		t.Errorf("descriptor %+v", d)
	}
}

// TestPathMonitorBytes: packets counted by the local address of the tuple
// they went over, following quic-go's tuple assignments across a switch.
func TestPathMonitorBytes(t *testing.T) {
	p := newPathMonitor()
	wlan, wwan := netip.MustParseAddrPort("198.18.1.2:1000"), netip.MustParseAddrPort("198.18.2.2:2000")
	p.tuple("", wlan)
	pkt := func(n int, tuple string) qlog.PacketSent {
		e := sent(0, tuple)
		e.Raw.Length = n
		return e
	}
	in := func(n int, tuple string) qlog.PacketReceived {
		return qlog.PacketReceived{Raw: qlog.RawInfo{Length: n}, Tuple: tuple}
	}
	p.RecordEvent(pkt(1200, ""))
	p.RecordEvent(in(1000, ""))
	p.RecordEvent(qlog.TupleAssigned{TupleID: "1", Local: qlog.TupleEndpointInfo{IPv4: wwan}})
	p.RecordEvent(pkt(100, "1")) // a probe of wwan0
	p.RecordEvent(in(50, "1"))
	// The switch: wlan0 becomes tuple 0, wwan0 the path in use.
	p.RecordEvent(qlog.TupleAssigned{TupleID: "0", Local: qlog.TupleEndpointInfo{IPv4: wlan}})
	p.RecordEvent(qlog.TupleAssigned{TupleID: "", Local: qlog.TupleEndpointInfo{IPv4: wwan}})
	p.RecordEvent(pkt(700, ""))
	p.RecordEvent(in(300, ""))
	p.RecordEvent(qlog.PacketDropped{Raw: qlog.RawInfo{Length: 40}})
	for _, c := range []struct {
		local      netip.AddrPort
		sent, recv uint64
	}{{wlan, 1200, 1000}, {wwan, 800, 390}} {
		if s, r := p.bytes([]netip.AddrPort{c.local}); s != c.sent || r != c.recv {
			t.Errorf("%s: sent %d received %d, want %d %d", c.local, s, r, c.sent, c.recv)
		}
	}
}
