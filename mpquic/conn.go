package mpquic

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mptester/mptester/mpquic/internal/congestion"
	"github.com/mptester/mptester/mpquic/internal/recovery"
	"github.com/mptester/mptester/mpquic/internal/wire"
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

	nextPN           uint64
	recovery.History // sent packets awaiting acknowledgment, loss detection

	recvd            rangeSet
	largestRecv      int64
	largestRecvTime  time.Time
	elicitingUnacked int       // ack-eliciting packets received since our last ACK
	ackAt            time.Time // when an ACK must go; zero if none owed
	minTracked       uint64    // packets below this count as duplicates (recvd is trimmed)

	crypto   sendBuf
	cryptoIn recvBuf
	buffered [][]byte // packets that arrived before our keys, each followed by its ECN codepoint

	// ECN (ecn.go): packets received by codepoint, packets sent ECT(0),
	// the counts the peer last reported.
	ecnRecv [4]uint64
	ectSent uint64
	peerECN ECNCounts

	kind  int   // spaceInitial, spaceHandshake or spaceApp
	path  *path // whose recovery state it uses (path 0 for the handshake spaces)
	probe int   // probe packets owed after a PTO
}

func newSpace() *pnSpace {
	sp := &pnSpace{largestRecv: -1}
	sp.History.Reset()
	return sp
}

type datagram struct {
	b    []byte
	buf  *[]byte // pooled buffer to return, may be nil
	from net.Addr
	to   netip.Addr // the local address it was sent to, when the listener knows it
	ecn  byte       // the ECN codepoint it arrived with (ecnNotECT when unknown)
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}

// Conn is a QUIC connection. Its state is guarded by mu and driven by one
// goroutine (run) that reads datagrams, fires timers and sends packets;
// stream calls change state under mu and wake it.
type Conn struct {
	mu       sync.Mutex
	conf     Config
	isClient bool
	pconn    net.PacketConn // path 0's socket (a server's paths all share it)
	tls      *tls.QUICConn

	in   chan datagram // a client's path readers send here
	rx   *rxQueue      // a server's listener queues here
	wake chan struct{}

	scid         []byte // ours from the handshake
	origDCID     []byte // the client's first DCID
	peerSCIDSeen bool   // client: the server's SCID has replaced origDCID
	initDCID     []byte // the DCID the Initial keys derive from; nil: origDCID
	retrySCID    []byte // client: the Retry's SCID; server: the ID our Retry gave
	retryToken   []byte // client: the Retry's token, in every Initial after it

	// The listener's bookkeeping, guarded by its mu (endpoint.go).
	lkeys     []string // the IDs that route to us
	lsrc      sourceKey
	lhalfOpen bool // counted half-open
	lvalid    bool // admitted with a Retry token

	spaces     [numSpaces]*pnSpace // spaceApp is path 0's and holds the 1-RTT keys
	spaceList  []*pnSpace          // every live space (multipath.go)
	payloads   [numSpaces][]byte   // payload scratch per space kind (payloadBuf)
	nextPaceAt time.Time
	mss        int

	// Multipath (multipath.go).
	paths          map[uint32]*path
	pathOrder      []uint32 // the keys of paths, ascending
	multipath      bool
	localMaxPathID uint32
	peerMaxPathID  uint32
	nextPathID     uint32
	pathCIDReady   chan struct{}
	sendMaxPathID  bool // MAX_PATH_ID owed (a path was discarded)
	earlyStatus    map[uint32]PathStatusFrame
	pathsBlocked   bool // PATHS_BLOCKED owed (AddPath hit the limit)
	pathCIDs       pathCIDsState
	qlog           *qlogWriter            // nil unless Config.Qlog
	liaScratch     []congestion.LIAPath   // liaPaths (congestion.go)
	ackedScratch   []*recovery.SentPacket // onAck's newly acknowledged packets
	lostScratch    []*recovery.SentPacket // detectLost's lost packets

	// 1-RTT key update (RFC 9001 §6, keyupdate.go).
	keyPhase    bool
	prevOpen    *Keys
	nextOpen    *Keys
	kp          keyPhaseState
	socketSent  uint64        // datagram bytes the socket accepted
	socketRecv  atomic.Uint64 // datagram bytes read for this connection, dropped ones included
	rxDropped   atomic.Uint64 // datagrams its full input queue refused (server)
	packetsSent uint64
	packetsLost uint64
	ptos        uint64
	speedUps    int // early Initial CRYPTO resends (RFC 9002 §6.2.3)

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
	uni            uniStreams // unistream.go
	peerMaxData    uint64
	dataSent       uint64 // new stream bytes sent, against peerMaxData
	localMaxData   uint64
	dataRecvd      uint64 // sum of streams' highest offsets
	recvGaps       int    // pieces held beyond a gap, over every stream
	unsent         int    // bytes written and never sent, over every stream
	sendWaiters    []*Stream
	// testFrames, set only by tests, appends the frames of a misbehaving
	// peer to each 1-RTT packet (not tracked for loss).
	testFrames func(b []byte, avail int) []byte
	// testECN, set only by tests, rewrites the ECN codepoint datagrams
	// arrived with (a router that marks CE).
	testECN func(byte) byte
	// testCE, set only by tests, sees each CE increase on a validated
	// path: the largest newly acknowledged packet's send time, and
	// whether the window was reduced for it.
	testCE         func(largestSent, now time.Time, reduced bool)
	dataConsumed   uint64
	sendMaxData    bool
	blockedAt      uint64     // DATA_BLOCKED sent at this limit
	from           net.Addr   // where the datagram being handled came from
	local          netip.Addr // and the local address it was sent to (server, pktinfo)
	fromLen        int        // and its size
	rxECN          byte       // and its ECN codepoint
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
	localCIDs map[string]cidRef // ours → path ID and sequence number
	cids      map[uint32]*cidSet
	// cidOrder is every cids entry in creation order (none is ever
	// removed): what each packet's fillControl walks, not the map, whose
	// iteration cost 4% of an upload's CPU.
	cidOrder   []*cidSet
	onNewCID   func([]byte)
	onRetireID func([]byte)
	batch      []byte // datagrams being built for one (GSO) write
	ownsConn   bool

	// readStop ends the reader of path 0's current socket after an
	// active migration (migrate.go); nil: path 0's own stopRead.
	readStop *atomic.Bool

	injectFrames []Frame       // fault injection: frames a test makes us send
	rxFrames     []Frame       // the frames of the packet being handled, reused
	rxStreams    []StreamFrame // its STREAM frames (rxFrames has pointers)
	// planFrames are the frame records of the packets of the datagram
	// being built, reused (sealPlan copies them into the packet's record).
	planFrames [numSpaces][]recovery.SentFrame

	version  uint32           // the connection's QUIC version (version2.go)
	vs       versionState     // compatible version negotiation (versionneg.go)
	early    earlyState       // 0-RTT (zerortt.go)
	tlsClock func() time.Time // a client's TLS clock (ticketClock)
}

