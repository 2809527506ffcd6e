package transport

import (
	"cmp"
	"net/netip"
	"sync"
	"time"

	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

// pathMonitor follows the recovery state of a quic-go connection's active
// path from its qlog events (quic-go exposes no per-path statistics; a
// Tracer's events are typed values, read here without encoding them):
// RTT estimates and bytes in flight (recovery:metrics_updated), the PTO
// count (reset by quic-go when an ack arrives, so a count above 0 is 000
// §II-B's "the timer has fired and no acknowledgment was received since"),
// and the send times of ack-eliciting 1-RTT packets not yet acknowledged,
// for the age of the oldest data in flight.
type pathMonitor struct {
	mu sync.Mutex
	m  pathMetrics
	// out: ack-eliciting 1-RTT packets on the active path not yet acked
	// or declared lost, in packet-number order.
	out []sentPacket
	// lostSince is the oldest send time of data declared lost and not yet
	// known delivered (its retransmission is in flight); lostAt is when
	// the loss was declared.
	lostSince, lostAt time.Time
	onPTO             func(uint32)
	// Bytes of the QUIC packets sent and received (UDP payloads) by local
	// socket address; tuples maps quic-go's tuple IDs ("" is the path in
	// use) to local addresses.
	tuples map[string]netip.AddrPort
	sent   map[netip.AddrPort]uint64
	recv   map[netip.AddrPort]uint64
}

type sentPacket struct {
	pn qlog.PacketNumber
	t  time.Time
}

// pathMetrics is what the switching rule and the samples read of a path.
type pathMetrics struct {
	srtt, rttvar time.Duration
	// maxAckDelay is the peer's max_ack_delay transport parameter.
	maxAckDelay time.Duration
	inFlight    uint64
	ptos        uint32
	inFlightAge time.Duration
}

// defaultMaxAckDelay is RFC 9000's default max_ack_delay, until the
// peer's transport parameters say otherwise.
const defaultMaxAckDelay = 25 * time.Millisecond

// basePTO is RFC 9002 §6.2.1's probe timeout, srtt + max(4 rttvar, 1 ms)
// + the peer's max_ack_delay, as quic-go computes it from the same
// estimates; 0 before the first RTT sample on the path.
func (m pathMetrics) basePTO() time.Duration {
	if m.srtt == 0 {
		return 0
	}
	return m.srtt + max(4*m.rttvar, time.Millisecond) + cmp.Or(m.maxAckDelay, defaultMaxAckDelay)
}

// pto is the probe timeout with the current backoff (2^ptos).
func (m pathMetrics) pto() time.Duration { return m.basePTO() << min(m.ptos, 16) }

// inTimeout is 000 §II-B's "the path is experiencing RTO: the timer has
// fired and no acknowledgment was received since" for n timeouts in a
// row: the oldest unacknowledged data is older than the probe timeout
// and its backoffs (PTO·(2^n - 1)). It is timed from the oldest packet,
// as a TCP retransmission timer is (RFC 6298 §5.1), not read from
// quic-go's PTO count: QUIC re-arms its PTO on every ack-eliciting send
// (RFC 9002 §6.2.1), so an interactive stream sending every 100 ms on a
// path whose PTO is a little over 100 ms never lets it fire (seen in the
// lab: no PTO for 600 ms after Wi-Fi died, srtt 29 ms, rttvar 12 ms); and
// quic-go also raises its count when its timer fires for a path probe on
// the other path.
// The timeout is at least floor (HandoverConfig.MinTimeout).
func (m pathMetrics) inTimeout(n int, floor time.Duration) bool {
	return n > 0 && m.timeouts(floor) >= uint32(n)
}

// timeouts counts the timeouts in a row the oldest unacknowledged data
// has waited: the largest n with age >= T·(2^n - 1), T = max(PTO, floor).
func (m pathMetrics) timeouts(floor time.Duration) uint32 {
	t := max(m.basePTO(), floor)
	if m.basePTO() == 0 {
		return 0
	}
	var n uint32
	for n < 16 && m.inFlightAge >= t*time.Duration(1<<(n+1)-1) {
		n++
	}
	return n
}

// rtos is PathState.RTOs: the timeouts in progress by that rule, or
// quic-go's own PTO count when higher.
func (m pathMetrics) rtos(floor time.Duration) uint32 { return max(m.ptos, m.timeouts(floor)) }

func newPathMonitor() *pathMonitor {
	return &pathMonitor{tuples: map[string]netip.AddrPort{}, sent: map[netip.AddrPort]uint64{}, recv: map[netip.AddrPort]uint64{}}
}

// tuple names the local address of quic-go's tuple id.
func (p *pathMonitor) tuple(id string, local netip.AddrPort) {
	p.mu.Lock()
	p.tuples[id] = local
	p.mu.Unlock()
}

// count adds a packet of n bytes over tuple id.
func (p *pathMonitor) count(to map[netip.AddrPort]uint64, id string, n int) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	to[p.tuples[id]] += uint64(n)
	p.mu.Unlock()
}

