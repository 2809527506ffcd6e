package mpquic

import (
	"errors"
	"syscall"
	"time"

	"github.com/mptester/mptester/mpquic/internal/recovery"
)

// Datagram packetization layer path MTU discovery (RFC 9000 §14.3, RFC
// 8899), per path: a path starts at Config.MaxDatagramSize (1252 by
// default, safe on any IPv6 path) and probes larger datagrams, PING and
// PADDING only, up to what both ends accept (maxDatagramSize, the peer's
// max_udp_payload_size). An acknowledged probe raises the path's size; a
// lost one is not a congestion signal (§14.4) and is tried maxPMTUProbes
// times before the search goes lower. quic-go does the same: over the
// lab's 1500-byte path it sends 1441-byte datagrams, mpquic without this
// 1252, 15% less payload a packet and a window that grows 15% slower in
// bytes (docs/benchmarks.md). Probes need the don't-fragment bit; only
// where it is set (Linux) does a path probe.
type pmtud struct {
	started bool
	size    int // the largest datagram known to pass: what the path sends
	hi      int // the smallest size known not to pass (max+1 at first)
	probe   int // the probe in flight, 0 if none
	pn      uint64
	fails   int  // losses of a probe of this size
	shrunk  bool // the largest allowed did not pass: bisecting
	nextAt  time.Time

	probesSent, probesLost uint64
	blackHoles             uint64 // fallbacks to the starting size
}

const (
	maxPMTUProbes = 3  // RFC 8899 MAX_PROBES
	pmtuPrecision = 16 // stop when the gap is this small
	// pmtuRetry spaces probes after a loss: a lost probe is often a
	// busy queue rather than the MTU.
	pmtuRetry = 50 * time.Millisecond
	// pmtuBlackHolePTOs PTOs in a row on a path that sends more than its
	// starting size: the route may have shrunk (a tunnel, a new link) and
	// every full packet vanishes (RFC 8899 §4.3, black hole detection).
	pmtuBlackHolePTOs = 3
	// pmtuResearch is how long after such a fallback the search starts
	// again, from the size that stopped working.
	pmtuResearch = time.Second
)

// pathMSS is the largest datagram p sends now.
func (c *Conn) pathMSS(p *path) int {
	if p.mtu.started {
		return p.mtu.size
	}
	return c.mss
}

// nextProbe is the size to try next: the largest allowed first (most
// paths carry 1500-byte packets), then halfway through the gap.
func (m *pmtud) nextProbe() int {
	if !m.shrunk {
		return m.hi - 1
	}
	return (m.size + m.hi) / 2
}

// done: the gap between what passes and what does not is closed.
func (m *pmtud) done() bool { return m.hi-m.size <= pmtuPrecision }

func (m *pmtud) acked(size int) {
	m.probe = 0
	m.fails = 0
	m.size = max(m.size, size)
}

func (m *pmtud) lost(size int, now time.Time) {
	m.probe = 0
	m.probesLost++
	m.nextAt = now.Add(pmtuRetry)
	if m.fails++; m.fails >= maxPMTUProbes {
		m.hi, m.fails, m.shrunk = size, 0, true
	}
}

// maybeProbeMTU sends p's next PMTU probe when one is due: after the
// handshake is confirmed, on a validated path in use with room in its
// window, one at a time.
func (c *Conn) maybeProbeMTU(now time.Time, p *path) {
	m := &p.mtu
	if !m.started {
		if !c.confirmed || !p.validated || !p.df || c.conf.DisablePathMTUDiscovery {
			return
		}
		lim := min(maxDatagramSize, int(c.peerParams.MaxUDPPayloadSize))
		m.started, m.size, m.hi = true, c.mss, lim+1
	}
	// A backup path carries nothing while it is one, probes included.
	if m.done() || m.probe != 0 || now.Before(m.nextAt) || p.abandoned || p.potentiallyFailed || p.dcid == nil || p.backup() {
		return
	}
	size := m.nextProbe()
	if !p.cc.CanSend(size) || c.spaces[spaceApp].seal == nil {
		return
	}
	sp := p.space
	pl := plan{sp: sp, si: spaceApp, pn: sp.nextPN, pnLen: PacketNumberLen(sp.nextPN, sp.LargestAcked), eliciting: true, largestAckSent: -1}
	pl.payload = PingFrame{}.Append(nil)
	pl.payload = append(pl.payload, make([]byte, size-tagLen-c.hdrLen(p, spaceApp, pl.pnLen, 0)-len(pl.payload))...) // PADDING
	pkt, sent := c.sealPlan(now, p, &pl, c.batch[:0])
	sent.MTUProbe = true
	m.probe, m.pn = size, pl.pn
	m.probesSent++
	if err := p.write(pkt); err != nil {
		if errors.Is(err, syscall.EMSGSIZE) {
			// Larger than the interface allows, known at once; the
			// packet stays in flight until declared lost (no congestion
			// signal, no second count here).
			m.fails = maxPMTUProbes - 1
			m.lost(size, now)
		}
		return
	}
	c.socketSent += uint64(len(pkt))
	p.socketSent += uint64(len(pkt))
}

// mtuBlackHole takes p back to its starting size after PTOs in a row and
// searches again later below the size that stopped working; what was
// lost goes again in packets of the starting size.
func (c *Conn) mtuBlackHole(p *path, now time.Time) {
	m := &p.mtu
	if !m.started || m.size <= c.mss {
		return
	}
	m.hi, m.size = m.size, c.mss
	m.probe, m.fails, m.shrunk = 0, 0, true
	m.nextAt = now.Add(pmtuResearch)
	m.blackHoles++
	p.cc.MSS = m.size
}

// mtuProbeAcked raises p's datagram size to the probe's.
func (c *Conn) mtuProbeAcked(p *path, sp *recovery.SentPacket) {
	if p.mtu.probe == 0 || sp.PN != p.mtu.pn {
		return
	}
	p.mtu.acked(sp.Size)
	p.cc.MSS = c.pathMSS(p)
}
