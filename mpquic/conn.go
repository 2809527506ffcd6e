package mpquic

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Packet number spaces (RFC 9000 §12.3).
const (
	spaceInitial = iota
	spaceHandshake
	spaceApp
	numSpaces
)

var spaceLevels = [numSpaces]tls.QUICEncryptionLevel{
	tls.QUICEncryptionLevelInitial, tls.QUICEncryptionLevelHandshake, tls.QUICEncryptionLevelApplication,
}

var spacePacketTypes = [numSpaces]PacketType{PacketInitial, PacketHandshake, Packet1RTT}

const (
	connIDLen        = 8
	maxBufferedPkts  = 32                    // undecryptable packets kept per space until keys arrive
	ackElicitingMax  = 2                     // ACK at once after this many ack-eliciting packets (§13.2.2)
	localMaxAckDelay = 25 * time.Millisecond // our max_ack_delay (the default)
)

// pnSpace is one packet number space: its keys, sent packets awaiting
// acknowledgment, received packet numbers to acknowledge, and its CRYPTO
// stream in both directions.
type pnSpace struct {
	seal, open *Keys
	discarded  bool

	nextPN        uint64
	sent          []*sentPacket // ascending packet numbers
	largestAcked  int64
	lossTime      time.Time
	lastEliciting time.Time // last ack-eliciting packet sent

	recvd            rangeSet
	largestRecv      int64
	largestRecvTime  time.Time
	elicitingUnacked int       // ack-eliciting packets received since our last ACK
	ackAt            time.Time // when an ACK must go; zero if none owed
	minTracked       uint64    // packets below this count as duplicates (recvd is trimmed)

	crypto   sendBuf
	cryptoIn recvBuf
	buffered [][]byte // packets that arrived before our keys
}

func newSpace() *pnSpace { return &pnSpace{largestAcked: -1, largestRecv: -1} }

func (s *pnSpace) bytesInFlight() bool {
	for _, p := range s.sent {
		if p.ackEliciting {
			return true
		}
	}
	return false
}

type datagram struct {
	b    []byte
	buf  *[]byte // pooled buffer to return, may be nil
	from net.Addr
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}

// Conn is a QUIC connection. Its state is guarded by mu and driven by one
// goroutine (run) that reads datagrams, fires timers and sends packets;
// stream calls change state under mu and wake it.
type Conn struct {
	mu       sync.Mutex
	conf     Config
	isClient bool
	pconn    net.PacketConn
	remote   net.Addr
	tls      *tls.QUICConn

	in   chan datagram
	wake chan struct{}

	scid, dcid   []byte // ours, and the peer's we address packets to
	origDCID     []byte // the client's first DCID
	peerSCIDSeen bool   // client: the server's SCID has replaced origDCID

	spaces     [numSpaces]*pnSpace
	rtt        rttStats
	cc         *newReno
	ptoCount   int
	lossTimer  time.Time
	nextPaceAt time.Time
	probe      [numSpaces]int // probe packets owed after a PTO
	mss        int

	// 1-RTT key update (RFC 9001 §6).
	keyPhase       bool
	prevOpen       *Keys
	nextOpen       *Keys
	firstPNInPhase uint64
	keyUpdates     int           // peer-initiated key updates followed
	socketSent     uint64        // datagram bytes the socket accepted
	socketRecv     atomic.Uint64 // datagram bytes read for this connection, dropped ones included
	packetsSent    uint64
	packetsLost    uint64
	ptos           uint64

	peerParams        TransportParameters
	haveParams        bool
	handshakeComplete bool
	confirmed         bool
	addrValidated     bool // server: anti-amplification lifted (§8.1)
	bytesRecv         int
	bytesSent         int
	sendHandshakeDone bool
	lastRecv          time.Time
	idleTimeout       time.Duration
	idleStart         time.Time
	handshakeDeadline time.Time

	// Streams and flow control.
	streams        map[uint64]*Stream
	active         []*Stream // streams with data or signals to send
	acceptQ        []*Stream
	acceptReady    chan struct{}
	openReady      chan struct{}
	nextLocalBidi  uint64 // next stream ID we open
	peerMaxBidi    uint64 // streams we may open (count)
	nextPeerBidi   uint64 // count of peer streams seen
	localMaxBidi   uint64 // streams the peer may open (count)
	peerBidiClosed uint64
	sendMaxStreams bool
	peerMaxData    uint64
	dataSent       uint64 // new stream bytes sent, against peerMaxData
	localMaxData   uint64
	dataRecvd      uint64 // sum of streams' highest offsets
	dataConsumed   uint64
	sendMaxData    bool
	blockedAt      uint64 // DATA_BLOCKED sent at this limit
	pathResponses  [][8]byte
	from           net.Addr // where the datagram being handled came from
	challenge      *[8]byte // PATH_CHALLENGE data awaiting its response
	challengeSent  bool
	pathsValidated int

	// Closing (RFC 9000 §10.2).
	closeErr     error // why the connection ended or is ending
	closeFrame   *ConnectionCloseFrame
	closing      bool
	closingUntil time.Time
	closePending bool // send the close frame at the next chance
	done         chan struct{}
	handshakeCh  chan struct{}
	onDone       func() // the listener forgets our CIDs
	onHandshake  func(*Conn)
	ending       chan struct{} // closed when closing or draining starts
	ended        bool
	closeSent    chan struct{}
	sendScratch  []byte

	// Connection IDs (connid.go).
	localCIDs         map[string]uint64 // ours → sequence number
	issued            map[uint64]NewConnectionIDFrame
	nextCIDSeq        uint64
	cidQueue          []uint64 // NEW_CONNECTION_ID to send, by sequence number
	peerCIDs          []peerCID
	dcidSeq           uint64
	peerRetirePriorTo uint64
	retireQueue       []uint64 // RETIRE_CONNECTION_ID to send
	onNewCID          func([]byte)
	onRetireID        func([]byte)
	batch             []byte // datagrams being built for one (GSO) write
	gso               bool   // the socket may take GSO writes
	oob               []byte // the UDP_SEGMENT control message
	ownsConn          bool
}