func newConn(isClient bool, pconn net.PacketConn, remote net.Addr, conf Config, tlsConf *tls.Config) *Conn {
	c := &Conn{
		conf: conf, isClient: isClient, pconn: pconn,
		in: make(chan datagram, inChanLen(isClient, conf)), rx: newRxQueue(inQueueLen(conf)), wake: make(chan struct{}, 1),
		mss: conf.MaxDatagramSize, paths: map[uint32]*path{}, earlyStatus: map[uint32]PathStatusFrame{}, pathCIDReady: make(chan struct{}, 1), nextPathID: 1,
		streams: map[uint64]*Stream{}, acceptReady: make(chan struct{}, 1), openReady: make(chan struct{}, 1),
		localMaxBidi: conf.MaxIncomingStreams, localMaxData: conf.ConnectionReceiveWindow,
		uni:  uniStreams{localMax: conf.MaxIncomingUniStreams, acceptReady: make(chan struct{}, 1)},
		done: make(chan struct{}), handshakeCh: make(chan struct{}), ending: make(chan struct{}), closeSent: make(chan struct{}),
		sendScratch: make([]byte, 0, maxDatagramSize+64),
		idleTimeout: conf.MaxIdleTimeout,
		early:       earlyState{ready: make(chan struct{}, 1)},
		version:     Version1,
		vs:          versionState{orig: Version1},
	}
	p0 := c.newPath(0, pconn, remote)
	for i := range c.spaces {
		c.spaces[i] = newSpace()
		c.spaces[i].kind, c.spaces[i].path = i, p0
	}
	p0.space = c.spaces[spaceApp]
	p0.validated = true // the handshake validated it
	c.refreshSpaces()
	if !conf.DisableMultipath {
		c.localMaxPathID = conf.MaxPathID
	}
	if !isClient {
		c.nextLocalBidi = 1
	}
	tlsConf = tlsConf.Clone()
	tlsConf.MinVersion = tls.VersionTLS13 // QUIC is TLS 1.3 only (RFC 9001 §4.2)
	if isClient {
		tlsConf.Time = c.ticketClock(tlsConf.Time)
		c.tlsClock = tlsConf.Time
	}
	// Session events: 0-RTT's memory of parameters (zerortt.go).
	qc := &tls.QUICConfig{TLSConfig: tlsConf, EnableSessionEvents: true}
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
	p.InitialMaxStreamDataUni = c.conf.StreamReceiveWindow
	p.InitialMaxStreamsUni = c.conf.MaxIncomingUniStreams
	p.InitialSCID = c.scid
	if !c.conf.DisableMultipath {
		v := c.conf.MaxPathID
		p.InitialMaxPathID = &v
	}
	p.VersionInfo = c.localVersionInfo()
	if !c.isClient {
		p.OriginalDCID = c.origDCID
		p.RetrySCID = c.retrySCID
		t := c.conf.StatelessResetKey.token(c.scid) // a client sends none (RFC 9000 §18.2)
		p.StatelessResetToken = &t
	}
	return p
}

// initialDCID is the destination ID the Initial keys derive from: the
// client's first, or the one a Retry gave it.
func (c *Conn) initialDCID() []byte {
	if c.initDCID != nil {
		return c.initDCID
	}
	return c.origDCID
}

