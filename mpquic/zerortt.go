package mpquic

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"net"
	"sync/atomic"
	"time"
)

// 0-RTT (RFC 9001 §4.6, RFC 9000 §7.4.1). A server with Config.Allow0RTT
// issues session tickets that allow early data and carry the transport
// parameters it had then; it accepts 0-RTT only while its current limits
// are at least those. A client remembers the server's parameters beside
// its ticket (crypto/tls's session events), so its 0-RTT packets keep to
// the limits the server will enforce; a rejection requeues all they
// carried as lost, for 1-RTT.

// Prefixes of our entries in tls.SessionState.Extra (other entries are
// left alone).
var (
	extraServerParams = []byte("mpquic-server-tp1:")
	extraPeerParams   = []byte("mpquic-peer-tp1:")
	extraTicketFrac   = []byte("mpquic-ticket-frac:")
)

// siZeroRTT names a 0-RTT packet in the qlog (packets share the
// application space, spaceApp).
const siZeroRTT = numSpaces

// earlyState is a connection's 0-RTT.
type earlyState struct {
	seal, open *Keys    // client: 0-RTT write key; server: its read key
	buffered   [][]byte // server: 0-RTT packets before the key, each followed by its ECN codepoint
	offered    bool     // client: our ClientHello offered early data
	accepted   bool     // server: the early read key came (it accepts)
	rejected   bool     // client: the server declined
	sent, recv uint64   // 0-RTT packets sent (client), opened (server)
	ready      chan struct{}
	remembered TransportParameters // client: the limits 0-RTT kept to
	// clockBack is how far the client's TLS clock runs behind (ticketClock).
	clockBack atomic.Int64
}

// ticketClock is a client's TLS clock, set back by the fraction of a
// second its ticket was received past the whole second. crypto/tls keeps
// a ticket's receipt time in whole seconds, so the ticket age a
// ClientHello reports is up to a second above the real one, and a server
// that refuses a client's age above its own (GnuTLS's anti-replay: ngtcp2
// rejected every 0-RTT of ours) declines early data; set back, the age
// is exact (RFC 8446 §4.2.11.1).
func (c *Conn) ticketClock(base func() time.Time) func() time.Time {
	if base == nil {
		base = time.Now
	}
	return func() time.Time { return base().Add(-time.Duration(c.early.clockBack.Load())) }
}

// EarlyDataState is what became of 0-RTT on a connection.
type EarlyDataState struct {
	// Offered: the client sent early data under a resumed session's key
	// (server: the client offered and we took the key).
	Offered bool
	// Accepted: the server accepted it (for a client, known once the
	// handshake completed).
	Accepted bool
	// PacketsSent (client) and PacketsReceived (server) count 0-RTT packets.
	PacketsSent, PacketsReceived uint64
}

// EarlyData reports the connection's 0-RTT.
func (c *Conn) EarlyData() EarlyDataState {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &c.early
	if c.isClient {
		return EarlyDataState{Offered: e.offered, Accepted: e.offered && !e.rejected && c.handshakeComplete, PacketsSent: e.sent}
	}
	return EarlyDataState{Offered: e.accepted, Accepted: e.accepted, PacketsReceived: e.recv}
}

// DialEarly is Dial, returning as soon as data written on the connection
// goes out as 0-RTT (a session resumed from tlsConf's ClientSessionCache
// whose ticket allows early data), else when the handshake completed.
// Early data may be replayed by an attacker (RFC 9001 §9.2): send only
// what is safe to repeat.
func DialEarly(ctx context.Context, pconn net.PacketConn, raddr net.Addr, tlsConf *tls.Config, conf *Config) (*Conn, error) {
	return dialEarly(ctx, pconn, raddr, tlsConf, conf, false, true)
}

// DialAddrEarly is DialEarly over a new UDP socket that the connection owns.
func DialAddrEarly(ctx context.Context, addr string, tlsConf *tls.Config, conf *Config) (*Conn, error) {
	return dialAddr(ctx, addr, tlsConf, conf, true)
}

// onEarlySecret takes the 0-RTT key.
func (c *Conn) onEarlySecret(ev tls.QUICEvent) error {
	k, err := newKeysVersion(ev.Suite, append([]byte(nil), ev.Data...), c.vs.orig) // 0-RTT stays in the first version (versionneg.go)
	if err != nil {
		return transportErr(InternalError, 0, "%v", err)
	}
	if ev.Kind == tls.QUICSetWriteSecret {
		c.early.seal, c.early.offered = k, true
		notify(c.early.ready)
		return nil
	}
	c.early.open, c.early.accepted = k, true
	pkts := c.early.buffered
	c.early.buffered = nil
	ecn := c.rxECN
	now := time.Now()
	for _, p := range pkts {
		c.rxECN, p = p[len(p)-1], p[:len(p)-1]
		if h, n, err := ParseHeader(p, connIDLen); err == nil {
			c.handlePacket(h, p[:n], now, true)
		}
	}
	c.rxECN = ecn
	return nil
}

// bufferEarly keeps a server's 0-RTT packet that came before the key (the
// ClientHello not yet whole); false if it is dropped.
func (c *Conn) bufferEarly(pkt []byte, replay bool) {
	if !c.isClient && !c.handshakeComplete && !replay && len(c.early.buffered) < maxBufferedPkts {
		c.early.buffered = append(c.early.buffered, append(append(make([]byte, 0, len(pkt)+1), pkt...), c.rxECN))
	}
}

