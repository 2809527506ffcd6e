package mpquic

import (
	"net"
	"net/netip"
	"time"

	"github.com/mptester/mptester/mpquic/internal/recovery"
)

// Path validation and migration of the peer (RFC 9000 §8.2, §9.3): when the
// newest non-probing packet comes from a new address (a NAT rebinding, or
// the client moved), the server sends from then on to that address and
// validates it with PATH_CHALLENGE; a new path also gets a fresh
// congestion controller and RTT estimate unless only the port changed
// (§9.4). Packets sent before the change and then lost are retransmitted
// without a congestion event: they went to the address the peer left.

func sameAddr(a, b net.Addr) bool {
	ua, ok1 := a.(*net.UDPAddr)
	ub, ok2 := b.(*net.UDPAddr)
	if ok1 && ok2 {
		// A dual-stack socket reads an IPv4 peer as ::ffff:a.b.c.d.
		return ua.AddrPort().Addr().Unmap() == ub.AddrPort().Addr().Unmap() && ua.Port == ub.Port
	}
	return a.String() == b.String()
}

func sameHost(a, b net.Addr) bool {
	ua, ok1 := a.(*net.UDPAddr)
	ub, ok2 := b.(*net.UDPAddr)
	return ok1 && ok2 && ua.AddrPort().Addr().Unmap() == ub.AddrPort().Addr().Unmap()
}

func (c *Conn) onPeerAddress(p *path, now time.Time) {
	if c.isClient || !c.confirmed || c.from == nil || sameAddr(c.from, p.remote) {
		return
	}
	if !sameHost(c.from, p.remote) {
		// The packets still in flight stay counted until acknowledged
		// or lost.
		fresh := c.newController()
		fresh.InFlight = p.cc.InFlight
		p.cc = fresh
		p.rtt, p.firstSample = recovery.RTTStats{}, time.Time{}
		// A new network path: ECN is validated anew (RFC 9000 §13.4.2).
		p.ecn = pathECN{capable: p.ecn.capable, ce: p.ecn.ce, ceEvents: p.ecn.ceEvents}
	}
	// What is in flight went to the old address: its loss is the move's,
	// not congestion (a port-only change keeps the window, §9.4, and a
	// NAT rebinding must not halve it either).
	p.cc.AddrChanged = now
	p.remote, p.local = c.from, c.local
	var d [8]byte
	copy(d[:], randomID(8))
	p.challenge, p.challengeSent = &d, false
	p.amp.start()
}

// onPathResponse validates the path whose challenge it answers, whichever
// path carried it.
func (c *Conn) onPathResponse(f PathResponseFrame) {
	for _, p := range c.paths {
		if p.challenge != nil && f.Data == *p.challenge {
			p.challenge = nil
			p.amp.lift()
			c.pathsValidated++
			if !p.validated {
				p.validated = true
				close(p.validatedCh)
			}
			c.qlogPath(p.id, "validated")
		}
	}
}

// pathResponse is a PATH_RESPONSE owed. It goes on the network path the
// PATH_CHALLENGE came on (RFC 9000 §8.2.2), which for a probe of a new
// address on an existing path (§9.1) is not the path's current address.
type pathResponse struct {
	data  [8]byte
	to    net.Addr   // the challenge's source; nil: the path's own
	from  netip.Addr // the local address the challenge reached
	limit int        // 3x the challenge's datagram: to is not validated (§8)
}

func (r pathResponse) onPath(p *path) bool { return r.to == nil || sameAddr(r.to, p.remote) }

// sendResponsesAway answers the challenges that reached p from another
// address at that address, one packet of p's space each, padded to 1200
// bytes as far as the address's anti-amplification limit allows (§8.2.2).
// The packet is not in flight: a PATH_RESPONSE is never retransmitted, and
// that address is not p's to load.
func (c *Conn) sendResponsesAway(now time.Time, p *path) {
	if c.spaces[spaceApp].seal == nil {
		return
	}
	sp := c.spaces[spaceApp]
	if p.id != 0 {
		sp = p.space
	}
	kept := p.responses[:0]
	for _, r := range p.responses {
		if r.onPath(p) {
			kept = append(kept, r)
			continue
		}
		pl := plan{sp: sp, si: spaceApp, pn: sp.nextPN, pnLen: PacketNumberLen(sp.nextPN, sp.LargestAcked), largestAckSent: -1, pathProbe: true}
		pl.payload = PathResponseFrame{Data: r.data}.Append(nil)
		if pad := min(minDatagramSize, r.limit) - c.hdrLen(p, spaceApp, pl.pnLen, 0) - len(pl.payload) - tagLen; pad > 0 {
			pl.payload = append(pl.payload, make([]byte, pad)...)
		}
		// Room for the AEAD tag: sealing appends it in place, and a
		// buffer grown to the bare packet panicked (a small limit).
		b, _ := c.sealPlan(now, p, &pl, make([]byte, 0, minDatagramSize+tagLen+64))
		if r.from.IsValid() {
			writeFrom(p.pconn, b, r.to, r.from, ecnNotECT, &p.oob)
		} else {
			p.pconn.WriteTo(b, r.to)
		}
	}
	p.responses = kept
}