func newConn(isClient bool, pconn net.PacketConn, remote net.Addr, conf Config, tlsConf *tls.Config) *Conn {
	c := &Conn{
		conf: conf, isClient: isClient, pconn: pconn, remote: remote,
		in: make(chan datagram, 1024), wake: make(chan struct{}, 1),
		mss: conf.MaxDatagramSize, cc: newNewReno(conf.MaxDatagramSize),
		streams: map[uint64]*Stream{}, acceptReady: make(chan struct{}, 1), openReady: make(chan struct{}, 1),
		localMaxBidi: conf.MaxIncomingStreams, localMaxData: conf.ConnectionReceiveWindow,
		done: make(chan struct{}), handshakeCh: make(chan struct{}), ending: make(chan struct{}), closeSent: make(chan struct{}),
		sendScratch: make([]byte, 0, maxDatagramSize+64), batch: make([]byte, 0, maxGSOSegments*(maxDatagramSize+64)),
		gso:         gsoCapable(pconn),
		idleTimeout: conf.MaxIdleTimeout,
	}
	for i := range c.spaces {
		c.spaces[i] = newSpace()
	}
	if !isClient {
		c.nextLocalBidi = 1
	}
	tlsConf = tlsConf.Clone()
	tlsConf.MinVersion = tls.VersionTLS13 // QUIC is TLS 1.3 only (RFC 9001 §4.2)
	qc := &tls.QUICConfig{TLSConfig: tlsConf}
	if isClient {
		c.tls = tls.QUICClient(qc)
	} else {
		c.tls = tls.QUICServer(qc)
	}
	c.scid = randomID(connIDLen)
	c.initCIDs()
	now := time.Now()
	c.lastRecv, c.idleStart = now, now
	c.handshakeDeadline = now.Add(conf.HandshakeTimeout)
	return c
}

func randomID(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return b
}

func (c *Conn) localParams() TransportParameters {
	p := DefaultTransportParameters()
	p.MaxIdleTimeout = c.conf.MaxIdleTimeout
	p.MaxUDPPayloadSize = readBufSize
	p.InitialMaxData = c.conf.ConnectionReceiveWindow
	p.InitialMaxStreamDataBidiLocal = c.conf.StreamReceiveWindow
	p.InitialMaxStreamDataBidiRemote = c.conf.StreamReceiveWindow
	p.InitialMaxStreamsBidi = c.conf.MaxIncomingStreams
	p.InitialSCID = c.scid
	if !c.isClient {
		p.OriginalDCID = c.origDCID
	}
	return p
}