// onResumeSession is the ticket a resumption uses. Server: accept early
// data only when allowed and our limits are not below those the ticket
// promised (RFC 9000 §7.4.1). Client: take the remembered limits for
// 0-RTT, or offer none without them.
func (c *Conn) onResumeSession(ss *tls.SessionState) {
	if c.isClient {
		for _, e := range ss.Extra {
			if b, ok := bytes.CutPrefix(e, extraTicketFrac); ok && len(b) == 8 {
				c.early.clockBack.Store(int64(binary.BigEndian.Uint64(b)))
			}
		}
	}
	if !ss.EarlyData {
		return
	}
	if !c.isClient {
		old, ok := paramsFromExtra(ss.Extra, extraServerParams, false)
		ss.EarlyData = ok && c.conf.Allow0RTT && !paramsReduced(c.localParams(), old) && c.ticketVersionOK(old)
		return
	}
	r, ok := paramsFromExtra(ss.Extra, extraPeerParams, true)
	if !ok || !c.ticketVersionOK(r) {
		ss.EarlyData = false
		return
	}
	c.peerParams, c.early.remembered = r, r
	c.peerMaxData = r.InitialMaxData
	c.peerMaxBidi = r.InitialMaxStreamsBidi
	c.uni.peerMax = r.InitialMaxStreamsUni
	notify(c.openReady)
}

// onStoreSession keeps the server's transport parameters beside a ticket
// the client stores (RFC 9000 §7.4.1).
func (c *Conn) onStoreSession(ss *tls.SessionState) error {
	now := c.tlsClock() // as crypto/tls saw the ticket's receipt, a moment ago
	frac := append([]byte(nil), extraTicketFrac...)
	ss.Extra = append(ss.Extra, binary.BigEndian.AppendUint64(frac, uint64(now.Sub(now.Truncate(time.Second)))))
	if c.haveParams {
		p := c.peerParams
		p.VersionInfo = &VersionInfo{Chosen: c.version} // a ticket is its connection's version's (RFC 9369 §5)
		ss.Extra = append(ss.Extra, append(append([]byte(nil), extraPeerParams...), appendLimits(p)...))
	}
	if err := c.tls.StoreSession(ss); err != nil {
		return tlsError(err)
	}
	return nil
}

// checkEarlyLimits: a server that accepted our 0-RTT must not have lowered
// a limit we kept to (RFC 9000 §7.4.1: PROTOCOL_VIOLATION).
func (c *Conn) checkEarlyLimits() error {
	if !c.isClient || !c.early.offered || c.early.rejected || !paramsReduced(c.peerParams, c.early.remembered) {
		return nil
	}
	return transportErr(ProtocolViolation, 0, "0-RTT accepted under transport parameters below those remembered")
}

// sessionTicket is what a server's ticket says: early data when allowed,
// with our current parameters.
func (c *Conn) sessionTicket() tls.QUICSessionTicketOptions {
	if !c.conf.Allow0RTT {
		return tls.QUICSessionTicketOptions{}
	}
	p := appendLimits(c.localParams())
	return tls.QUICSessionTicketOptions{EarlyData: true, Extra: [][]byte{append(append([]byte(nil), extraServerParams...), p...)}}
}

// onEarlyRejected: the server declined 0-RTT. Everything those packets
// carried goes again in 1-RTT; they count neither as lost nor in flight
// (RFC 9002 §6.4 discards them). The remembered limits give way to the
// server's parameters when they arrive.
func (c *Conn) onEarlyRejected() {
	c.early.rejected = true
	c.early.seal = nil
	sp := c.spaces[spaceApp]
	for _, p := range sp.Sent {
		if p.InFlight {
			sp.path.cc.Discard(p.Size)
		}
		c.requeue(sp, p)
	}
	next := sp.nextPN
	sp.History.Reset()
	sp.nextPN = next
}

// appendLimits encodes what 0-RTT remembers of transport parameters: the
// limits (RFC 9000 §7.4.1); the rest comes with this handshake's.
func appendLimits(p TransportParameters) []byte {
	r := DefaultTransportParameters()
	r.VersionInfo = p.VersionInfo // the version of the ticket's connection (versionneg.go)
	r.ActiveConnIDLimit = p.ActiveConnIDLimit
	r.InitialMaxData = p.InitialMaxData
	r.InitialMaxStreamDataBidiLocal = p.InitialMaxStreamDataBidiLocal
	r.InitialMaxStreamDataBidiRemote = p.InitialMaxStreamDataBidiRemote
	r.InitialMaxStreamDataUni = p.InitialMaxStreamDataUni
	r.InitialMaxStreamsBidi = p.InitialMaxStreamsBidi
	r.InitialMaxStreamsUni = p.InitialMaxStreamsUni
	return r.Append(nil)
}

func paramsFromExtra(extra [][]byte, prefix []byte, fromServer bool) (TransportParameters, bool) {
	for _, e := range extra {
		if b, ok := bytes.CutPrefix(e, prefix); ok {
			p, err := ParseTransportParameters(b, fromServer)
			return p, err == nil
		}
	}
	return TransportParameters{}, false
}

// paramsReduced: any limit of now below the one promised before.
func paramsReduced(now, before TransportParameters) bool {
	return now.ActiveConnIDLimit < before.ActiveConnIDLimit ||
		now.InitialMaxData < before.InitialMaxData ||
		now.InitialMaxStreamDataBidiLocal < before.InitialMaxStreamDataBidiLocal ||
		now.InitialMaxStreamDataBidiRemote < before.InitialMaxStreamDataBidiRemote ||
		now.InitialMaxStreamDataUni < before.InitialMaxStreamDataUni ||
		now.InitialMaxStreamsBidi < before.InitialMaxStreamsBidi ||
		now.InitialMaxStreamsUni < before.InitialMaxStreamsUni
}
