package mpquic

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/mptester/mptester/mpquic/internal/recovery"
)

// Active migration of a single-path client (RFC 9000 §9.2): the client
// moves its one path to a new local socket. It sends from there at once,
// under a connection ID of the peer's it never used (§9.5: the old and
// new addresses must not be linkable by the ID), and validates the new
// path with PATH_CHALLENGE (§8.2) while its data keeps flowing; the peer
// follows the move when our non-probing packets come from the new address
// (§9.3). A new local IP gets a fresh congestion controller and RTT
// estimate (§9.4); what was in flight on the old address is lost to the
// move, not to congestion. The old socket is read for a while longer: the
// peer's packets sent before it saw the move still arrive there.

// ErrMigrationDisabled: the peer's disable_active_migration transport
// parameter forbids moving (RFC 9000 §18.2).
var ErrMigrationDisabled = errors.New("mpquic: the peer disabled active migration")

// ErrNoSpareConnID: the peer gave no connection ID besides the one in
// use, and an ID must not be reused from a new address (RFC 9000 §9.5).
var ErrNoSpareConnID = errors.New("mpquic: no unused connection ID of the peer's to migrate with")

// oldSocketGrace is how long the old socket is still read after the new
// path is validated (at least): packets the peer sent before it saw us
// move.
const oldSocketGrace = 250 * time.Millisecond

// Migrate moves a client connection without multipath to packetConn (a
// UDP socket of the caller's, e.g. bound to another address; it is read
// until the connection ends and not closed), and returns once the new
// path is validated (or ctx ends: the connection stays on the new
// socket; the peer validates the new address from its side too). A
// multipath connection adds a path instead (AddPath).
func (c *Conn) Migrate(ctx context.Context, packetConn net.PacketConn) error {
	if !c.isClient {
		return errors.New("mpquic: only a client migrates")
	}
	now := time.Now()
	c.mu.Lock()
	switch {
	case c.closing || c.isDone():
		c.mu.Unlock()
		return ErrClosed
	case c.multipath:
		c.mu.Unlock()
		return errors.New("mpquic: a multipath connection adds a path (AddPath) rather than migrate")
	case !c.confirmed:
		c.mu.Unlock()
		return errors.New("mpquic: no migration before the handshake is confirmed (RFC 9000 §9)")
	case c.peerParams.DisableActiveMigration:
		c.mu.Unlock()
		return ErrMigrationDisabled
	}
	p := c.p0()
	if !c.switchDCID(p) {
		c.mu.Unlock()
		return ErrNoSpareConnID
	}
	old, oldStop := p.pconn, c.readStop
	if oldStop == nil {
		oldStop = &p.stopRead
	}
	stop := new(atomic.Bool)
	c.readStop = stop
	if !sameHost(old.LocalAddr(), packetConn.LocalAddr()) {
		fresh := c.newController()
		fresh.InFlight = p.cc.InFlight
		p.cc = fresh
		p.rtt, p.firstSample = recovery.RTTStats{}, time.Time{}
		p.ecn = pathECN{ce: p.ecn.ce, ceEvents: p.ecn.ceEvents}
	}
	p.cc.AddrChanged = now
	// reader: the connection's end stops the new socket's reader (a
	// socket of the caller's) as it does an added path's.
	p.pconn, p.local, p.reader = packetConn, netip.Addr{}, true
	p.gso, p.df = gsoCapable(packetConn), setDontFragment(packetConn)
	p.ecn.capable = enableECN(packetConn) && !c.conf.DisableECN
	var d [8]byte
	copy(d[:], randomID(8))
	p.challenge, p.challengeSent = &d, false
	c.qlogPath(p.id, "migrated")
	c.mu.Unlock()
	raiseBuffers(packetConn)
	go c.readSocket(p, packetConn, stop)
	c.signal()

	// The old socket's reader ends after the grace (closing it if it
	// was ours).
	retire := func() {
		oldStop.Store(true)
		c.mu.Lock()
		owned := c.ownsConn && old == c.pconn
		c.mu.Unlock()
		if owned {
			old.Close()
		} else {
			old.SetReadDeadline(time.Now())
		}
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		c.mu.Lock()
		validated := p.challenge == nil || *p.challenge != d
		grace := max(oldSocketGrace, 3*p.rtt.SmoothedOrInitial())
		c.mu.Unlock()
		if validated {
			time.AfterFunc(grace, retire)
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			time.AfterFunc(grace, retire)
			return ctx.Err()
		case <-c.ending:
			retire() // a socket of the caller's would keep its reader
			return ErrClosed
		}
	}
}
