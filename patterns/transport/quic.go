package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/mptester/mptester/probe"
)

// The quic transport: quic-go, HTTP/3 for the HTTP patterns.
const (
	nameQUIC = "quic"
	keyQUIC  = "quic"
	alpnH3   = "h3"
	// Application error codes the server closes a connection with; equal
	// to the stream patterns' wire codes, so older peers agree.
	quicCodeRefused = 3 // too many sessions
)

func init() {
	Register(Descriptor{Name: nameQUIC, Help: "QUIC (quic-go), HTTP/3 for the HTTP patterns", Order: 30,
		// quic-go counts whole QUIC packets (its own acks included), so
		// only IP + UDP headers are outside: 28 bytes on a full packet of
		// at least 1200 bytes, 2.3%; 4% stated.
		Network: "udp", DefaultPort: 443, AltPort: 6121, HeaderOverhead: 0.04,
		New:    func(o Options) (Transport, error) { return &quicTransport{o: o}, nil },
		Listen: listenQUIC})
}

// quicTransport dials each connection from its own UDP socket bound to the
// path (probe.ListenUDP), so a connection never leaves through another
// interface and its packets can be counted per path.
type quicTransport struct{ o Options }

func (t *quicTransport) Name() string { return nameQUIC }

// QUICConfig is shared by client and server. Packets start at
// QUICStartDatagram and grow by path MTU discovery (RFC 8899): quic-go's
// default start, 1280 bytes of UDP payload, is a 1308-byte IPv4 packet
// that a 1280-MTU path without ICMP (a PMTU black hole) drops, and the
// handshake never completes.
func QUICConfig(idle time.Duration) *quic.Config {
	return &quic.Config{MaxIdleTimeout: idle, KeepAlivePeriod: idle / 3,
		MaxStreamReceiveWindow: 16 << 20, MaxConnectionReceiveWindow: 32 << 20,
		InitialPacketSize: QUICStartDatagram}
}

// QUICStartDatagram is the UDP payload the QUIC transports start with:
// the largest that fits a 1280-byte IPv6 MTU (1280 - 40 - 8), the
// smallest MTU IPv6 allows, so a handshake needs no ICMP on any path
// (RFC 9000 §14: at least 1200).
const QUICStartDatagram = 1232

// quicStatus says what quic-go's errors mean; "" leaves the error to the
// common classifier.
func quicStatus(err error) Status {
	var (
		appErr  *quic.ApplicationError
		idleErr *quic.IdleTimeoutError
		hsErr   *quic.HandshakeTimeoutError
		trErr   *quic.TransportError
		reset   *quic.StatelessResetError
		strErr  *quic.StreamError
		vnErr   *quic.VersionNegotiationError
	)
	switch {
	case errors.As(err, &reset):
		return StatusConnectionReset
	case errors.As(err, &hsErr):
		return StatusConnectionTimeout
	case errors.As(err, &idleErr):
		return StatusTimeout
	case errors.As(err, &vnErr):
		return StatusUnsupported
	case errors.As(err, &trErr):
		if trErr.ErrorCode.IsCryptoError() {
			return StatusTLSError
		}
		return StatusConnectionReset
	case errors.As(err, &appErr):
		if appErr.ErrorCode == quicCodeRefused {
			return StatusServerRefused
		}
		return StatusConnectionClosed
	case errors.As(err, &strErr):
		return StatusConnectionClosed
	}
	return ""
}

// quicSetupStatus: during the handshake an idle timeout means the server
// never answered.
func quicSetupStatus(err error) Status {
	var idleErr *quic.IdleTimeoutError
	if errors.As(err, &idleErr) {
		return StatusConnectionTimeout
	}
	return quicStatus(err)
}

