package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/mptester/mptester/probe"
)

// tcpTransport is TLS over TCP or over MPTCP.
type tcpTransport struct {
	o     Options
	mptcp bool
}

func (t *tcpTransport) Name() string {
	if t.mptcp {
		return MPTCP
	}
	return TCP
}

func (t *tcpTransport) Dial(ctx context.Context, addr netip.AddrPort, family string) (Conn, error) {
	start := time.Now()
	network := "tcp4"
	if addr.Addr().Unmap().Is6() {
		network = "tcp6"
	}
	var (
		raw    *net.TCPConn
		status *MPTCPStatus
	)
	if t.mptcp {
		mc, err := probe.DialMPTCP(ctx, t.o.Path, network, addr.String())
		if err != nil {
			return nil, fmt.Errorf("mptcp connect: %w", err)
		}
		raw, status = mc.TCPConn, &MPTCPStatus{Negotiated: mc.Negotiated}
	} else {
		c, err := probe.DialContext(ctx, t.o.Path, network, addr.String())
		if err != nil {
			return nil, fmt.Errorf("tcp connect: %w", err)
		}
		raw = c.(*net.TCPConn)
	}
	LimitUnsent(raw)
	cfg := t.o.TLS.Clone()
	cfg.NextProtos = alpns(family, false, t.o.HTTP1)
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("tls handshake: %w", err)
	}
	c := &tcpConn{tls: tc, raw: raw, mptcp: t.mptcp, info: Info{
		Transport: t.Name(), Local: raw.LocalAddr().String(), Remote: raw.RemoteAddr().String(),
		ALPN: tc.ConnectionState().NegotiatedProtocol, Setup: time.Since(start), MPTCP: status,
	}}
	return c, nil
}

type tcpConn struct {
	tls   *tls.Conn
	raw   *net.TCPConn
	mptcp bool
	info  Info

	mu     sync.Mutex
	opened bool
	rt     *http.Transport
}

// errUsed: over TCP a connection is one stream.
var errUsed = errors.New("tcp connection already carries a stream")

func (c *tcpConn) OpenStream(ctx context.Context) (Stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.opened {
		return nil, errUsed
	}
	c.opened = true
	return c.tls, nil
}

func (c *tcpConn) MultiStream() bool { return false }

// RoundTripper speaks HTTP/1.1 or HTTP/2 (per ALPN) on this connection only:
// the dial function hands out the established connection once and refuses
// to open another, so a lost connection is an error, not a silent redial.
func (c *tcpConn) RoundTripper() http.RoundTripper {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rt != nil {
		return c.rt
	}
	c.opened = true
	var once sync.Once
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		once.Do(func() { conn = c.tls })
		if conn == nil {
			return nil, errors.New("connection to the server was lost")
		}
		return conn, nil
	}
	c.rt = &http.Transport{DialTLSContext: dial, ForceAttemptHTTP2: true, MaxConnsPerHost: 1,
		MaxIdleConnsPerHost: 1, DisableCompression: true}
	return c.rt
}

func (c *tcpConn) Info() Info { return c.info }

func (c *tcpConn) Sample() State {
	if c.mptcp {
		return sampleMPTCP(c.raw)
	}
	return sampleTCP(c.raw)
}

func (c *tcpConn) Close() error {
	if c.rt != nil {
		c.rt.CloseIdleConnections()
	}
	return c.tls.Close()
}
