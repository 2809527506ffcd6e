package mpquic

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"time"
)

// Dial opens a QUIC v1 connection to raddr over pconn, which it reads from
// until the connection ends, and returns once the handshake completed.
func Dial(ctx context.Context, pconn net.PacketConn, raddr net.Addr, tlsConf *tls.Config, conf *Config) (*Conn, error) {
	return dialEarly(ctx, pconn, raddr, tlsConf, conf, false, false)
}

// DialAddr is Dial over a new UDP socket that the connection owns.
func DialAddr(ctx context.Context, addr string, tlsConf *tls.Config, conf *Config) (*Conn, error) {
	return dialAddr(ctx, addr, tlsConf, conf, false)
}

func dialAddr(ctx context.Context, addr string, tlsConf *tls.Config, conf *Config, early bool) (*Conn, error) {
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	pconn, err := net.ListenUDP("udp", nil)
	if err != nil {
		return nil, err
	}
	raiseBuffers(pconn)
	c, err := dialEarly(ctx, pconn, raddr, tlsConf, conf, true, early)
	if err != nil {
		pconn.Close()
	}
	return c, err
}

// dialEarly returns when the handshake completed, or, if early, when 0-RTT
// keys are there.
func dialEarly(ctx context.Context, pconn net.PacketConn, raddr net.Addr, tlsConf *tls.Config, conf *Config, owns, early bool) (*Conn, error) {
	cfg, err := conf.withDefaults()
	if err != nil {
		return nil, err
	}
	if tlsConf == nil || len(tlsConf.NextProtos) == 0 {
		return nil, errors.New("mpquic: a tls.Config with NextProtos (ALPN) is required")
	}
	raiseBuffers(pconn)
	c := newConn(true, pconn, raddr, cfg, tlsConf)
	c.version, c.vs.orig = cfg.Version, cfg.Version
	if v, ok := ticketVersion(tlsConf, cfg); ok {
		c.version, c.vs.orig = v, v // a ticket is its version's (versionneg.go)
	}
	c.ownsConn = owns
	c.origDCID = randomID(connIDLen)
	c.p0().dcid = c.origDCID
	c.mu.Lock()
	err = c.start()
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	go c.readLoop(c.p0())
	go c.run()
	var earlyReady chan struct{} // nil: never
	if early {
		earlyReady = c.early.ready
	}
	select {
	case <-c.handshakeCh:
		return c, nil
	case <-earlyReady:
		return c, nil
	case <-c.ending:
		// The CONNECTION_CLOSE goes out first; the connection then stays
		// closing in the background (RFC 9000 §10.2.1).
		select {
		case <-c.closeSent:
		case <-c.done:
		case <-time.After(100 * time.Millisecond):
		}
		return nil, c.err()
	case <-ctx.Done():
		c.CloseWithError(0, "dial canceled")
		return nil, ctx.Err()
	}
}

func (c *Conn) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeErr
}

// readLoop feeds a client connection the datagrams of one path's socket,
// in batches where the socket allows (rxbatch_linux.go).
func (c *Conn) readLoop(p *path) { c.readSocket(p, p.pconn, &p.stopRead) }

// readSocket is readLoop on pconn, until stop (a path's socket it moved
// from stops before the path does: migrate.go).
func (c *Conn) readSocket(p *path, pconn net.PacketConn, stop *atomic.Bool) {
	br := newBatchReader(pconn)
	for {
		bp := bufPool.Get().(*[]byte)
		var n int
		var from net.Addr
		var err error
		var ecn byte
		if br != nil {
			var b []byte
			if b, from, _, ecn, err = br.nextDatagram(); err == nil {
				n = copy(*bp, b) // a datagram is at most readBufSize
			}
		} else {
			n, from, err = pconn.ReadFrom(*bp)
		}
		if err != nil {
			bufPool.Put(bp)
			if c.readFailed(p, stop, err) {
				return
			}
			continue
		}
		if stop.Load() {
			bufPool.Put(bp)
			return
		}
		c.socketRecv.Add(uint64(n))
		p.socketRecv.Add(uint64(n))
		// Wait while the connection is behind: the socket's buffer then
		// holds the datagrams. Dropping them here was loss that no network
		// caused, which the peer's sender rightly declared (hundreds of
		// packets a second over a fast second path).
		select {
		case c.in <- datagram{b: (*bp)[:n], buf: bp, from: from, ecn: ecn}:
		case <-c.done:
			return
		}
	}
}

// readFailed handles a path socket's read error: true if the reader ends.
func (c *Conn) readFailed(p *path, stop *atomic.Bool, err error) bool {
	if c.isDone() || stop.Load() {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.id == 0 {
		c.terminate(err)
	} else if !p.abandoned && c.livePaths() > 1 {
		c.abandonPath(p, uint64(ApplicationAbandonPath), time.Now()) // the socket is gone
		c.signal()
	}
	return true
}

// CloseWithError closes the connection with an application error code
// (CONNECTION_CLOSE 0x1d) and waits briefly for it to be sent.
func (c *Conn) CloseWithError(code uint64, reason string) error {
	c.mu.Lock()
	if c.closing || c.isDone() {
		c.mu.Unlock()
		return nil
	}
	c.closeWith(ConnectionCloseFrame{Application: true, ErrorCode: code, Reason: reason},
		&ApplicationCloseError{Code: code, Reason: reason})
	c.mu.Unlock()
	select {
	case <-c.closeSent:
	case <-c.done:
	case <-time.After(time.Second):
	}
	return nil
}

// ConnectionState is the TLS state (ALPN, peer certificates).
func (c *Conn) ConnectionState() tls.ConnectionState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tls.ConnectionState()
}

// LocalAddr is the address of path 0's socket (the one it migrated to,
// after Migrate).
func (c *Conn) LocalAddr() net.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.p0().pconn.LocalAddr()
}

// RemoteAddr is the peer's address.
func (c *Conn) RemoteAddr() net.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.p0().remote
}

// Done is closed when the connection has ended; Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection ended or is ending; nil while it is open.
func (c *Conn) Err() error { return c.err() }

// raiseBuffers asks for 4 MiB socket buffers (best effort, capped by the
// system's maximum): a window's worth of datagrams arriving while the
// connection goroutine is busy must not overflow the default ~200 KiB.
// Sockets the caller hands over are raised too, when they can be.
func raiseBuffers(c net.PacketConn) {
	if b, ok := c.(interface {
		SetReadBuffer(int) error
		SetWriteBuffer(int) error
	}); ok {
		b.SetReadBuffer(4 << 20)
		b.SetWriteBuffer(4 << 20)
	}
}