func (t *quicTransport) Dial(ctx context.Context, addr netip.AddrPort, family string) (Conn, error) {
	start := time.Now()
	f := probe.Family4
	if addr.Addr().Unmap().Is6() {
		f = probe.Family6
	}
	if err := probe.CheckTarget(ctx, t.o.Primary(), addr.Addr()); err != nil {
		return nil, wrap(opConnect, err, nil)
	}
	udp, err := probe.ListenUDP(ctx, t.o.Primary(), f)
	if err != nil {
		return nil, wrap(opConnect, fmt.Errorf("quic socket: %w", err), nil)
	}
	sock := newCountedUDP(udp)
	tr := &quic.Transport{Conn: sock}
	cfg := t.o.TLS.Clone()
	cfg.NextProtos = offered(family, []string{alpnH3})
	qcfg := QUICConfig(t.o.IdleTimeout)
	var ecn *ecnTrace
	if t.o.QUICECN || t.o.QlogDir != "" {
		ecn = &ecnTrace{}
		qcfg.Tracer = quicTracer(t.o.QlogDir, ecn)
	}
	qc, err := dialQUICGo(ctx, tr, addr, cfg, qcfg)
	if err != nil {
		tr.Close()
		udp.Close()
		return nil, wrap(opQUICHandshake, err, quicSetupStatus)
	}
	return &quicConn{c: qc, tr: tr, udp: sock, ecn: ecn, info: Info{Transport: nameQUIC, Local: qc.LocalAddr().String(),
		Remote: qc.RemoteAddr().String(), ALPN: qc.ConnectionState().TLS.NegotiatedProtocol,
		QUICVersion: quicVersionName(uint32(qc.ConnectionState().Version)), Setup: time.Since(start)}}, nil
}

// dialQUICGo is quic-go's Transport.Dial for a context that may already
// be dead: quic-go selects between the cancelled context and a handshake
// that completed meanwhile at random (on loopback under load both are
// ready), and a dial asked with a dead context must fail every time.
func dialQUICGo(ctx context.Context, tr *quic.Transport, addr netip.AddrPort, tlsConf *tls.Config, conf *quic.Config) (*quic.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return tr.Dial(ctx, net.UDPAddrFromAddrPort(addr), tlsConf, conf)
}

type quicConn struct {
	c    *quic.Conn
	tr   *quic.Transport
	udp  *countedUDP
	ecn  *ecnTrace // nil: not recorded
	info Info
	rt   *http3.ClientConn
}

func (c *quicConn) OpenStream(ctx context.Context) (Stream, error) {
	s, err := c.c.OpenStreamSync(ctx)
	if err != nil {
		return nil, wrap("open stream", err, quicStatus)
	}
	return classified{Stream: quicStream{s}, own: quicStatus}, nil
}

func (c *quicConn) MultiStream() bool { return true }

func (c *quicConn) RoundTripper() http.RoundTripper {
	if c.rt == nil {
		c.rt = (&http3.Transport{DisableCompression: true}).NewClientConn(c.c)
	}
	return classifiedRT{rt: c.rt, own: quicStatus}
}

func (c *quicConn) Info() Info { return c.info }

func (c *quicConn) Sample() State {
	s := sampleQUIC(c.c, nil, c.udp)
	if c.ecn != nil {
		s.Data.(*QUICStats).QUICECN = c.ecn.stats()
	}
	return s
}

func (c *quicConn) Close() error {
	err := c.c.CloseWithError(0, "")
	c.tr.Close()
	c.udp.Close()
	return err
}

// quicStream adapts a QUIC stream: Close on a quic.Stream only ends the
// sending side, so CloseWrite maps to it; Close also stops reading (it
// never resets the sending side: queued data is still delivered).
type quicStream struct{ *quic.Stream }

func (s quicStream) CloseWrite() error { return s.Stream.Close() }

func (s quicStream) Close() error {
	s.Stream.CancelRead(0)
	return s.Stream.Close()
}

// sampleQUIC reads quic-go's ConnectionStats of either side of a
// connection, and what quic-go read or dropped uncounted when its socket
// or its queue drops are counted (nil: not counted).
func sampleQUIC(c *quic.Conn, drops *queueDrops, sock *countedUDP) State {
	s := c.ConnectionStats()
	st := &QUICStats{MinRTT: s.MinRTT, LatestRTT: s.LatestRTT, SmoothedRTT: s.SmoothedRTT,
		MeanDeviation: s.MeanDeviation, CongestionWindow: s.CongestionWindow, BytesSent: s.BytesSent,
		PacketsSent: s.PacketsSent, BytesReceived: s.BytesReceived, PacketsReceived: s.PacketsReceived,
		BytesLost: s.BytesLost, PacketsLost: s.PacketsLost}
	if drops != nil {
		st.PacketsDroppedQueueFull, st.BytesDroppedQueueFull = drops.packets.Load(), drops.bytes.Load()
	}
	if sock != nil {
		st.SocketDatagramsReceived, st.SocketBytesReceived = sock.datagrams.Load(), sock.bytes.Load()
	}
	return State{Key: keyQUIC, Data: st}
}