// start begins the TLS handshake; the client's first flight is queued.
func (c *Conn) start() error {
	p := c.localParams()
	c.tls.SetTransportParameters(p.Append(nil))
	client, server := InitialKeys(c.origDCID)
	in := c.spaces[spaceInitial]
	if c.isClient {
		in.seal, in.open = client, server
	} else {
		in.seal, in.open = server, client
	}
	if err := c.tls.Start(context.Background()); err != nil {
		return err
	}
	return c.handleTLSEvents()
}

// run is the connection's goroutine.
func (c *Conn) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		c.mu.Lock()
		now := time.Now()
		c.onTimers(now)
		if c.isDone() {
			c.mu.Unlock()
			return
		}
		c.sendPackets(now)
		next := c.nextTimer()
		c.mu.Unlock()
		if !next.IsZero() {
			timer.Reset(max(time.Until(next), 0))
		} else {
			timer.Reset(time.Hour)
		}
		select {
		case d := <-c.in:
			c.mu.Lock()
			now = time.Now()
			c.handleDatagram(d, now)
			for i := 0; i < 64; i++ { // drain a burst before sending
				select {
				case d = <-c.in:
					c.handleDatagram(d, now)
					continue
				default:
				}
				break
			}
			c.mu.Unlock()
		case <-c.wake:
		case <-timer.C:
		case <-c.done:
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

func (c *Conn) isDone() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *Conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// terminate ends the connection for good: streams fail with err.
func (c *Conn) terminate(err error) {
	if c.isDone() {
		return
	}
	if c.closeErr == nil {
		c.closeErr = err
	}
	c.markEnding()
	close(c.done)
	c.tls.Close()
	if c.onDone != nil {
		go c.onDone()
	}
	if c.ownsConn {
		c.pconn.Close()
	} else if c.isClient {
		c.pconn.SetReadDeadline(time.Now()) // stop our reader
	}
}

// closeWith starts closing with a CONNECTION_CLOSE (RFC 9000 §10.2.1).
func (c *Conn) closeWith(f ConnectionCloseFrame, err error) {
	if c.closing || c.isDone() {
		return
	}
	c.closing = true
	c.closeErr = err
	c.markEnding()
	c.closeFrame = &f
	c.closePending = true
	c.closingUntil = time.Now().Add(3 * c.ptoDuration())
	c.failStreams()
	c.signal()
}

func (c *Conn) markEnding() {
	if !c.ended {
		c.ended = true
		close(c.ending)
		c.failStreams()
	}
}

func (c *Conn) closeTransport(err *TransportError) {
	c.closeWith(CloseFrameFor(err), err)
}

func (c *Conn) ptoDuration() time.Duration {
	d := c.rtt.pto()
	if c.handshakeComplete {
		d += c.peerParams.MaxAckDelay
	}
	return d
}

// --- receiving ---

func (c *Conn) handleDatagram(d datagram, now time.Time) {
	defer func() {
		if d.buf != nil {
			bufPool.Put(d.buf)
		}
	}()
	if c.isDone() {
		return
	}
	if c.closing {
		c.closePending = true // answer with the close again (§10.2.1)
		return
	}
	c.bytesRecv += len(d.b)
	b := d.b
	first := true
	for len(b) > 0 {
		h, n, err := ParseHeader(b, connIDLen)
		if err != nil {
			if c.isClient && errors.Is(err, ErrUnsupportedVersion) {
				return
			}
			return // the rest of the datagram is unusable
		}
		pkt := b[:n]
		b = b[n:]
		if h.Type == PacketVersionNegotiation {
			if c.isClient && first && !c.peerSCIDSeen && string(h.DCID) == string(c.scid) {
				for _, v := range h.SupportedVersions {
					if v == Version1 {
						return // a forged or stale list: ignore (RFC 9000 §6.2)
					}
				}
				c.terminate(ErrVersionNegotiation)
			}
			return
		}
		if h.Type == PacketRetry {
			if c.isClient && !c.peerSCIDSeen && VerifyRetry(pkt, c.origDCID) {
				c.closeTransport(transportErr(ProtocolViolation, 0, "Retry is not supported"))
			}
			return
		}
		if !c.ours(h.DCID) && !(h.Type == PacketInitial && !c.isClient && string(h.DCID) == string(c.origDCID)) {
			if first || h.Type != Packet1RTT {
				continue
			}
			return
		}
		first = false
		c.from = d.from
		c.handlePacket(h, pkt, now, false)
		if c.closing || c.isDone() {
			return
		}
	}
}

func spaceOf(t PacketType) int {
	switch t {
	case PacketInitial:
		return spaceInitial
	case PacketHandshake:
		return spaceHandshake
	case Packet1RTT:
		return spaceApp
	}
	return -1
}

func (c *Conn) handlePacket(h Header, pkt []byte, now time.Time, replay bool) {
	si := spaceOf(h.Type)
	if si < 0 {
		return // 0-RTT is not supported: dropped
	}
	sp := c.spaces[si]
	if sp.discarded {
		return
	}
	if sp.open == nil {
		if len(sp.buffered) < maxBufferedPkts && !replay {
			sp.buffered = append(sp.buffered, append([]byte(nil), pkt...))
		}
		return
	}
	keys := sp.open
	o, err := keys.UnprotectHeader(pkt, h.PNOffset, sp.largestRecv)
	if err != nil {
		return
	}
	keyUpdate := false
	if si == spaceApp && o.KeyPhase() != c.keyPhase {
		if o.PN < c.firstPNInPhase && c.prevOpen != nil {
			keys = c.prevOpen
		} else {
			if c.nextOpen == nil {
				c.nextOpen, _ = sp.open.NextKeys()
			}
			keys, keyUpdate = c.nextOpen, true
		}
	}
	o, err = keys.Open(pkt, o, 0)
	if errors.Is(err, ErrDecryptionFailed) {
		return
	}
	if err != nil {
		var te *TransportError
		if errors.As(err, &te) {
			c.closeTransport(te)
		}
		return
	}
	if keyUpdate {
		if !c.confirmed {
			c.closeTransport(transportErr(KeyUpdateError, 0, "key update before the handshake was confirmed"))
			return
		}
		c.prevOpen, sp.open, c.nextOpen = sp.open, keys, nil
		next, err := sp.seal.NextKeys()
		if err != nil {
			c.closeTransport(transportErr(InternalError, 0, "key update: %v", err))
			return
		}
		sp.seal = next
		c.keyPhase = !c.keyPhase
		c.firstPNInPhase = o.PN
		c.keyUpdates++
	}
	if sp.recvd.contains(o.PN) || o.PN < sp.minTracked {
		return // duplicate, or too old to tell
	}
	frames, err := ParseFrames(o.Payload, h.Type, false)
	if err != nil {
		var te *TransportError
		if errors.As(err, &te) {
			c.closeTransport(te)
		} else {
			c.closeTransport(transportErr(FrameEncodingError, 0, "%v", err))
		}
		return
	}
	if c.isClient && si == spaceInitial && !c.peerSCIDSeen {
		c.dcid = append([]byte(nil), h.SCID...)
		c.peerSCIDSeen = true
	}
	if !c.isClient && si == spaceHandshake && !c.addrValidated {
		c.addrValidated = true // §8.1: a Handshake packet proves the address
		c.discardSpace(spaceInitial)
	}
	c.lastRecv = now
	c.idleStart = now
	eliciting, probing := false, true
	for _, f := range frames {
		switch f.(type) {
		case PathChallengeFrame, PathResponseFrame, NewConnectionIDFrame, PaddingFrame:
		default:
			probing = false
		}
	}
	newest := int64(o.PN) > sp.largestRecv
	for _, f := range frames {
		if err := c.handleFrame(si, f, now); err != nil {
			var te *TransportError
			if !errors.As(err, &te) {
				te = transportErr(InternalError, f.Type(), "%v", err)
			}
			c.closeTransport(te)
			return
		}
		switch f.(type) {
		case AckFrame, PaddingFrame, ConnectionCloseFrame:
		default:
			eliciting = true
		}
		if c.closing || c.isDone() {
			return
		}
	}
	if sp.discarded {
		return
	}
	if si == spaceApp && !replay && !probing && newest {
		c.onPeerAddress(now)
	}
	sp.recvd.add(o.PN, o.PN)
	if len(sp.recvd) > 4*maxAckRanges {
		sp.recvd = append(sp.recvd[:0], sp.recvd[len(sp.recvd)-2*maxAckRanges:]...)
		sp.minTracked = sp.recvd[0].lo
	}
	if int64(o.PN) > sp.largestRecv {
		sp.largestRecv = int64(o.PN)
		sp.largestRecvTime = now
	}
	if eliciting {
		sp.elicitingUnacked++
		delay := localMaxAckDelay
		outOfOrder := int64(o.PN) < sp.largestRecv || (len(sp.recvd) > 1)
		if si != spaceApp || sp.elicitingUnacked >= ackElicitingMax || outOfOrder {
			delay = 0
		}
		if at := now.Add(delay); sp.ackAt.IsZero() || at.Before(sp.ackAt) {
			sp.ackAt = at
		}
	}
}

func (c *Conn) handleFrame(si int, f Frame, now time.Time) error {
	sp := c.spaces[si]
	switch f := f.(type) {
	case PaddingFrame, PingFrame:
	case AckFrame:
		return c.onAck(si, f, now)
	case CryptoFrame:
		if f.Offset+uint64(len(f.Data)) > sp.cryptoIn.contiguous()+64<<10 {
			return transportErr(CryptoBufferExceeded, FrameCrypto, "crypto data %d bytes ahead", f.Offset-sp.cryptoIn.contiguous())
		}
		sp.cryptoIn.push(f.Offset, f.Data)
		if n := sp.cryptoIn.readable(); n > 0 {
			data := make([]byte, n)
			sp.cryptoIn.read(data)
			if err := c.tls.HandleData(spaceLevels[si], data); err != nil {
				return tlsError(err)
			}
			return c.handleTLSEvents()
		}
	case HandshakeDoneFrame:
		if !c.isClient {
			return transportErr(ProtocolViolation, FrameHandshakeDone, "HANDSHAKE_DONE from a client")
		}
		c.confirm()
	case NewTokenFrame:
		if !c.isClient {
			return transportErr(ProtocolViolation, FrameNewToken, "NEW_TOKEN from a client")
		}
	case ConnectionCloseFrame:
		var err error
		if f.Application {
			err = &ApplicationCloseError{Remote: true, Code: f.ErrorCode, Reason: f.Reason}
		} else {
			err = &PeerCloseError{Err: &TransportError{Code: TransportErrorCode(f.ErrorCode), FrameType: FrameType(f.FrameType), Reason: f.Reason}}
		}
		c.closeErr = err
		c.failStreams()
		c.terminate(err) // draining: nothing more is sent (§10.2.2)
	case PathChallengeFrame:
		if len(c.pathResponses) < 4 {
			c.pathResponses = append(c.pathResponses, f.Data)
		}
	case NewConnectionIDFrame:
		return c.handleNewCID(f)
	case RetireConnectionIDFrame:
		return c.handleRetireCID(f)
	case PathResponseFrame:
		c.onPathResponse(f)
	default:
		return c.handleStreamFrame(f)
	}
	return nil
}

// tlsError maps a crypto/tls failure to CRYPTO_ERROR plus the alert
// (RFC 9001 §4.8).
func tlsError(err error) *TransportError {
	code := TransportErrorCode(0x100 + 80) // internal_error alert
	var alert tls.AlertError
	if errors.As(err, &alert) {
		code = TransportErrorCode(0x100 + uint64(alert))
	}
	te := transportErr(code, FrameCrypto, "TLS: %v", err)
	te.cause = err
	return te
}

func (c *Conn) handleTLSEvents() error {
	for {
		ev := c.tls.NextEvent()
		switch ev.Kind {
		case tls.QUICNoEvent:
			return nil
		case tls.QUICSetReadSecret, tls.QUICSetWriteSecret:
			si := levelSpace(ev.Level)
			if si < 0 {
				continue // 0-RTT
			}
			k, err := NewKeys(ev.Suite, append([]byte(nil), ev.Data...))
			if err != nil {
				return transportErr(InternalError, 0, "%v", err)
			}
			sp := c.spaces[si]
			if ev.Kind == tls.QUICSetWriteSecret {
				sp.seal = k
				continue
			}
			sp.open = k
			c.replayBuffered(si)
		case tls.QUICWriteData:
			si := levelSpace(ev.Level)
			if si >= 0 {
				c.spaces[si].crypto.write(ev.Data)
			}
		case tls.QUICTransportParameters:
			if err := c.setPeerParams(ev.Data); err != nil {
				return err
			}
		case tls.QUICTransportParametersRequired:
			p := c.localParams()
			c.tls.SetTransportParameters(p.Append(nil))
		case tls.QUICHandshakeDone:
			c.handshakeComplete = true
			if !c.isClient {
				c.sendHandshakeDone = true
				c.confirm()
				c.announce()
			}
			close(c.handshakeCh)
		case tls.QUICErrorEvent:
			return tlsError(ev.Err)
		}
	}
}

// announce queues a server connection for Accept once its handshake is done.
func (c *Conn) announce() {
	if c.onHandshake != nil {
		c.onHandshake(c)
	}
}

func levelSpace(l tls.QUICEncryptionLevel) int {
	for i, sl := range spaceLevels {
		if sl == l {
			return i
		}
	}
	return -1
}

func (c *Conn) replayBuffered(si int) {
	sp := c.spaces[si]
	pkts := sp.buffered
	sp.buffered = nil
	now := time.Now()
	for _, p := range pkts {
		h, n, err := ParseHeader(p, connIDLen)
		if err == nil {
			c.handlePacket(h, p[:n], now, true)
		}
	}
}

func (c *Conn) setPeerParams(b []byte) error {
	p, err := ParseTransportParameters(b, c.isClient)
	if err != nil {
		return err
	}
	// RFC 9000 §7.3: the connection IDs the handshake used, authenticated.
	if c.isClient {
		if string(p.OriginalDCID) != string(c.origDCID) || p.OriginalDCID == nil {
			return transportErr(TransportParameterError, 0, "original_destination_connection_id does not match")
		}
		if p.InitialSCID == nil || string(p.InitialSCID) != string(c.dcid) {
			return transportErr(TransportParameterError, 0, "initial_source_connection_id does not match")
		}
	} else if p.InitialSCID == nil || string(p.InitialSCID) != string(c.dcid) {
		return transportErr(TransportParameterError, 0, "initial_source_connection_id does not match")
	}
	c.peerParams, c.haveParams = p, true
	c.peerMaxData = p.InitialMaxData
	c.peerMaxBidi = p.InitialMaxStreamsBidi
	if p.MaxIdleTimeout > 0 && (c.idleTimeout == 0 || p.MaxIdleTimeout < c.idleTimeout) {
		c.idleTimeout = p.MaxIdleTimeout
	}
	if lim := int(min(p.MaxUDPPayloadSize, maxDatagramSize)); lim < c.mss {
		c.mss = lim
	}
	notify(c.openReady)
	return nil
}

// confirm marks the handshake confirmed (RFC 9001 §4.1.2) and drops the
// Handshake keys (§4.9.2).
func (c *Conn) confirm() {
	if c.confirmed {
		return
	}
	c.confirmed = true
	c.discardSpace(spaceInitial)
	c.discardSpace(spaceHandshake)
	// The handshake's ID is sequence 0; NEW_CONNECTION_ID frames may have
	// come before confirmation.
	first := peerCID{seq: 0, cid: c.dcid}
	if c.peerParams.StatelessResetToken != nil {
		first.token = *c.peerParams.StatelessResetToken
	}
	c.peerCIDs = append([]peerCID{first}, c.peerCIDs...)
	c.issueCIDs()
}

func (c *Conn) discardSpace(si int) {
	sp := c.spaces[si]
	if sp.discarded {
		return
	}
	for _, p := range sp.sent {
		if p.inFlight {
			c.cc.discard(p)
		}
	}
	*sp = pnSpace{discarded: true, largestAcked: -1, largestRecv: -1}
	c.ptoCount = 0
}

// --- acknowledgments and loss (RFC 9002 §6, Appendix A) ---

func (c *Conn) onAck(si int, f AckFrame, now time.Time) error {
	sp := c.spaces[si]
	largest := f.Ranges[0].Largest
	if largest >= sp.nextPN {
		return transportErr(ProtocolViolation, FrameAck, "ACK of packet %d never sent", largest)
	}
	if int64(largest) > sp.largestAcked {
		sp.largestAcked = int64(largest)
	}
	var newly []*sentPacket
	kept := sp.sent[:0]
	ri := len(f.Ranges) - 1 // ascending walk over descending ranges
	for _, p := range sp.sent {
		for ri >= 0 && f.Ranges[ri].Largest < p.pn {
			ri--
		}
		if ri >= 0 && p.pn >= f.Ranges[ri].Smallest {
			newly = append(newly, p)
			continue
		}
		kept = append(kept, p)
	}
	clear(sp.sent[len(kept):])
	sp.sent = kept
	if len(newly) == 0 {
		return nil
	}
	last := newly[len(newly)-1]
	eliciting := false
	for _, p := range newly {
		eliciting = eliciting || p.ackEliciting
	}
	if last.pn == largest && eliciting {
		var delay time.Duration
		if si == spaceApp {
			exp := c.peerParams.AckDelayExponent
			if !c.haveParams {
				exp = DefaultAckDelayExponent
			}
			delay = time.Duration(f.AckDelay<<exp) * time.Microsecond
		}
		c.rtt.update(now.Sub(last.time), delay, c.confirmed, c.peerParams.MaxAckDelay)
		if si == spaceApp {
			c.cc.onRTTSample(c.rtt.latest, largest, sp.nextPN)
		}
	}
	for _, p := range newly {
		c.onPacketAcked(si, p)
	}
	c.detectLost(si, now)
	c.ptoCount = 0
	return nil
}

func (c *Conn) onPacketAcked(si int, p *sentPacket) {
	sp := c.spaces[si]
	if p.inFlight {
		c.cc.onAcked(p)
	}
	for _, f := range p.frames {
		switch f.kind {
		case sfCrypto:
			sp.crypto.onAck(f.off, f.n, false)
		case sfStream:
			if s := c.streams[f.id]; s != nil {
				s.send.onAck(f.off, f.n, f.fin)
				c.maybeDone(s)
			}
		case sfResetStream:
			if s := c.streams[f.id]; s != nil {
				s.resetAcked = true
				c.maybeDone(s)
			}
		}
	}
}

func (c *Conn) detectLost(si int, now time.Time) {
	sp := c.spaces[si]
	sp.lossTime = time.Time{}
	if sp.largestAcked < 0 {
		return
	}
	delay := c.rtt.lossDelay()
	lostBefore := now.Add(-delay)
	kept := sp.sent[:0]
	for _, p := range sp.sent {
		if int64(p.pn) > sp.largestAcked {
			kept = append(kept, p)
			continue
		}
		if !p.time.After(lostBefore) || int64(p.pn)+packetThreshold <= sp.largestAcked {
			c.onPacketLost(si, p, now)
			continue
		}
		if t := p.time.Add(delay); sp.lossTime.IsZero() || t.Before(sp.lossTime) {
			sp.lossTime = t
		}
		kept = append(kept, p)
	}
	clear(sp.sent[len(kept):])
	sp.sent = kept
}

func (c *Conn) onPacketLost(si int, p *sentPacket, now time.Time) {
	c.packetsLost++
	if p.inFlight {
		c.cc.onLost(p, now)
	}
	c.requeue(si, p)
}

// requeue puts what a lost (or probed) packet carried back to be sent.
func (c *Conn) requeue(si int, p *sentPacket) {
	sp := c.spaces[si]
	for _, f := range p.frames {
		switch f.kind {
		case sfCrypto:
			sp.crypto.onLost(f.off, f.n, false)
		case sfStream:
			if s := c.streams[f.id]; s != nil && s.resetCode == nil {
				s.send.onLost(f.off, f.n, f.fin)
				c.activate(s)
			}
		case sfMaxData:
			c.sendMaxData = true
		case sfMaxStreams:
			c.sendMaxStreams = true
		case sfHandshakeDone:
			c.sendHandshakeDone = true
		case sfNewCID:
			if _, ok := c.issued[f.id]; ok {
				c.cidQueue = append(c.cidQueue, f.id)
			}
		case sfRetireCID:
			c.retireQueue = append(c.retireQueue, f.id)
		case sfPathChallenge:
			c.challengeSent = false // send it again while unanswered
		case sfMaxStreamData:
			if s := c.streams[f.id]; s != nil {
				s.sendMaxStreamData = true
				c.activate(s)
			}
		case sfResetStream:
			if s := c.streams[f.id]; s != nil {
				s.resetPending = true
				c.activate(s)
			}
		case sfStopSending:
			if s := c.streams[f.id]; s != nil {
				s.stopPending = true
				c.activate(s)
			}
		}
	}
}

// lossDetectionTimer is RFC 9002 A.8's SetLossDetectionTimer.
func (c *Conn) lossDetectionTimer() (time.Time, int, bool) {
	var earliest time.Time
	esi := -1
	for i, sp := range c.spaces {
		if !sp.lossTime.IsZero() && (earliest.IsZero() || sp.lossTime.Before(earliest)) {
			earliest, esi = sp.lossTime, i
		}
	}
	if esi >= 0 {
		return earliest, esi, false
	}
	if c.isDone() || c.closing {
		return time.Time{}, -1, false
	}
	// PTO. A client not yet sure the server validated its address arms it
	// even with nothing in flight (§6.2.2.1).
	clientDeadlock := c.isClient && !c.confirmed
	var pto time.Time
	psi := -1
	d := c.rtt.pto() << c.ptoCount
	for i, sp := range c.spaces {
		if sp.discarded || sp.seal == nil {
			continue
		}
		if !sp.bytesInFlight() && !(clientDeadlock && i < spaceApp && sp.lastEliciting.IsZero() == false) {
			continue
		}
		if i == spaceApp {
			if !c.confirmed {
				continue // §6.2.1: no application-data PTO before confirmation
			}
			d += c.peerParams.MaxAckDelay << c.ptoCount
		}
		t := sp.lastEliciting.Add(d)
		if pto.IsZero() || t.Before(pto) {
			pto, psi = t, i
		}
	}
	return pto, psi, true
}

func (c *Conn) onLossTimer(now time.Time) {
	t, si, isPTO := c.lossDetectionTimer()
	if t.IsZero() || t.After(now) {
		return
	}
	if !isPTO {
		c.detectLost(si, now)
		return
	}
	c.ptoCount++
	c.ptos++
	sp := c.spaces[si]
	// Probe: send the oldest unacknowledged data again (§6.2.4), or a PING.
	n := 0
	for _, p := range sp.sent {
		if p.ackEliciting && n < 2 {
			c.requeue(si, p)
			n++
		}
	}
	if si == spaceInitial && c.isClient && c.spaces[spaceHandshake].seal != nil && !c.spaces[spaceHandshake].discarded {
		sp = c.spaces[spaceHandshake]
		si = spaceHandshake
	}
	c.probe[si] = 2
	if n == 0 && sp.lastEliciting.IsZero() {
		sp.lastEliciting = now
	}
}

func (c *Conn) onTimers(now time.Time) {
	if c.isDone() {
		return
	}
	if c.closing {
		if !now.Before(c.closingUntil) {
			c.terminate(c.closeErr)
		}
		return
	}
	if !c.handshakeComplete && now.After(c.handshakeDeadline) {
		c.terminate(ErrHandshakeTimeout)
		c.failStreams()
		return
	}
	if c.idleTimeout > 0 && now.Sub(c.idleStart) > max(c.idleTimeout, 3*c.ptoDuration()) {
		c.terminate(ErrIdleTimeout) // silently (§10.1)
		c.failStreams()
		return
	}
	c.onLossTimer(now)
	if ka := c.conf.KeepAlivePeriod; ka > 0 && c.confirmed && now.Sub(c.lastActivity()) >= ka {
		c.probe[spaceApp] = max(c.probe[spaceApp], 1) // a PING (RFC 9000 §10.1.2)
	}
}

func (c *Conn) lastActivity() time.Time {
	t := c.lastRecv
	if l := c.spaces[spaceApp].lastEliciting; l.After(t) {
		t = l
	}
	return t
}

func (c *Conn) nextTimer() time.Time {
	if c.isDone() {
		return time.Time{}
	}
	if c.closing {
		if c.closePending {
			return time.Now()
		}
		return c.closingUntil
	}
	var next time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	lt, _, _ := c.lossDetectionTimer()
	earliest(lt)
	for _, sp := range c.spaces {
		if sp.seal != nil {
			earliest(sp.ackAt)
		}
	}
	if !c.handshakeComplete {
		earliest(c.handshakeDeadline)
	}
	if c.idleTimeout > 0 {
		earliest(c.idleStart.Add(max(c.idleTimeout, 3*c.ptoDuration())))
	}
	earliest(c.nextPaceAt)
	if ka := c.conf.KeepAlivePeriod; ka > 0 && c.confirmed {
		earliest(c.lastActivity().Add(ka))
	}
	return next
}
