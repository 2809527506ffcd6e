package mpquic

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"
)

// Dial opens a QUIC v1 connection to raddr over pconn, which it reads from
// until the connection ends, and returns once the handshake completed.
func Dial(ctx context.Context, pconn net.PacketConn, raddr net.Addr, tlsConf *tls.Config, conf *Config) (*Conn, error) {
	return dial(ctx, pconn, raddr, tlsConf, conf, false)
}

// DialAddr is Dial over a new UDP socket that the connection owns.
func DialAddr(ctx context.Context, addr string, tlsConf *tls.Config, conf *Config) (*Conn, error) {
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	pconn, err := net.ListenUDP("udp", nil)
	if err != nil {
		return nil, err
	}
	raiseBuffers(pconn)
	c, err := dial(ctx, pconn, raddr, tlsConf, conf, true)
	if err != nil {
		pconn.Close()
	}
	return c, err
}

func dial(ctx context.Context, pconn net.PacketConn, raddr net.Addr, tlsConf *tls.Config, conf *Config, owns bool) (*Conn, error) {
	cfg, err := conf.withDefaults()
	if err != nil {
		return nil, err
	}
	if tlsConf == nil || len(tlsConf.NextProtos) == 0 {
		return nil, errors.New("mpquic: a tls.Config with NextProtos (ALPN) is required")
	}
	raiseBuffers(pconn)
	c := newConn(true, pconn, raddr, cfg, tlsConf)
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
	select {
	case <-c.handshakeCh:
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
func (c *Conn) readLoop(p *path) {
	br := newBatchReader(p.pconn)
	for {
		bp := bufPool.Get().(*[]byte)
		var n int
		var from net.Addr
		var err error
		if br != nil {
			var b []byte
			if b, from, err = br.nextDatagram(); err == nil {
				n = copy(*bp, b) // a datagram is at most readBufSize
			}
		} else {
			n, from, err = p.pconn.ReadFrom(*bp)
		}
		if err != nil {
			bufPool.Put(bp)
			if c.readFailed(p, err) {
				return
			}
			continue
		}
		if p.stopRead.Load() {
			bufPool.Put(bp)
			return
		}
		c.socketRecv.Add(uint64(n))
		p.socketRecv.Add(uint64(n))
		// Wait while the connection is behind: the socket's buffer then
		// holds the datagrams. Dropping them here was loss that no network
		// caused, which the peer's sender rightly declared (hundreds of
		// packets a second over a fast second path, issue 12).
		select {
		case c.in <- datagram{b: (*bp)[:n], buf: bp, from: from}:
		case <-c.done:
			return
		}
	}
}

// readFailed handles a path socket's read error: true if the reader ends.
func (c *Conn) readFailed(p *path, err error) bool {
	if c.isDone() || p.stopRead.Load() {
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

// LocalAddr is the socket's address.
func (c *Conn) LocalAddr() net.Addr { return c.pconn.LocalAddr() }

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

// Listener accepts QUIC v1 connections on one UDP socket, handing each
// datagram to its connection by destination connection ID.
type Listener struct {
	pconn   net.PacketConn
	tlsConf *tls.Config
	conf    Config
	owns    bool

	mu     sync.Mutex
	conns  map[string]*Conn
	queue  chan *Conn
	closed chan struct{}
	once   sync.Once
	resets resetLimiter
}

// Listen accepts connections on pconn (read by the listener from now on).
func Listen(pconn net.PacketConn, tlsConf *tls.Config, conf *Config) (*Listener, error) {
	return listen(pconn, tlsConf, conf, false)
}

// ListenAddr is Listen on a new UDP socket.
func ListenAddr(addr string, tlsConf *tls.Config, conf *Config) (*Listener, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	pconn, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	raiseBuffers(pconn)
	l, err := listen(pconn, tlsConf, conf, true)
	if err != nil {
		pconn.Close()
	}
	return l, err
}

func listen(pconn net.PacketConn, tlsConf *tls.Config, conf *Config, owns bool) (*Listener, error) {
	cfg, err := conf.withDefaults()
	if err != nil {
		return nil, err
	}
	if tlsConf == nil || len(tlsConf.Certificates) == 0 && tlsConf.GetCertificate == nil {
		return nil, errors.New("mpquic: a tls.Config with a certificate is required")
	}
	raiseBuffers(pconn)
	l := &Listener{pconn: pconn, tlsConf: tlsConf, conf: cfg, owns: owns,
		conns: map[string]*Conn{}, queue: make(chan *Conn, 64), closed: make(chan struct{})}
	go l.readLoop()
	return l, nil
}

// Addr is the listening socket's address.
func (l *Listener) Addr() net.Addr { return l.pconn.LocalAddr() }

// Accept waits for a connection whose handshake completed.
func (l *Listener) Accept(ctx context.Context) (*Conn, error) {
	select {
	case c := <-l.queue:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close stops accepting and closes the connections not yet accepted; the
// socket is closed if the listener opened it (then accepted connections
// end too).
func (l *Listener) Close() error {
	l.once.Do(func() {
		close(l.closed)
		if l.owns {
			l.pconn.Close()
		} else {
			l.pconn.SetReadDeadline(time.Now())
		}
	})
	return nil
}

func (l *Listener) readLoop() {
	var oob []byte
	if enableDstInfo(l.pconn) {
		oob = make([]byte, 128)
	}
	for {
		bp := bufPool.Get().(*[]byte)
		n, from, to, err := readWithDst(l.pconn, *bp, oob)
		if err != nil {
			bufPool.Put(bp)
			select {
			case <-l.closed:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if !l.dispatch(datagram{b: (*bp)[:n], buf: bp, from: from, to: to}) {
			bufPool.Put(bp)
		}
	}
}

// dispatch routes one datagram; false if it was dropped. Garbage is
// dropped here without touching any connection.
func (l *Listener) dispatch(d datagram) bool {
	b := d.b
	if len(b) == 0 {
		return false
	}
	var dcid []byte
	if b[0]&0x80 == 0 {
		if len(b) < 1+connIDLen {
			return false
		}
		dcid = b[1 : 1+connIDLen]
	} else {
		if len(b) < 6 || len(b) < 6+int(b[5]) {
			return false
		}
		dcid = b[6 : 6+int(b[5])]
	}
	l.mu.Lock()
	c := l.conns[string(dcid)]
	l.mu.Unlock()
	if c == nil {
		c = l.newConn(d)
		if c == nil {
			l.maybeReset(b, dcid, d.from)
			return false
		}
	}
	c.socketRecv.Add(uint64(len(d.b)))
	if c.isDone() {
		return false
	}
	if !c.rx.push(d) {
		c.rxDropped.Add(1)
		return false
	}
	return true
}

func (l *Listener) newConn(d datagram) *Conn {
	select {
	case <-l.closed:
		return nil
	default:
	}
	h, _, err := ParseHeader(d.b, connIDLen)
	if errors.Is(err, ErrUnsupportedVersion) && len(d.b) >= minDatagramSize {
		// RFC 9000 §6.1: answer with the versions we speak.
		l.pconn.WriteTo(AppendVersionNegotiation(nil, h.SCID, h.DCID, Version1), d.from)
		return nil
	}
	if err != nil || h.Type != PacketInitial || len(d.b) < minDatagramSize || len(h.DCID) < 8 {
		return nil // §14.1: a client's Initial datagram is at least 1200 bytes
	}
	c := newConn(false, l.pconn, d.from, l.conf, l.tlsConf)
	c.p0().local = d.to
	c.origDCID = append([]byte(nil), h.DCID...)
	c.p0().dcid = append([]byte{}, h.SCID...) // non-nil: quic-go clients use empty IDs
	keys := []string{string(c.origDCID), string(c.scid)}
	c.onDone = func() {
		l.mu.Lock()
		for k, v := range l.conns {
			if v == c {
				delete(l.conns, k)
			}
		}
		l.mu.Unlock()
	}
	c.onNewCID = func(cid []byte) {
		l.mu.Lock()
		l.conns[string(cid)] = c
		l.mu.Unlock()
	}
	c.onRetireID = func(cid []byte) {
		l.mu.Lock()
		if l.conns[string(cid)] == c {
			delete(l.conns, string(cid))
		}
		l.mu.Unlock()
	}
	c.onHandshake = func(c *Conn) {
		select {
		case l.queue <- c:
		default:
			c.closeTransport(transportErr(ConnectionRefused, 0, "accept queue full"))
		}
	}
	if err := c.start(); err != nil {
		return nil
	}
	l.mu.Lock()
	for _, k := range keys {
		l.conns[k] = c
	}
	l.mu.Unlock()
	go c.run()
	return c
}

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