// start begins the TLS handshake; the client's first flight is queued.
func (c *Conn) start() error {
	if c.conf.Qlog != nil {
		if w := c.conf.Qlog(c.isClient, c.origDCID); w != nil {
			c.qlog = newQlog(w, c.isClient, c.origDCID, time.Now())
		}
	}
	if c.isClient {
		p := c.localParams()
		c.tls.SetTransportParameters(p.Append(nil))
	} // a server's wait for the client's: its version may change (versionneg.go)
	client, server := InitialKeysVersion(c.initialDCID(), c.version)
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
		case <-c.rx.ready:
			c.mu.Lock()
			now = time.Now()
			for i := 0; i < 65; i++ { // a burst, then send
				d, ok := c.rx.pop()
				if !ok {
					break
				}
				c.handleDatagram(d, now)
				if i == 64 {
					notify(c.rx.ready)
				}
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
	if c.qlog != nil {
		c.qlog.close(time.Now(), c.closeErr) // complete before Done says so
	}
	close(c.done)
	c.tls.Close()
	if c.onDone != nil {
		c.onDone() // O(our IDs) under the listener's lock (listener.go)
	}
	if c.ownsConn {
		c.pconn.Close()
	} else if c.isClient {
		c.pconn.SetReadDeadline(time.Now()) // stop our reader
	}
	for _, p := range c.paths {
		if p.reader {
			p.pconn.SetReadDeadline(time.Now())
		}
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
	d := c.p0().rtt.PTO()
	for _, p := range c.paths {
		if !p.closed && !p.abandoned && p.rtt.HasSample {
			d = max(d, p.rtt.PTO())
		}
	}
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
	if !c.handleDatagramPackets(d, now) && c.isStatelessReset(d.b) {
		c.terminate(ErrStatelessReset) // no more packets (RFC 9000 §10.3.1)
	}
}

// handleDatagramPackets processes a datagram's packets; false if none was.
func (c *Conn) handleDatagramPackets(d datagram, now time.Time) bool {
	b := d.b
	first, counted, any := true, false, false
	for len(b) > 0 {
		h, n, err := ParseHeader(b, connIDLen)
		if err != nil {
			return any // the rest of the datagram is unusable
		}
		pkt := b[:n]
		b = b[n:]
		if h.Type == PacketVersionNegotiation {
			if c.isClient && first && !c.peerSCIDSeen && string(h.DCID) == string(c.scid) {
				for _, v := range h.SupportedVersions {
					if v == c.version {
						return true // a forged or stale list: ignore (RFC 9000 §6.2)
					}
				}
				c.terminate(ErrVersionNegotiation)
			}
			return true
		}
		if h.Type == PacketRetry {
			if first {
				c.onRetry(h, pkt)
			}
			return true
		}
		if !c.ours(h.DCID) && !((h.Type == PacketInitial || h.Type == Packet0RTT) && !c.isClient && string(h.DCID) == string(c.initialDCID())) {
			if first || h.Type != Packet1RTT {
				continue
			}
			return any
		}
		first = false
		c.from, c.local, c.fromLen, c.rxECN = d.from, d.to, len(d.b), d.ecn
		if c.testECN != nil {
			c.rxECN = c.testECN(d.ecn)
		}
		if p := c.handlePacket(h, pkt, now, false); p != nil {
			any = true
			if !c.isClient && !counted {
				p.socketRecv.Add(uint64(len(d.b))) // a client's reader counts per socket
				p.amp.received(len(d.b))
				counted = true
			}
		}
		if c.closing || c.isDone() {
			return true
		}
	}
	return any
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

// handlePacket processes one packet and returns the path it arrived on, nil
// if it was dropped.
func (c *Conn) handlePacket(h Header, pkt []byte, now time.Time, replay bool) *path {
	si := spaceOf(h.Type)
	early := h.Type == Packet0RTT // in the application space (zerortt.go)
	if early && !c.isClient {
		si = spaceApp
	}
	if si < 0 {
		return nil
	}
	ks := c.spaces[si] // the keys; for 1-RTT path 0's space holds them
	if ks.discarded {
		return nil
	}
	var origOpen *Keys // a moved server's key for the client's first version
	if h.Type != Packet1RTT && h.Version != c.version {
		switch {
		case c.isClient && !early && c.followVersion(h, pkt):
		case !c.isClient && h.Version == c.vs.orig && (early || c.vs.origOpen != nil):
			origOpen = c.vs.origOpen // 0-RTT: its keys are the first version's
		default:
			return nil
		}
	}
	if early && c.early.open == nil {
		c.bufferEarly(pkt, replay)
		return nil
	}
	if ks.open == nil && !early {
		if len(ks.buffered) < maxBufferedPkts && !replay {
			ks.buffered = append(ks.buffered, append(append(make([]byte, 0, len(pkt)+1), pkt...), c.rxECN))
			if c.isClient && si == spaceHandshake {
				c.speedUp() // the server's Initial with its keys was lost
			}
		}
		return nil
	}
	// The path: a 1-RTT packet's destination ID names its path ID
	// (draft-ietf-quic-multipath-21 §"Path Identifier").
	sp, pid := ks, uint32(0)
	var p *path
	if si == spaceApp && !early {
		pid = c.localCIDs[string(h.DCID)].path
		p = c.paths[pid]
		if p != nil {
			if p.closed {
				return nil
			}
			sp = p.space
		} else if c.isClient || !c.multipath || pid > c.maxPathID() {
			return nil
		} else {
			sp = newSpace() // a new path's first packet: decrypt before keeping state
		}
	} else if early {
		p = c.p0()
		sp = p.space
	}
	keys := ks.open
	if early {
		keys = c.early.open
	} else if origOpen != nil {
		keys = origOpen
	}
	o, err := keys.UnprotectHeader(pkt, h.PNOffset, sp.largestRecv)
	if err != nil {
		return nil
	}
	keyUpdate, guessedOld := false, false
	var saved []byte
	if si == spaceApp && !early {
		keys, keyUpdate = c.openKeys(ks, pid, o.KeyPhase(), o.PN, now)
		if _, seen := c.kp.firstRecv[pid]; keys == c.prevOpen && keys != ks.open && !seen {
			guessedOld, saved = true, append([]byte(nil), pkt...) // a failed Open may clobber pkt
		}
	}
	opened, err := keys.Open(pkt, o, pid)
	if errors.Is(err, ErrDecryptionFailed) && guessedOld {
		// Not the previous phase: the peer's next update, begun on a
		// path that had not carried the current phase (keyupdate.go).
		copy(pkt, saved)
		keys, keyUpdate = c.nextReadKeys(ks), true
		opened, err = keys.Open(pkt, o, pid)
	}
	o = opened
	if errors.Is(err, ErrDecryptionFailed) {
		return nil
	}
	if err != nil {
		var te *TransportError
		if errors.As(err, &te) {
			c.closeTransport(te)
		}
		return nil
	}
	switch {
	case early:
		c.early.recv++
	case keyUpdate:
		if err := c.peerUpdated(ks, keys, pid, o.PN, now); err != nil {
			c.closeTransport(err)
			return nil
		}
	case si == spaceApp && keys == ks.open:
		c.receivedInPhase(pid, o.PN, now)
	case si == spaceApp:
		c.kp.prevKeysUsed++
	}
	if sp.recvd.contains(o.PN) || o.PN < sp.minTracked {
		return nil // duplicate, or too old to tell
	}
	// The slice goes back to c after the frames are handled; the early
	// returns (errors, closing) just drop it. No defer: with this
	// function's many returns it would not be open-coded.
	fs, ss := c.takeRxFrames()
	frames, ss, err := wire.AppendFramesStreams(fs, ss, o.Payload, h.Type, c.multipath)
	if err != nil {
		var te *TransportError
		if errors.As(err, &te) {
			c.closeTransport(te)
		} else {
			c.closeTransport(transportErr(FrameEncodingError, 0, "%v", err))
		}
		return nil
	}
	if c.qlog != nil {
		qsi := si
		if early {
			qsi = siZeroRTT
		}
		c.qlog.packet(now, "transport:packet_received", qsi, pid, o.PN, len(pkt), frames)
	}
	if si == spaceApp && p == nil {
		p = c.acceptPath(pid, sp)
	}
	if p == nil {
		p = c.p0()
	}
	if c.isClient && si == spaceInitial && !c.peerSCIDSeen {
		p.dcid = append([]byte{}, h.SCID...) // non-nil: quic-go clients use empty IDs
		c.peerSCIDSeen = true
	}
	if !c.isClient && si == spaceHandshake && !c.spaces[spaceInitial].discarded {
		c.addrValidated = true // §8.1: a Handshake packet proves the address
		c.discardSpace(spaceInitial)
	}
	c.lastRecv = now
	c.idleStart = now
	p.lastRecv = now
	p.potentiallyFailed = false
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
		if err := c.handleFrame(sp, f, now); err != nil {
			var te *TransportError
			if !errors.As(err, &te) {
				te = transportErr(InternalError, f.Type(), "%v", err)
			}
			c.closeTransport(te)
			return nil
		}
		switch f.(type) {
		case AckFrame, PathAckFrame, PaddingFrame, ConnectionCloseFrame:
		default:
			eliciting = true
		}
		if c.closing || c.isDone() {
			return nil
		}
	}
	c.putRxFrames(frames, ss)
	if sp.discarded {
		return p
	}
	if si == spaceApp && !early && !replay && !probing && newest {
		c.onPeerAddress(p, now)
	}
	sp.recvd.add(o.PN, o.PN)
	sp.ecnRecv[c.rxECN&ecnMask]++
	if len(sp.recvd) > 4*maxAckRanges {
		sp.recvd = append(sp.recvd[:0], sp.recvd[len(sp.recvd)-2*maxAckRanges:]...)
		sp.minTracked = sp.recvd[0].lo
	}
	outOfOrder := reorderedOrGap(sp, int64(o.PN))
	if int64(o.PN) > sp.largestRecv {
		sp.largestRecv = int64(o.PN)
		sp.largestRecvTime = now
	}
	if eliciting {
		sp.elicitingUnacked++
		delay := localMaxAckDelay
		// A CE mark is acknowledged at once, so the sender reacts within
		// the round trip (RFC 9000 §13.2.1).
		if si != spaceApp || sp.elicitingUnacked >= ackElicitingMax || outOfOrder || c.rxECN&ecnMask == ecnCE {
			delay = 0
		}
		if at := now.Add(delay); sp.ackAt.IsZero() || at.Before(sp.ackAt) {
			sp.ackAt = at
		}
	}
	return p
}

// takeRxFrames lends handlePacket the connection's frame slice (nil while
// lent, so a nested use could not share it); putRxFrames returns it with
// its references to the packet cleared.
func (c *Conn) takeRxFrames() ([]Frame, []StreamFrame) {
	f, s := c.rxFrames[:0], c.rxStreams[:0]
	if s == nil {
		s = make([]StreamFrame, 0, 4) // non-nil: STREAM frames go here
	}
	c.rxFrames, c.rxStreams = nil, nil
	return f, s
}

func (c *Conn) putRxFrames(f []Frame, s []StreamFrame) {
	clear(f)
	clear(s)
	c.rxFrames, c.rxStreams = f[:0], s[:0]
}

// reorderedOrGap says whether packet pn, just received in sp (before
// sp.largestRecv takes it), is acknowledged at once (RFC 9000 §13.2.1): it arrived out of order or
// opened a new gap. Not every packet after a loss: the gap a lost packet
// left stays in sp.recvd, and taking any gap there acknowledged each
// packet alone for the rest of a connection that lost one (twice the
// ACK frames, and every frame one packet, so growth per ACK frame and
// per byte could not be told apart in the lab).
func reorderedOrGap(sp *pnSpace, pn int64) bool {
	return pn < sp.largestRecv || pn > sp.largestRecv+1
}

// acceptPath is the server's side of a new path: the first packet on a path
// ID's connection ID made it here from c.from. The path is validated with
// PATH_CHALLENGE before it carries data (draft §"Path Initiation").
func (c *Conn) acceptPath(pid uint32, sp *pnSpace) *path {
	p := c.newPath(pid, c.pconn, c.from)
	sp.kind, sp.path = spaceApp, p
	p.space = sp
	if cs := c.cidSet(pid); len(cs.peer) > 0 {
		p.dcid, p.dcidSeq = cs.peer[0].cid, cs.peer[0].seq
	}
	var d [8]byte
	copy(d[:], randomID(8))
	p.challenge = &d
	p.amp.start()
	c.qlogPath(p.id, "new")
	if f, ok := c.earlyStatus[pid]; ok {
		c.applyStatus(p, f)
		delete(c.earlyStatus, pid)
	}
	c.refreshSpaces()
	return p
}

func (c *Conn) handleFrame(sp *pnSpace, f Frame, now time.Time) error {
	switch f := f.(type) {
	case PaddingFrame, PingFrame:
	case AckFrame:
		if sp.kind == spaceApp {
			sp = c.spaces[spaceApp] // with multipath, ACK is path 0's (draft §"PATH_ACK")
			if sp.path.closed {
				return nil
			}
		}
		return c.onAck(sp, f, now)
	case CryptoFrame:
		if sp.kind == spaceApp {
			sp = c.spaces[spaceApp] // one CRYPTO stream for every path
		}
		if !c.isClient && sp.kind == spaceInitial && f.Offset+uint64(len(f.Data)) <= sp.cryptoIn.contiguous() {
			c.speedUp() // the client sent its Initial again: ours was lost
		}
		if f.Offset+uint64(len(f.Data)) > sp.cryptoIn.contiguous()+64<<10 {
			return transportErr(CryptoBufferExceeded, FrameCrypto, "crypto data %d bytes ahead", f.Offset-sp.cryptoIn.contiguous())
		}
		sp.cryptoIn.push(f.Offset, f.Data)
		if n := sp.cryptoIn.readable(); n > 0 {
			data := make([]byte, n)
			sp.cryptoIn.read(data)
			if err := c.tls.HandleData(spaceLevels[sp.kind], data); err != nil {
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
		if p := sp.path; len(p.responses) < 4 {
			p.responses = append(p.responses, pathResponse{data: f.Data, to: c.from, from: c.local, limit: 3 * c.fromLen})
		}
	case NewConnectionIDFrame:
		return c.handleNewCID(0, f.Seq, f.RetirePriorTo, f.ConnID, f.ResetToken, FrameNewConnectionID)
	case RetireConnectionIDFrame:
		return c.handleRetireCID(0, f.Seq, FrameRetireConnectionID)
	case PathResponseFrame:
		c.onPathResponse(f)
	case PathAckFrame, PathAbandonFrame, PathStatusFrame, PathNewConnectionIDFrame, PathRetireConnectionIDFrame,
		MaxPathIDFrame, PathsBlockedFrame, PathCIDsBlockedFrame:
		return c.handleMPFrame(f, now)
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
	wire.SetCause(te, err)
	return te
}

func (c *Conn) handleTLSEvents() error {
	for {
		ev := c.tls.NextEvent()
		switch ev.Kind {
		case tls.QUICNoEvent:
			return nil
		case tls.QUICSetReadSecret, tls.QUICSetWriteSecret:
			if ev.Level == tls.QUICEncryptionLevelEarly {
				if err := c.onEarlySecret(ev); err != nil {
					return err
				}
				continue
			}
			si := levelSpace(ev.Level)
			if si < 0 {
				continue
			}
			k, err := newKeysVersion(ev.Suite, append([]byte(nil), ev.Data...), c.version)
			if err != nil {
				return transportErr(InternalError, 0, "%v", err)
			}
			sp := c.spaces[si]
			if ev.Kind == tls.QUICSetWriteSecret {
				sp.seal = k
				if si == spaceApp {
					c.early.seal = nil // 1-RTT from now on (RFC 9001 §4.9.3)
				}
				if c.isClient && si == spaceHandshake && sp.LastEliciting.IsZero() {
					// The anti-deadlock PTO (RFC 9002 §6.2.2.1) runs from
					// here: a client whose Initial was acknowledged and
					// who sent only ACKs since has nothing in flight, and
					// a server at its amplification limit waits for it.
					sp.LastEliciting = time.Now()
				}
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
			if err := c.checkEarlyLimits(); err != nil {
				return err
			}
			c.handshakeComplete = true
			if !c.isClient {
				// A session ticket (NewSessionTicket in 1-RTT CRYPTO),
				// so a client with a tls.Config.ClientSessionCache
				// resumes next time (RFC 9001 §4.6), with 0-RTT when
				// allowed (zerortt.go). 0-RTT packets after this wait
				// no more: the client retransmits them in 1-RTT.
				_ = c.tls.SendSessionTicket(c.sessionTicket())
				c.early.open, c.early.buffered = nil, nil
				c.sendHandshakeDone = true
				c.confirm()
				c.announce()
			}
			close(c.handshakeCh)
		case tls.QUICResumeSession:
			c.onResumeSession(ev.SessionState)
		case tls.QUICStoreSession:
			if err := c.onStoreSession(ev.SessionState); err != nil {
				return err
			}
		case tls.QUICRejectedEarlyData:
			c.onEarlyRejected()
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
	ecn := c.rxECN
	for _, p := range pkts {
		c.rxECN, p = p[len(p)-1], p[:len(p)-1]
		h, n, err := ParseHeader(p, connIDLen)
		if err == nil {
			c.handlePacket(h, p[:n], now, true)
		}
	}
	c.rxECN = ecn
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
		if p.InitialSCID == nil || string(p.InitialSCID) != string(c.p0().dcid) {
			return transportErr(TransportParameterError, 0, "initial_source_connection_id does not match")
		}
		// §7.3: retry_source_connection_id exactly when a Retry was followed.
		if c.retrySCID != nil && string(p.RetrySCID) != string(c.retrySCID) || c.retrySCID == nil && p.RetrySCID != nil {
			return transportErr(TransportParameterError, 0, "retry_source_connection_id does not match")
		}
		if err := c.clientCheckVersion(p.VersionInfo); err != nil {
			return err
		}
	} else if p.InitialSCID == nil || string(p.InitialSCID) != string(c.p0().dcid) {
		return transportErr(TransportParameterError, 0, "initial_source_connection_id does not match")
	} else if err := c.serverNegotiate(p.VersionInfo); err != nil {
		return err
	}
	// Multipath only when both sides offer it (draft-ietf-quic-multipath-21
	// §"Handshake Negotiation and Transport Parameter"). An endpoint
	// offering it must use non-zero-length connection IDs both ways, and
	// the parameter arriving in a packet with a zero-length one is a
	// PROTOCOL_VIOLATION. Ours are never empty; the peer's source ID in
	// the packets that carry its parameters is its initial_source_connection_id.
	if p.InitialMaxPathID != nil && !c.conf.DisableMultipath {
		if len(p.InitialSCID) == 0 || len(c.scid) == 0 {
			return transportErr(ProtocolViolation, 0, "initial_max_path_id received in a packet with a zero-length connection ID")
		}
		c.multipath = true
		c.peerMaxPathID = *p.InitialMaxPathID
	}
	c.peerParams, c.haveParams = p, true
	c.peerMaxData = p.InitialMaxData
	c.peerMaxBidi = p.InitialMaxStreamsBidi
	c.uni.peerMax = p.InitialMaxStreamsUni
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
	first := peerCID{seq: 0, cid: c.p0().dcid}
	if c.peerParams.StatelessResetToken != nil {
		first.token, first.hasToken = *c.peerParams.StatelessResetToken, true
	}
	cs := c.cidSet(0)
	cs.peer = append([]peerCID{first}, cs.peer...)
	c.issueCIDs()
	// An AddPath may wait with the new path's connection IDs already here
	// (a peer may send them before HANDSHAKE_DONE).
	notify(c.pathCIDReady)
}

func (c *Conn) discardSpace(si int) {
	sp := c.spaces[si]
	if sp.discarded {
		return
	}
	for _, p := range sp.Sent {
		if p.InFlight {
			sp.path.cc.Discard(p.Size)
		}
	}
	// The ECN counts stay: the path's records count every space.
	*sp = pnSpace{discarded: true, largestRecv: -1, kind: sp.kind, path: sp.path, ecnRecv: sp.ecnRecv, ectSent: sp.ectSent, peerECN: sp.peerECN}
	sp.History.Reset()
	sp.path.ptoCount = 0
}

// --- acknowledgments and loss (RFC 9002 §6, Appendix A) ---

func (c *Conn) onAck(sp *pnSpace, f AckFrame, now time.Time) error {
	path := sp.path
	largest := f.Ranges[0].Largest
	if largest >= sp.nextPN {
		return transportErr(ProtocolViolation, FrameAck, "ACK of packet %d never sent", largest)
	}
	if sp.kind == spaceApp {
		c.ackedInPhase(path.id, largest)
	}
	raised := int64(largest) > sp.LargestAcked
	newly := sp.OnAck(f.Ranges, c.ackedScratch[:0])
	if len(newly) == 0 {
		if raised {
			c.onAckECN(sp, f.ECN, 0, time.Time{}, now)
		}
		return nil
	}
	last := newly[len(newly)-1]
	eliciting, newlyECT := false, 0
	for _, p := range newly {
		eliciting = eliciting || p.AckEliciting
		if p.ECT {
			newlyECT++
		}
	}
	if raised {
		c.onAckECN(sp, f.ECN, newlyECT, last.Time, now)
	}
	if last.PN == largest && eliciting {
		var delay time.Duration
		if sp.kind == spaceApp {
			exp := c.peerParams.AckDelayExponent
			if !c.haveParams {
				exp = DefaultAckDelayExponent
			}
			delay = time.Duration(f.AckDelay<<exp) * time.Microsecond
		}
		if !path.rtt.HasSample {
			path.firstSample = now
		}
		path.rtt.Update(now.Sub(last.Time), delay, c.confirmed, c.peerParams.MaxAckDelay)
		if c.qlog != nil {
			c.qlog.metrics(now, path)
		}
		if sp.kind == spaceApp {
			path.cc.OnRTTSample(path.rtt.Latest, path.rtt.Smoothed, largest, sp.nextPN)
		}
	}
	path.cc.OnAckFrame()
	for _, p := range newly {
		c.onPacketAcked(sp, p)
	}
	clear(newly) // the scratch keeps no packets alive
	c.ackedScratch = newly[:0]
	c.detectLost(sp, now)
	path.ptoCount = 0
	path.potentiallyFailed = false
	return nil
}

func (c *Conn) onPacketAcked(sp *pnSpace, p *recovery.SentPacket) {
	if p.InFlight {
		sp.path.cc.OnAcked(p.Size, p.Time)
	}
	if p.MTUProbe {
		c.mtuProbeAcked(sp.path, p)
	}
	for _, f := range p.Frames {
		switch f.Kind {
		case sfCrypto:
			sp.crypto.onAck(f.Off, f.N, false)
		case sfStream:
			if s := c.streams[f.ID]; s != nil {
				s.send.onAck(f.Off, f.N, f.Fin)
				c.maybeDone(s)
			}
		case sfResetStream:
			if s := c.streams[f.ID]; s != nil {
				s.resetAcked = true
				c.maybeDone(s)
			}
		case sfPathAbandon:
			if p := c.paths[f.PathID]; p != nil {
				p.abandonAcked = true
			}
		}
	}
}

// detectLost declares the space's lost packets and, when they span the
// persistent congestion duration with nothing acknowledged between
// (RFC 9002 §7.6), collapses the path's window to the minimum.
func (c *Conn) detectLost(sp *pnSpace, now time.Time) {
	lost := c.lostScratch[:0]
	sp.DetectLost(now, sp.path.rtt.LossDelay(), func(p *recovery.SentPacket) {
		if !p.MTUProbe && p.InFlight && p.Time.After(sp.path.cc.AddrChanged) {
			lost = append(lost, p)
		}
		c.onPacketLost(sp, p, now)
	})
	p := sp.path
	var mad time.Duration
	if sp.kind == spaceApp {
		mad = c.peerParams.MaxAckDelay
	}
	if len(lost) > 1 && recovery.PersistentCongestion(lost, p.firstSample, p.rtt.PersistentCongestionDuration(mad)) {
		p.cc.OnPersistentCongestion()
		p.persistentCongestions++
	}
	clear(lost) // the scratch keeps no packets alive
	c.lostScratch = lost[:0]
}

func (c *Conn) onPacketLost(sp *pnSpace, p *recovery.SentPacket, now time.Time) {
	if c.qlog != nil {
		c.qlog.lost(now, sp.kind, sp.path.id, p.PN)
	}
	if p.MTUProbe { // too large, or dropped: no congestion signal (RFC 9000 §14.4)
		sp.path.cc.Discard(p.Size)
		if m := &sp.path.mtu; m.probe != 0 && m.pn == p.PN {
			m.lost(p.Size, now)
		}
		return
	}
	c.packetsLost++
	sp.path.packetsLost++
	if p.ECT {
		old := sp.path.ecn.state
		sp.path.ecn.onLost()
		c.ecnChanged(sp.path, old, now)
	}
	if p.InFlight {
		sp.path.cc.OnLost(p.Size, p.Time, now)
	}
	c.requeue(sp, p)
}

// requeue puts what a lost (or probed, or reinjected) packet carried back
// to be sent, on whichever path the scheduler picks.
func (c *Conn) requeue(sp *pnSpace, p *recovery.SentPacket) {
	for _, f := range p.Frames {
		switch f.Kind {
		case sfCrypto:
			sp.crypto.onLost(f.Off, f.N, false)
		case sfStream:
			if s := c.streams[f.ID]; s != nil && s.resetCode == nil {
				s.send.onLost(f.Off, f.N, f.Fin)
				c.activate(s)
			}
		case sfMaxData:
			c.sendMaxData = true
		case sfMaxStreams:
			c.sendMaxStreams = true
		case sfMaxStreamsUni:
			c.uni.sendMax = true
		case sfHandshakeDone:
			c.sendHandshakeDone = true
		case sfNewCID:
			if cs := c.cidSet(f.PathID); cs.issued[f.ID].ConnID != nil {
				cs.queue = append(cs.queue, f.ID)
			}
		case sfRetireCID:
			cs := c.cidSet(f.PathID)
			cs.retireQueue = append(cs.retireQueue, f.ID)
		case sfPathChallenge:
			if q := c.paths[f.PathID]; q != nil {
				q.challengeSent = false // send it again while unanswered
			}
		case sfPathAbandon:
			if q := c.paths[f.PathID]; q != nil && !q.abandonAcked {
				q.sendAbandon = true
			}
		case sfMaxPathID:
			c.sendMaxPathID = true
		case sfPathStatus:
			if q := c.paths[f.PathID]; q != nil && q.statusSeq == f.ID {
				q.sendStatus = true
			}
		case sfMaxStreamData:
			if s := c.streams[f.ID]; s != nil {
				s.sendMaxStreamData = true
				c.activate(s)
			}
		case sfResetStream:
			if s := c.streams[f.ID]; s != nil {
				s.resetPending = true
				c.activate(s)
			}
		case sfStopSending:
			if s := c.streams[f.ID]; s != nil {
				s.stopPending = true
				c.activate(s)
			}
		}
	}
}

// lossDetectionTimer is RFC 9002 A.8's SetLossDetectionTimer, over every
// space of every path (each path's own RTT and PTO backoff).
func (c *Conn) lossDetectionTimer() (time.Time, *pnSpace, bool) {
	var earliest time.Time
	var esp *pnSpace
	for _, sp := range c.spaceList {
		if !sp.LossTime.IsZero() && (earliest.IsZero() || sp.LossTime.Before(earliest)) {
			earliest, esp = sp.LossTime, sp
		}
	}
	if esp != nil {
		return earliest, esp, false
	}
	if c.isDone() || c.closing {
		return time.Time{}, nil, false
	}
	// PTO. A client not yet sure the server validated its address arms it
	// even with nothing in flight (§6.2.2.1).
	clientDeadlock := c.isClient && !c.confirmed
	var pto time.Time
	var psp *pnSpace
	for _, sp := range c.spaceList {
		if sp.discarded || c.spaces[sp.kind].seal == nil {
			continue
		}
		if !sp.AckElicitingInFlight() && !(clientDeadlock && sp.kind < spaceApp && !sp.LastEliciting.IsZero()) {
			continue
		}
		var maxAckDelay time.Duration
		if sp.kind == spaceApp {
			if !c.confirmed {
				continue // §6.2.1: no application-data PTO before confirmation
			}
			maxAckDelay = c.peerParams.MaxAckDelay
		}
		t := sp.PTOTime(&sp.path.rtt, sp.path.ptoCount, maxAckDelay)
		if pto.IsZero() || t.Before(pto) {
			pto, psp = t, sp
		}
	}
	return pto, psp, true
}

// maxSpeedUps bounds the early resends of a connection's Initial CRYPTO
// data (§6.2.3 asks for a limited number).
const maxSpeedUps = 2

// speedUp resends this side's unacknowledged Initial CRYPTO data now,
// not at the PTO (RFC 9002 §6.2.3), when the peer's packets say it was
// lost: a server receives the client's CRYPTO data again, a client
// receives Handshake packets before it has their keys. Under heavy loss
// the PTO has backed off to seconds by then (1, 2, 4, 8 s...), and the
// handshake timeout is near. Sending stays within the amplification
// limit (buildDatagram).
func (c *Conn) speedUp() {
	sp := c.spaces[spaceInitial]
	if c.speedUps >= maxSpeedUps || sp.discarded || !sp.AckElicitingInFlight() {
		return
	}
	c.speedUps++
	for _, p := range sp.Sent {
		if p.AckEliciting {
			c.requeue(sp, p)
		}
	}
}

func (c *Conn) onLossTimer(now time.Time) {
	t, sp, isPTO := c.lossDetectionTimer()
	if t.IsZero() || t.After(now) {
		return
	}
	if !isPTO {
		c.detectLost(sp, now)
		return
	}
	path := sp.path
	path.ptoCount++
	path.ptos++
	c.ptos++
	if sp.kind == spaceApp {
		c.onPathPTO(path, now)
		if path.ptoCount >= pmtuBlackHolePTOs {
			c.mtuBlackHole(path, now)
		}
	}
	// Probe: send the oldest unacknowledged data again (§6.2.4), or a PING.
	n := 0
	for _, p := range sp.Sent {
		if p.AckEliciting && n < 2 {
			c.requeue(sp, p)
			n++
		}
	}
	if sp.kind == spaceInitial && c.isClient && c.spaces[spaceHandshake].seal != nil && !c.spaces[spaceHandshake].discarded {
		sp = c.spaces[spaceHandshake]
	}
	sp.probe = 2
	if n == 0 && sp.LastEliciting.IsZero() {
		sp.LastEliciting = now
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
	c.checkPathFailures(now)
	c.onLossTimer(now)
	c.closeAbandoned(now)
	if ka := c.conf.KeepAlivePeriod; ka > 0 && c.confirmed && now.Sub(c.lastActivity()) >= ka {
		c.queuePing(now) // RFC 9000 §10.1.2
	}
}

// queuePing has the scheduled path send a PING (an ack-eliciting packet)
// at its next send; false when no path can send.
func (c *Conn) queuePing(now time.Time) bool {
	p := c.schedule(now)
	if p == nil {
		return false
	}
	p.space.probe = max(p.space.probe, 1)
	return true
}

func (c *Conn) lastActivity() time.Time {
	t := c.lastRecv
	for _, p := range c.paths {
		if l := p.space.LastEliciting; l.After(t) {
			t = l
		}
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
	earliest(c.failTimer())
	for _, sp := range c.spaceList {
		if c.spaces[sp.kind].seal != nil {
			earliest(sp.ackAt)
		}
	}
	now := time.Now()
	for _, p := range c.paths {
		if p.abandoned && !p.closed {
			earliest(p.abandonedAt.Add(3 * c.ptoDuration()))
		}
		if m := &p.mtu; m.started && !m.done() && m.probe == 0 && m.nextAt.After(now) {
			earliest(m.nextAt) // the next PMTU probe, on an idle connection too
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
