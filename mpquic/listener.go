package mpquic

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"hash"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Listener accepts QUIC v1 connections on one UDP socket, handing each
// datagram to its connection by destination connection ID.
//
// Under a flood of Initials it keeps three things bounded: what a datagram
// costs before it decrypts (nothing is allocated: the Initial keys derive
// from its destination ID, RFC 9001 §5.2), the connections in their
// handshake (Config.MaxHalfOpen, Config.MaxHalfOpenPerSource, each with
// its one goroutine), and the read loop's waits (everything under mu is a
// map operation on one connection's IDs).
type Listener struct {
	pconn   net.PacketConn
	tlsConf *tls.Config
	conf    Config
	owns    bool

	// mu guards conns, the half-open counts and each Conn's l* fields.
	mu       sync.Mutex
	conns    map[string]*Conn
	halfOpen int
	sources  map[sourceKey]*sourceCount

	queue  chan *Conn
	closed chan struct{}
	once   sync.Once
	resets resetLimiter

	// The read loop's own.
	check    *initialCheck
	tokens   *retryTokens
	rateSec  int64 // the second rateN counts handshakes of
	rateN    int
	ratePrev int

	undecryptable, retries, badTokens, refused atomic.Uint64
}

// ListenerStats counts what a Listener did with Initials that found no
// connection.
type ListenerStats struct {
	HalfOpen      int    // connections in their handshake now
	Undecryptable uint64 // Initials dropped: they did not decrypt
	RetriesSent   uint64 // Initials answered with a Retry
	BadTokens     uint64 // Initials dropped: token invalid, expired or not theirs
	Refused       uint64 // Initials dropped at a half-open cap
}

// Stats is the listener's counts so far.
func (l *Listener) Stats() ListenerStats {
	l.mu.Lock()
	h := l.halfOpen
	l.mu.Unlock()
	return ListenerStats{HalfOpen: h, Undecryptable: l.undecryptable.Load(), RetriesSent: l.retries.Load(),
		BadTokens: l.badTokens.Load(), Refused: l.refused.Load()}
}

// sourceKey groups half-open connections by where they come from: an IPv4
// address, or an IPv6 /64 (one host's share of addresses).
type sourceKey netip.Addr

func sourceOf(a net.Addr) sourceKey {
	ip := addrPortOf(a).Addr().Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		ip = p.Addr()
	}
	return sourceKey(ip)
}

type sourceCount struct{ unvalidated, validated int }

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
	l, err := newListener(pconn, tlsConf, conf, owns)
	if err != nil {
		return nil, err
	}
	raiseBuffers(pconn)
	go l.readLoop()
	return l, nil
}

// newListener is a Listener whose read loop is not started.
func newListener(pconn net.PacketConn, tlsConf *tls.Config, conf *Config, owns bool) (*Listener, error) {
	cfg, err := conf.withDefaults()
	if err != nil {
		return nil, err
	}
	if tlsConf == nil || len(tlsConf.Certificates) == 0 && tlsConf.GetCertificate == nil {
		return nil, errors.New("mpquic: a tls.Config with a certificate is required")
	}
	tlsConf = withTicketKey(tlsConf)
	return &Listener{pconn: pconn, tlsConf: tlsConf, conf: cfg, owns: owns,
		conns: map[string]*Conn{}, sources: map[sourceKey]*sourceCount{},
		queue: make(chan *Conn, 64), closed: make(chan struct{}),
		check: newInitialCheck(), tokens: newRetryTokens()}, nil
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
	dst, ecnOn := enableDstInfo(l.pconn), enableECN(l.pconn)
	if dst || ecnOn {
		oob = make([]byte, 128)
	}
	// Batched reads (recvmmsg and GRO) where the socket allows: one
	// recvmsg per datagram was a quarter of an upload's CPU at the server.
	br := newBatchReader(l.pconn)
	for {
		bp := bufPool.Get().(*[]byte)
		var n int
		var from net.Addr
		var to netip.Addr
		var ecn byte
		var err error
		if br != nil {
			var b []byte
			if b, from, to, ecn, err = br.nextDatagram(); err == nil {
				n = copy(*bp, b) // a datagram is at most readBufSize
			}
		} else {
			n, from, to, ecn, err = readWithDst(l.pconn, *bp, oob)
		}
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
		if !l.dispatch(datagram{b: (*bp)[:n], buf: bp, from: from, to: to, ecn: ecn}) {
			bufPool.Put(bp)
		}
	}
}