// bytes sums what the sockets at locals sent and received.
func (p *pathMonitor) bytes(locals []netip.AddrPort) (sent, recv uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range locals {
		sent += p.sent[l]
		recv += p.recv[l]
	}
	return sent, recv
}

// AddProducer implements qlogwriter.Trace: the monitor is its own
// recorder.
func (p *pathMonitor) AddProducer() qlogwriter.Recorder { return p }

// Close implements qlogwriter.Recorder.
func (p *pathMonitor) Close() error { return nil }

// RecordEvent runs on quic-go's connection loop: it must be quick.
func (p *pathMonitor) RecordEvent(e qlogwriter.Event) {
	now := time.Now()
	switch ev := e.(type) {
	case qlog.TupleAssigned:
		local := ev.Local.IPv4
		if !local.IsValid() {
			local = ev.Local.IPv6
		}
		p.tuple(ev.TupleID, local)
		// The client's migration takes effect now, on quic-go's loop:
		// what was in flight is declared lost (without events) and
		// retransmitted on the new path.
		if ev.TupleID == "" {
			p.reset()
		}
	case qlog.PacketDropped:
		// Undecryptable or duplicate: still bytes the path carried (the
		// event names no tuple: counted to the path in use).
		p.count(p.recv, "", ev.Raw.Length)
	case qlog.ParametersSet:
		if ev.Initiator == qlog.InitiatorRemote && ev.MaxAckDelay > 0 {
			p.mu.Lock()
			p.m.maxAckDelay = ev.MaxAckDelay
			p.mu.Unlock()
		}
	case qlog.MetricsUpdated:
		p.mu.Lock()
		if ev.SmoothedRTT > 0 {
			p.m.srtt, p.m.rttvar = ev.SmoothedRTT, ev.RTTVariance
		}
		p.m.inFlight = uint64(max(ev.BytesInFlight, 0))
		p.mu.Unlock()
	case qlog.PTOCountUpdated:
		p.mu.Lock()
		p.m.ptos = ev.PTOCount
		f := p.onPTO
		p.mu.Unlock()
		if f != nil && ev.PTOCount > 0 {
			f(ev.PTOCount)
		}
	case qlog.PacketSent:
		p.count(p.sent, ev.Tuple, ev.Raw.Length)
		// Tuple "" is the path in use; path probes on the other are
		// excluded, as quic-go keeps them out of its recovery state.
		if ev.Header.PacketType != qlog.PacketType1RTT || ev.Tuple != "" || !ackEliciting(ev.Frames) {
			return
		}
		p.mu.Lock()
		p.out = append(p.out, sentPacket{pn: ev.Header.PacketNumber, t: now})
		p.mu.Unlock()
	case qlog.PacketReceived:
		p.count(p.recv, ev.Tuple, ev.Raw.Length)
		if ev.Header.PacketType != qlog.PacketType1RTT {
			return
		}
		for _, f := range ev.Frames {
			if ack, ok := f.Frame.(*qlog.AckFrame); ok {
				p.acked(ack)
			}
		}
	case qlog.PacketLost:
		if ev.Header.PacketType != qlog.PacketType1RTT {
			return
		}
		p.mu.Lock()
		for i, s := range p.out {
			if s.pn == ev.Header.PacketNumber {
				if p.lostSince.IsZero() || s.t.Before(p.lostSince) {
					p.lostSince = s.t
				}
				p.lostAt = now
				p.out = append(p.out[:i], p.out[i+1:]...)
				break
			}
		}
		p.mu.Unlock()
	}
}

// acked drops what an ACK frame acknowledges. An ack of a packet sent
// after the last loss was declared means the retransmissions got through.
func (p *pathMonitor) acked(ack *qlog.AckFrame) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.out[:0]
	for _, s := range p.out {
		if s.pn <= ack.LargestAcked() && ack.AcksPacket(s.pn) {
			if !p.lostAt.IsZero() && s.t.After(p.lostAt) {
				p.lostSince, p.lostAt = time.Time{}, time.Time{}
			}
			continue
		}
		kept = append(kept, s)
	}
	p.out = kept
}

func ackEliciting(fs []qlog.Frame) bool {
	for _, f := range fs {
		switch f.Frame.(type) {
		case *qlog.AckFrame, *qlog.ConnectionCloseFrame:
		case *qlog.PathChallengeFrame, *qlog.PathResponseFrame:
			return false
		default:
			return true
		}
	}
	return false
}

// snapshot is the active path's state now.
func (p *pathMonitor) snapshot(now time.Time) pathMetrics {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.m
	oldest := p.lostSince
	if len(p.out) > 0 && (oldest.IsZero() || p.out[0].t.Before(oldest)) {
		oldest = p.out[0].t
	}
	if !oldest.IsZero() {
		m.inFlightAge = now.Sub(oldest)
	}
	return m
}

// reset forgets the path just left: quic-go resets its recovery state on
// a switch (and retransmits what was in flight on the new path).
func (p *pathMonitor) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m = pathMetrics{maxAckDelay: p.m.maxAckDelay}
	p.out = p.out[:0]
	p.lostSince, p.lostAt = time.Time{}, time.Time{}
}
