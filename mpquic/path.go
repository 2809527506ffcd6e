package mpquic

import (
	"net"
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
		return ua.AddrPort() == ub.AddrPort()
	}
	return a.String() == b.String()
}

func sameHost(a, b net.Addr) bool {
	ua, ok1 := a.(*net.UDPAddr)
	ub, ok2 := b.(*net.UDPAddr)
	return ok1 && ok2 && ua.AddrPort().Addr() == ub.AddrPort().Addr()
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
		p.rtt = recovery.RTTStats{}
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