// halfOpenQueue bounds the datagrams waiting for a connection still in its
// handshake: a client sends a few before it completes, and a peer that
// floods its own half-open connection must not grow its queue to the
// flow control window's 1,024+.
const halfOpenQueue = 64

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
	limit := 0
	if c != nil && c.lhalfOpen {
		limit = halfOpenQueue
	}
	l.mu.Unlock()
	if c == nil {
		c = l.newConn(d, time.Now())
		if c == nil {
			l.maybeReset(b, dcid, d.from)
			return false
		}
	}
	c.socketRecv.Add(uint64(len(d.b)))
	if c.isDone() {
		return false
	}
	if !c.rx.pushLimit(d, limit) {
		c.rxDropped.Add(1)
		return false
	}
	return true
}

// admission is what becomes of an Initial that found no connection.
type admission int

const (
	admitConn admission = iota
	admitRetry
	admitDrop
)

// newConn makes a connection of a client's first Initial, if it decrypts
// and the limits admit it, or answers it with a Retry; nil if there is no
// connection to hand the datagram to.
func (l *Listener) newConn(d datagram, now time.Time) *Conn {
	select {
	case <-l.closed:
		return nil
	default:
	}
	h, n, err := ParseHeader(d.b, connIDLen)
	if (errors.Is(err, ErrUnsupportedVersion) || err == nil && h.Type == PacketInitial && !slices.Contains(serverVersions(l.conf), h.Version)) && len(d.b) >= minDatagramSize {
		// RFC 9000 §6.1: answer with the versions we speak.
		l.pconn.WriteTo(AppendVersionNegotiation(nil, h.SCID, h.DCID, serverVersions(l.conf)...), d.from)
		return nil
	}
	if err != nil || h.Type != PacketInitial || len(d.b) < minDatagramSize || len(h.DCID) < 8 {
		return nil // §14.1: a client's Initial datagram is at least 1200 bytes
	}
	if !(h.Version == Version2 && initialOpensV2(d.b[:n], h) || h.Version == Version1 && l.check.opens(d.b[:n], h)) {
		l.undecryptable.Add(1)
		return nil
	}
	var odcid []byte
	validated := len(h.Token) > 0
	if validated {
		var ok bool
		// A token we cannot verify: dropped (§8.1.2 allows it), not
		// answered with a second Retry the client must ignore.
		if odcid, ok = l.tokens.open(now, h.Token, d.from, h.DCID); !ok {
			l.badTokens.Add(1)
			return nil
		}
	}
	src := sourceOf(d.from)
	l.mu.Lock()
	a := l.admit(src, validated, now)
	l.mu.Unlock()
	switch a {
	case admitRetry:
		l.sendRetry(h, d.from, now)
		return nil
	case admitDrop:
		l.refused.Add(1)
		return nil
	}

	c := newConn(false, l.pconn, d.from, l.conf, l.tlsConf)
	c.version, c.vs.orig = h.Version, h.Version // the client's, until it offers another (versionneg.go)
	c.p0().local = d.to
	c.initDCID = append([]byte(nil), h.DCID...)
	c.origDCID = c.initDCID
	if validated {
		// The token carried the client's first DCID (RFC 9000 §7.3) and
		// proved its address (§8.1).
		c.origDCID, c.retrySCID, c.addrValidated = odcid, c.initDCID, true
	}
	c.p0().dcid = append([]byte{}, h.SCID...) // non-nil: quic-go clients use empty IDs
	c.onDone = func() { l.forget(c) }
	c.onNewCID = func(cid []byte) { l.route(c, string(cid)) }
	c.onRetireID = func(cid []byte) { l.unroute(c, string(cid)) }
	c.onHandshake = func(c *Conn) {
		l.established(c)
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
	c.lsrc, c.lhalfOpen, c.lvalid = src, true, validated
	l.halfOpen++
	sc := l.sources[src]
	if sc == nil {
		sc = &sourceCount{}
		l.sources[src] = sc
	}
	if validated {
		sc.validated++
	} else {
		sc.unvalidated++
	}
	l.routeLocked(c, string(c.initDCID))
	l.routeLocked(c, string(c.scid))
	l.mu.Unlock()
	go c.run()
	return c
}

// admit decides on an Initial from src (under mu): a validated one (it
// echoed our token) is dropped only at the caps; an unvalidated one gets a
// Retry when one is required, automatically above the half-open and rate
// thresholds, or at the caps.
func (l *Listener) admit(src sourceKey, validated bool, now time.Time) admission {
	cf := &l.conf
	sc := l.sources[src]
	if validated {
		if l.halfOpen >= cf.MaxHalfOpen || sc != nil && sc.validated >= cf.MaxHalfOpenPerSource {
			return admitDrop
		}
		l.countHandshake(now)
		return admitConn
	}
	retryOK := cf.RequireRetry || cf.RetryAboveHalfOpen >= 0 || cf.RetryAboveRate >= 0
	switch {
	case cf.RequireRetry,
		cf.RetryAboveHalfOpen >= 0 && l.halfOpen >= cf.RetryAboveHalfOpen,
		cf.RetryAboveRate >= 0 && l.handshakeRate(now) >= cf.RetryAboveRate:
		return admitRetry
	case l.halfOpen >= cf.MaxHalfOpen || sc != nil && sc.unvalidated >= cf.MaxHalfOpenPerSource:
		if retryOK {
			return admitRetry
		}
		return admitDrop
	}
	l.countHandshake(now)
	return admitConn
}

// handshakeRate estimates the handshakes begun in the last second from
// this second's count and the last one's share of the window.
func (l *Listener) handshakeRate(now time.Time) int {
	l.rollRate(now)
	frac := float64(now.UnixNano()%int64(time.Second)) / float64(time.Second)
	return l.rateN + int(float64(l.ratePrev)*(1-frac))
}

func (l *Listener) rollRate(now time.Time) {
	sec := now.Unix()
	switch {
	case sec == l.rateSec:
	case sec == l.rateSec+1:
		l.rateSec, l.ratePrev, l.rateN = sec, l.rateN, 0
	default:
		l.rateSec, l.ratePrev, l.rateN = sec, 0, 0
	}
}

func (l *Listener) countHandshake(now time.Time) {
	l.rollRate(now)
	l.rateN++
}

// sendRetry answers an Initial with a Retry (RFC 9000 §17.2.5): a new
// connection ID and a token binding it, the client's address and the
// Initial's DCID.
func (l *Listener) sendRetry(h Header, to net.Addr, now time.Time) {
	scid := randomID(connIDLen)
	t := l.tokens
	token := t.seal(now, to, h.DCID, scid)
	if h.Version == Version2 { // type bits 0b00 (RFC 9369 §3.2)
		l.pconn.WriteTo(appendRetry(t.buf[:0], retryAEAD(Version2), t.pseudo[:], 0xcf, Version2, h.SCID, scid, h.DCID, token), to)
	} else {
		l.pconn.WriteTo(appendRetry(t.buf[:0], t.integrity, t.pseudo[:], 0xf0, Version1, h.SCID, scid, h.DCID, token), to)
	}
	l.retries.Add(1)
}

// route and unroute keep the connection IDs that lead to c: each
// connection lists its own, so that forgetting it costs its IDs, not a
// scan of every connection's.
func (l *Listener) route(c *Conn, cid string) {
	l.mu.Lock()
	l.routeLocked(c, cid)
	l.mu.Unlock()
}

func (l *Listener) routeLocked(c *Conn, cid string) {
	if c.isDone() {
		return // forgotten already
	}
	if l.conns[cid] != c {
		c.lkeys = append(c.lkeys, cid)
	}
	l.conns[cid] = c
}

func (l *Listener) unroute(c *Conn, cid string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conns[cid] != c {
		return
	}
	delete(l.conns, cid)
	for i, k := range c.lkeys {
		if k == cid {
			c.lkeys[i] = c.lkeys[len(c.lkeys)-1]
			c.lkeys = c.lkeys[:len(c.lkeys)-1]
			break
		}
	}
}

// forget removes an ended connection.
func (l *Listener) forget(c *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range c.lkeys {
		if l.conns[k] == c {
			delete(l.conns, k)
		}
	}
	c.lkeys = nil
	l.endHalfOpen(c)
}

// established: c's handshake completed.
func (l *Listener) established(c *Conn) {
	l.mu.Lock()
	l.endHalfOpen(c)
	l.mu.Unlock()
}

func (l *Listener) endHalfOpen(c *Conn) {
	if !c.lhalfOpen {
		return
	}
	c.lhalfOpen = false
	l.halfOpen--
	if sc := l.sources[c.lsrc]; sc != nil {
		if c.lvalid {
			sc.validated--
		} else {
			sc.unvalidated--
		}
		if sc.validated == 0 && sc.unvalidated == 0 {
			delete(l.sources, c.lsrc)
		}
	}
}

// initialCheck tells a client Initial that decrypts from one that does not
// at a fraction of InitialKeys' cost, with no allocation for most fakes:
// HKDF over reused SHA-256 states (the extract's key is version 1's salt,
// kept keyed), header protection first, and the AEAD only when the
// unprotected reserved bits are 0 as a client sets them (RFC 9000 §17.2;
// a packet with them set fails anyway). Used by the read loop only.
type initialCheck struct {
	extract hash.Hash // HMAC-SHA256 keyed with initialSaltV1 (Reset keeps the key)
	in, out hash.Hash
	pad     [64]byte
	info    [64]byte
	initial [32]byte
	secret  [32]byte
	tmp     [32]byte
	scratch []byte
}

func newInitialCheck() *initialCheck {
	return &initialCheck{extract: hmac.New(sha256.New, initialSaltV1), in: sha256.New(), out: sha256.New(),
		scratch: make([]byte, readBufSize)}
}

func (ic *initialCheck) hmac(key, msg []byte, dst *[32]byte) {
	ic.pad = [64]byte{}
	copy(ic.pad[:], key)
	for i := range ic.pad {
		ic.pad[i] ^= 0x36
	}
	ic.in.Reset()
	ic.in.Write(ic.pad[:])
	ic.in.Write(msg)
	var inner [32]byte
	ic.in.Sum(inner[:0])
	for i := range ic.pad {
		ic.pad[i] ^= 0x36 ^ 0x5c
	}
	ic.out.Reset()
	ic.out.Write(ic.pad[:])
	ic.out.Write(inner[:])
	ic.out.Sum(dst[:0])
}

// expand is HKDF-Expand-Label for lengths up to 32 (one HMAC block);
// the result is dst's first length bytes.
func (ic *initialCheck) expand(secret []byte, label string, length int, dst *[32]byte) {
	b := ic.info[:0]
	b = append(b, 0, byte(length), byte(6+len(label)))
	b = append(b, "tls13 "...)
	b = append(b, label...)
	b = append(b, 0, 1) // empty context; T(1)'s counter
	ic.hmac(secret, b, dst)
}

// opens says whether pkt, a client Initial with header h, decrypts under
// the keys its destination ID gives (RFC 9001 §5.2); pkt is not changed.
func (ic *initialCheck) opens(pkt []byte, h Header) bool {
	if len(pkt) > len(ic.scratch) || h.PNOffset < 1 || len(pkt) < h.PNOffset+4+sampleLen {
		return false
	}
	ic.extract.Reset()
	ic.extract.Write(h.DCID)
	ic.extract.Sum(ic.initial[:0])
	ic.expand(ic.initial[:], "client in", 32, &ic.secret)
	ic.expand(ic.secret[:], "quic hp", 16, &ic.tmp)
	hp, err := aes.NewCipher(ic.tmp[:16])
	if err != nil {
		return false
	}
	var mask [16]byte
	hp.Encrypt(mask[:], pkt[h.PNOffset+4:h.PNOffset+4+sampleLen])
	if (pkt[0]^mask[0]&0x0f)&0x0c != 0 {
		return false // reserved bits set: not a packet we could accept
	}
	ic.expand(ic.secret[:], "quic key", 16, &ic.tmp)
	block, err := aes.NewCipher(ic.tmp[:16])
	if err != nil {
		return false
	}
	k := &Keys{suite: tls.TLS_AES_128_GCM_SHA256, hash: sha256.New, hpAES: hp}
	if k.aead, err = cipher.NewGCM(block); err != nil {
		return false
	}
	ic.expand(ic.secret[:], "quic iv", 12, &ic.tmp)
	copy(k.iv[:], ic.tmp[:12])
	buf := ic.scratch[:len(pkt)]
	copy(buf, pkt)
	o, err := k.UnprotectHeader(buf, h.PNOffset, -1)
	if err != nil {
		return false
	}
	_, err = k.Open(buf, o, 0)
	return err == nil
}

// withTicketKey gives the listener's connections one session ticket key
// (RFC 8446 §4.6.1; resumption, RFC 9001 §4.6): each connection clones
// the tls.Config, and crypto/tls would give each clone a key of its own
// that no other connection could decrypt a ticket with. A key set with
// SetSessionTicketKeys before Listen is replaced: the listener's is
// random, so tickets do not outlive it.
func withTicketKey(tc *tls.Config) *tls.Config {
	if tc.SessionTicketsDisabled {
		return tc
	}
	tc = tc.Clone()
	var k [32]byte
	rand.Read(k[:])
	tc.SetSessionTicketKeys([][32]byte{k})
	return tc
}
