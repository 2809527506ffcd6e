package transport

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/mptester/mptester/probe"
)

// quicTransport dials each connection from its own UDP socket bound to the
// path (probe.ListenUDP), so a connection never leaves through another
// interface and its packets can be counted per path.
type quicTransport struct{ o Options }

func (t *quicTransport) Name() string { return QUIC }

// QUICConfig is shared by client and server.
func QUICConfig(idle time.Duration) *quic.Config {
	return &quic.Config{MaxIdleTimeout: idle, KeepAlivePeriod: idle / 3,
		MaxStreamReceiveWindow: 16 << 20, MaxConnectionReceiveWindow: 32 << 20}
}

func (t *quicTransport) Dial(ctx context.Context, addr netip.AddrPort, family string) (Conn, error) {
	start := time.Now()
	f := probe.Family4
	if addr.Addr().Unmap().Is6() {
		f = probe.Family6
	}
	udp, err := probe.ListenUDP(ctx, t.o.Path, f)
	if err != nil {
		return nil, fmt.Errorf("quic socket: %w", err)
	}
	tr := &quic.Transport{Conn: udp}
	cfg := t.o.TLS.Clone()
	cfg.NextProtos = alpns(family, true, false)
	qc, err := tr.Dial(ctx, net.UDPAddrFromAddrPort(addr), cfg, QUICConfig(t.o.IdleTimeout))
	if err != nil {
		tr.Close()
		udp.Close()
		return nil, fmt.Errorf("quic handshake: %w", err)
	}
	return &quicConn{c: qc, tr: tr, udp: udp, info: Info{Transport: QUIC, Local: qc.LocalAddr().String(),
		Remote: qc.RemoteAddr().String(), ALPN: qc.ConnectionState().TLS.NegotiatedProtocol, Setup: time.Since(start)}}, nil
}

type quicConn struct {
	c    *quic.Conn
	tr   *quic.Transport
	udp  *net.UDPConn
	info Info
	rt   *http3.ClientConn
}

func (c *quicConn) OpenStream(ctx context.Context) (Stream, error) {
	s, err := c.c.OpenStreamSync(ctx)
	if err != nil {
		return nil, err
	}
	return quicStream{s}, nil
}

func (c *quicConn) MultiStream() bool { return true }

func (c *quicConn) RoundTripper() http.RoundTripper {
	if c.rt == nil {
		c.rt = (&http3.Transport{DisableCompression: true}).NewClientConn(c.c)
	}
	return c.rt
}

func (c *quicConn) Info() Info { return c.info }

func (c *quicConn) Sample() State { return SampleQUIC(c.c) }

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

// WrapQUICStream gives a server-side QUIC stream the Stream semantics.
func WrapQUICStream(s *quic.Stream) Stream { return quicStream{s} }