// quicListener is one UDP socket serving HTTP/3 and the stream ALPNs.
type quicListener struct {
	udp net.PacketConn
	tr  *quic.Transport
	ln  *quic.Listener
	h3  *http3.Server
	o   ListenOptions
}

func listenQUIC(ctx context.Context, o ListenOptions) (Listener, error) {
	pc, _ := o.Socket.(net.PacketConn)
	if pc == nil {
		ua, err := net.ResolveUDPAddr("udp", o.Addr)
		if err != nil {
			return nil, fmt.Errorf("quic address %s: %w", o.Addr, err)
		}
		// An unconnected wildcard socket: quic-go reads the destination
		// address of each packet (IP_PKTINFO) and replies from it, so a
		// multi-homed server answers from the address the client reached.
		if pc, err = net.ListenUDP("udp", ua); err != nil {
			return nil, fmt.Errorf("listen udp %s: %w", o.Addr, err)
		}
	}
	tr := &quic.Transport{Conn: pc}
	cfg := &tls.Config{Certificates: []tls.Certificate{o.Certificate}, MinVersion: tls.VersionTLS13,
		NextProtos: append([]string{alpnH3}, o.StreamALPNs...)}
	qcfg := QUICConfig(o.IdleTimeout)
	qcfg.Tracer = quicTracer(o.QlogDir, nil)
	ln, err := tr.Listen(cfg, qcfg)
	if err != nil {
		tr.Close()
		pc.Close()
		return nil, fmt.Errorf("listen quic %s: %w", pc.LocalAddr(), err)
	}
	return &quicListener{udp: pc, tr: tr, ln: ln, o: o,
		h3: &http3.Server{Handler: o.HTTP, IdleTimeout: o.IdleTimeout, Logger: o.Logger}}, nil
}

func (l *quicListener) Addr() net.Addr { return l.ln.Addr() }

func (l *quicListener) Describe() string { return "h3, stream patterns" }

func (l *quicListener) Accept(ctx context.Context) (ServerConn, error) {
	c, err := l.ln.Accept(ctx)
	if err != nil {
		return nil, err
	}
	return &quicServerConn{l: l, c: c}, nil
}

func (l *quicListener) Shutdown(ctx context.Context) error {
	l.ln.Close()
	return l.h3.Shutdown(ctx)
}

func (l *quicListener) Close() error {
	l.ln.Close()
	l.h3.Close()
	l.tr.Close()
	return l.udp.Close()
}

type quicServerConn struct {
	l *quicListener
	c *quic.Conn
}

func (c *quicServerConn) RemoteAddr() net.Addr { return c.c.RemoteAddr() }

func (c *quicServerConn) Refuse(reason string) {
	_ = c.c.CloseWithError(quicCodeRefused, reason)
}

// Handshake: quic-go's listener returns connections with the handshake
// done.
func (c *quicServerConn) Handshake(context.Context) (string, bool, error) {
	alpn := c.c.ConnectionState().TLS.NegotiatedProtocol
	return alpn, alpn == alpnH3, nil
}

func (c *quicServerConn) ServeHTTP() { _ = c.l.h3.ServeQUICConn(c.c) }

func (c *quicServerConn) AcceptStream(ctx context.Context) (Stream, error) {
	s, err := c.c.AcceptStream(ctx)
	if err != nil {
		return nil, err
	}
	return classified{Stream: quicStream{s}, own: quicStatus}, nil
}

func (c *quicServerConn) Sample() State { return sampleQUIC(c.c, nil, nil) }

func (c *quicServerConn) Abort(code uint64, reason string) {
	_ = c.c.CloseWithError(quic.ApplicationErrorCode(code), reason)
}

func (c *quicServerConn) Close() error { return c.c.CloseWithError(0, "") }
