package mpquic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/mptester/mptester/mpquic/internal/congestion"
	"github.com/mptester/mptester/mpquic/internal/recovery"
)

// Multipath (draft-ietf-quic-multipath-21). A connection has one path per
// path ID in use, path 0 being the handshake's. Each path has its own
// connection IDs in both directions (path.go's cidSet, PATH_NEW_CONNECTION_ID),
// its own 1-RTT packet number space with the path ID in the AEAD nonce, its
// own ACK state (PATH_ACK), and its own RTT estimator, loss detection and
// congestion controller (internal/recovery and internal/congestion; coupled
// only with LIA, draft §"Congestion Control"): the RFC 9002 code runs per
// path. The 1-RTT keys are shared
// and live in path 0's space. Without initial_max_path_id from both sides
// the connection is plain QUIC v1 on path 0.

// PathStatus is a path's sending preference (draft §"Path Status Management").
type PathStatus int

const (
	PathAvailable PathStatus = iota
	PathBackup
)

func (s PathStatus) String() string {
	if s == PathBackup {
		return "backup"
	}
	return "available"
}

type path struct {
	id       uint32
	pconn    net.PacketConn
	remote   net.Addr
	dcid     []byte
	dcidSeq  uint64
	space    *pnSpace // the 1-RTT packet number space
	rtt      recovery.RTTStats
	cc       *congestion.Sender
	ptoCount int
	// firstSample is when the path's first RTT sample was taken: only
	// packets sent after it make persistent congestion (RFC 9002 §7.6.2).
	firstSample           time.Time
	persistentCongestions uint64

	validated     bool
	amp           ampLimit // server: toward an unvalidated address (amplification.go)
	challenge     *[8]byte // PATH_CHALLENGE data awaiting its response
	challengeSent bool
	responses     []pathResponse // PATH_RESPONSEs owed (path.go)

	localBackup   bool // we asked the peer to use it as backup
	peerBackup    bool // the peer asked us to
	statusSeq     uint64
	sendStatus    bool
	peerStatusSeq uint64
	peerStatusSet bool

	abandoned         bool
	abandonCode       uint64
	sendAbandon       bool
	abandonAcked      bool
	abandonedAt       time.Time
	closed            bool // state discarded after abandonment
	potentiallyFailed bool

	lastRecv    time.Time
	failArmed   bool // a PTO fired before the path was quiet long enough
	packetsSent uint64
	packetsLost uint64
	ptos        uint64
	socketSent  uint64
	socketRecv  atomic.Uint64

	gso         bool
	df          bool    // the socket sets don't-fragment: the path may probe its MTU
	ecn         pathECN // ecn.go
	mtu         pmtud   // pmtud.go
	oob         []byte
	local       netip.Addr    // server: the address the peer sends to, our source (pktinfo)
	reader      bool          // a readLoop of ours reads pconn (client paths)
	stopRead    atomic.Bool   // the path is discarded: its readLoop ends
	validatedCh chan struct{} // closed when validated
	doneCh      chan struct{} // closed when abandoned
}

// write sends one datagram (or GSO train) on p, from p.local when known,
// with the ECN codepoint of the packets sendOnPath is sending (ecn.go).
func (p *path) write(b []byte) error {
	if p.local.IsValid() {
		return writeFrom(p.pconn, b, p.remote, p.local, p.ecn.out, &p.oob)
	}
	return writeECN(p.pconn, b, p.remote, p.ecn.out, &p.oob)
}

func (c *Conn) newPath(id uint32, pconn net.PacketConn, remote net.Addr) *path {
	p := &path{id: id, pconn: pconn, remote: remote, cc: c.newController(), gso: gsoCapable(pconn), df: setDontFragment(pconn),
		validatedCh: make(chan struct{}), doneCh: make(chan struct{})}
	p.space = newSpace()
	p.space.kind, p.space.path = spaceApp, p
	p.ecn.capable = enableECN(pconn) && !c.conf.DisableECN // reads the field even when not marking
	p.lastRecv = time.Now()
	p.local = c.local
	c.paths[id] = p
	c.pathOrder = append(c.pathOrder, id)
	slices.Sort(c.pathOrder)
	c.refreshSpaces()
	return p
}

// refreshSpaces rebuilds the list of live packet number spaces the timers
// and loss detection walk: Initial, Handshake, then each open path's.
func (c *Conn) refreshSpaces() {
	c.spaceList = append(c.spaceList[:0], c.spaces[spaceInitial], c.spaces[spaceHandshake])
	for _, id := range c.pathIDs() {
		if p := c.paths[id]; !p.closed {
			c.spaceList = append(c.spaceList, p.space)
		}
	}
}

// pathIDs are the paths' IDs in ascending order (not to be modified).
func (c *Conn) pathIDs() []uint32 { return c.pathOrder }

func (c *Conn) p0() *path { return c.paths[0] }

// usable: a path the scheduler may put data on.
func (p *path) usable() bool {
	return p.validated && !p.abandoned && !p.closed && p.dcid != nil
}

func (p *path) backup() bool { return p.localBackup || p.peerBackup }

// maxPathID is the largest path ID both sides allow (draft §"initial_max_path_id").
func (c *Conn) maxPathID() uint32 {
	return min(c.localMaxPathID, c.peerMaxPathID)
}

// schedule picks the path for the next packet of new data (the scheduler of
// the issue, after mp-quic in study 000): the lowest smoothed RTT among
// validated, available, not potentially failed paths with congestion
// window room. Backup paths are used only when no available path is open
// (an available path with a full window means waiting, so a backup carries
// nothing while the primary works), potentially failed ones only when
// nothing else is. nil when data must wait (pacing sets c.nextPaceAt).
func (c *Conn) schedule(now time.Time) *path {
	if !c.multipath {
		return c.p0()
	}
	for tier := 0; tier < 3; tier++ {
		var best *path
		open := false
		for _, id := range c.pathIDs() {
			p := c.paths[id]
			if !p.usable() || c.tierOf(p) != tier {
				continue
			}
			open = true
			if !p.cc.CanSend(c.pathMSS(p)) {
				continue
			}
			if t := p.cc.Pace(now, c.pathMSS(p), p.rtt.Smoothed, p.rtt.HasSample); !t.IsZero() {
				if c.nextPaceAt.IsZero() || t.Before(c.nextPaceAt) {
					c.nextPaceAt = t
				}
				continue
			}
			if best == nil || p.rtt.SmoothedOrInitial() < best.rtt.SmoothedOrInitial() {
				best = p
			}
		}
		if open {
			return best
		}
	}
	return nil
}

func (c *Conn) tierOf(p *path) int {
	switch {
	case p.potentiallyFailed:
		return 2
	case p.backup():
		return 1
	}
	return 0
}

// onPathPTO marks a path potentially failed when its probe timeout fires
// and nothing arrived on it for a whole PTO period, and reinjects its
// in-flight stream data and signals so another path carries them (the
// issue's reinjection rule). Its packets stay in flight on it: if they
// are acknowledged after all, the path is back (onAck).
func (c *Conn) onPathPTO(p *path, now time.Time) {
	if !c.multipath || p.potentiallyFailed || c.livePaths() < 2 {
		return
	}
	if now.Sub(p.lastRecv) < c.failureQuiet(p) {
		// Not yet: decide when the quiet time is up (checkPathFailures)
		// rather than at the next PTO, which backs off and which new data
		// sent on the path keeps pushing out.
		p.failArmed = true
		return
	}
	c.markPotentiallyFailed(p)
}

// failureQuiet is how long nothing must be received on p, after a PTO, for
// it to count as potentially failed: a PTO period, at least
// Config.MinFailureTimeout.
func (c *Conn) failureQuiet(p *path) time.Duration {
	return max(p.rtt.PTO()+c.peerParams.MaxAckDelay, c.conf.MinFailureTimeout)
}

func (c *Conn) markPotentiallyFailed(p *path) {
	p.failArmed = false
	p.potentiallyFailed = true
	for _, sp := range p.space.Sent {
		c.requeue(p.space, sp)
	}
}

// checkPathFailures marks the paths whose PTO fired and that stayed quiet
// for failureQuiet since; an acknowledgement (ptoCount back to 0) disarms.
func (c *Conn) checkPathFailures(now time.Time) {
	for _, p := range c.paths {
		if !p.failArmed {
			continue
		}
		switch {
		case p.potentiallyFailed || p.ptoCount == 0 || p.abandoned || p.closed || c.livePaths() < 2:
			p.failArmed = false
		case now.Sub(p.lastRecv) >= c.failureQuiet(p):
			c.markPotentiallyFailed(p)
		}
	}
}

// failTimer is the earliest time checkPathFailures may mark a path.
func (c *Conn) failTimer() time.Time {
	var t time.Time
	for _, p := range c.paths {
		if p.failArmed {
			if at := p.lastRecv.Add(c.failureQuiet(p)); t.IsZero() || at.Before(t) {
				t = at
			}
		}
	}
	return t
}

func (c *Conn) livePaths() int {
	n := 0
	for _, p := range c.paths {
		if !p.abandoned && !p.closed {
			n++
		}
	}
	return n
}

// --- receiving multipath frames ---

func (c *Conn) mpFrameErr(ft FrameType, id uint64) error {
	if id > uint64(c.localMaxPathID) {
		// draft §"New Frames": a path ID above our limit.
		return transportErr(ProtocolViolation, ft, "path ID %d above our maximum %d", id, c.localMaxPathID)
	}
	return nil
}

func (c *Conn) handleMPFrame(f Frame, now time.Time) error {
	switch f := f.(type) {
	case PathAckFrame:
		if err := c.mpFrameErr(FramePathAck, f.PathID); err != nil {
			return err
		}
		p := c.paths[uint32(f.PathID)]
		if p == nil {
			return transportErr(ProtocolViolation, FramePathAck, "PATH_ACK for path %d never used", f.PathID)
		}
		if p.closed {
			return nil
		}
		return c.onAck(p.space, f.Ack, now)
	case PathAbandonFrame:
		if err := c.mpFrameErr(FramePathAbandon, f.PathID); err != nil {
			return err
		}
		if p := c.paths[uint32(f.PathID)]; p != nil && !p.abandoned {
			c.abandonPath(p, f.ErrorCode, now)
		}
	case PathStatusFrame:
		if err := c.mpFrameErr(f.Type(), f.PathID); err != nil {
			return err
		}
		p := c.paths[uint32(f.PathID)]
		if p == nil {
			// The status may overtake the path's first packet: kept for it.
			if old, ok := c.earlyStatus[uint32(f.PathID)]; !ok || f.Seq > old.Seq {
				c.earlyStatus[uint32(f.PathID)] = f
			}
			return nil
		}
		c.applyStatus(p, f)
	case PathNewConnectionIDFrame:
		if err := c.mpFrameErr(FramePathNewConnectionID, f.PathID); err != nil {
			return err
		}
		err := c.handleNewCID(uint32(f.PathID), f.Seq, f.RetirePriorTo, f.ConnID, f.ResetToken, FramePathNewConnectionID)
		notify(c.pathCIDReady)
		return err
	case PathRetireConnectionIDFrame:
		if err := c.mpFrameErr(FramePathRetireConnectionID, f.PathID); err != nil {
			return err
		}
		return c.handleRetireCID(uint32(f.PathID), f.Seq, FramePathRetireConnectionID)
	case MaxPathIDFrame:
		if f.MaxPathID > uint64(c.peerMaxPathID) {
			c.peerMaxPathID = uint32(f.MaxPathID)
			c.issueCIDs()
		}
	case PathsBlockedFrame:
		// We raise MAX_PATH_ID as paths are discarded; nothing to add.
	case PathCIDsBlockedFrame:
		return c.onPathCIDsBlocked(f)
	}
	return nil
}

func (c *Conn) applyStatus(p *path, f PathStatusFrame) {
	if !p.peerStatusSet || f.Seq > p.peerStatusSeq {
		p.peerStatusSet, p.peerStatusSeq, p.peerBackup = true, f.Seq, f.Backup
		if f.Backup {
			c.qlogPath(p.id, "backup")
		} else {
			c.qlogPath(p.id, "available")
		}
	}
}

// abandonPath stops using p (either side's PATH_ABANDON): its in-flight
// stream data is reinjected elsewhere, a PATH_ABANDON goes to the peer if
// we have not sent one, and after 3 PTOs its state is discarded and its
// connection IDs retired (draft §"Path Close").
func (c *Conn) abandonPath(p *path, code uint64, now time.Time) {
	if p.abandoned {
		return
	}
	p.abandoned, p.abandonCode, p.sendAbandon, p.abandonedAt = true, code, true, now
	c.qlogPath(p.id, "abandoned")
	for _, sp := range p.space.Sent {
		c.requeue(p.space, sp)
		if sp.InFlight {
			p.cc.Discard(sp.Size)
		}
	}
	p.space.Sent = nil
	p.space.ackAt = time.Time{}
	if p.challenge != nil {
		p.challenge = nil
	}
	close(p.doneCh)
	notify(c.pathCIDReady)
	if c.livePaths() == 0 {
		c.closeTransport(transportErr(NoViablePath, FramePathAbandon, "every path abandoned"))
	}
}

// closeAbandoned discards abandoned paths' state once 3 PTOs passed.
func (c *Conn) closeAbandoned(now time.Time) {
	for _, p := range c.paths {
		if !p.abandoned || p.closed || now.Sub(p.abandonedAt) < 3*c.ptoDuration() {
			continue
		}
		p.closed = true
		cs := c.cidSet(p.id)
		for _, pc := range cs.peer {
			cs.retireQueue = append(cs.retireQueue, pc.seq)
		}
		cs.peer = nil
		p.dcid = nil
		for cid, r := range c.localCIDs {
			if r.path == p.id {
				delete(c.localCIDs, cid)
				delete(cs.issued, r.seq)
				if c.onRetireID != nil {
					c.onRetireID([]byte(cid))
				}
			}
		}
		cs.queue = nil
		// The path ID is spent: allow one more (draft §"MAX_PATH_ID").
		if c.localMaxPathID < MaxPathID {
			c.localMaxPathID++
			c.sendMaxPathID = true
			c.issueCIDs()
		}
		if p.reader {
			p.stopRead.Store(true)
			p.pconn.SetReadDeadline(time.Now())
		}
		c.refreshSpaces()
	}
}

// addPathPoll is how long AddPath waits for a signal before it looks
// again; every change it waits for also signals (pathCIDReady), so this is
// only a safety net. Tests set it long to catch a missing signal.
var addPathPoll = 50 * time.Millisecond

// --- the client's API ---

// Path is one path of a multipath connection.
type Path struct {
	c *Conn
	p *path
}

// ErrNoMultipath: the peer did not offer multipath, or the path limit or
// its connection IDs allow no new path.
var ErrNoMultipath = errors.New("mpquic: multipath not negotiated with the peer")

// ErrPathLimit: every path ID both sides allow is in use or was used.
var ErrPathLimit = errors.New("mpquic: path ID limit reached")

// ErrPathAbandoned: the path was abandoned (by either side) or failed
// validation.
var ErrPathAbandoned = errors.New("mpquic: path abandoned")

// Multipath says whether both sides negotiated the multipath extension.
func (c *Conn) Multipath() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.multipath
}

// AddPath opens a new path from packetConn (a UDP socket of the caller's,
// e.g. bound to another interface, that the connection reads until the path
// or the connection ends; it is not closed) to remote, and returns once
// PATH_CHALLENGE/PATH_RESPONSE validated it (draft §"Path Initiation").
// Only a client opens paths.
func (c *Conn) AddPath(ctx context.Context, packetConn net.PacketConn, remote net.Addr) (*Path, error) {
	return c.AddPathStatus(ctx, packetConn, remote, PathAvailable)
}

// AddPathStatus is AddPath for a path that starts with the given status: a
// backup path is announced as such (PATH_STATUS_BACKUP) with its
// validation, before it could carry data.
func (c *Conn) AddPathStatus(ctx context.Context, packetConn net.PacketConn, remote net.Addr, status PathStatus) (*Path, error) {
	if !c.isClient {
		return nil, errors.New("mpquic: only a client opens paths")
	}
	c.mu.Lock()
	var p *path
	for p == nil {
		if c.closing || c.isDone() {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		if !c.multipath {
			c.mu.Unlock()
			return nil, ErrNoMultipath
		}
		id := c.nextPathID
		if id > c.maxPathID() {
			if id > c.peerMaxPathID {
				c.pathsBlocked = true // tell the peer (draft §"PATHS_BLOCKED")
				c.signal()
			}
			c.mu.Unlock()
			return nil, ErrPathLimit
		}
		if cs := c.cids[id]; cs != nil && len(cs.peer) > 0 && c.confirmed {
			c.nextPathID++
			p = c.newPath(id, packetConn, remote)
			p.reader = true
			p.dcid, p.dcidSeq = cs.peer[0].cid, cs.peer[0].seq
			var d [8]byte
			copy(d[:], randomID(8))
			p.challenge = &d
			if status == PathBackup {
				p.localBackup, p.statusSeq, p.sendStatus = true, 1, true
			}
			c.qlogPath(id, "new")
			break
		}
		if c.confirmed {
			c.blockedOnCIDs(id)
		}
		ready := c.pathCIDReady
		c.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.ending:
			return nil, ErrClosed
		case <-time.After(addPathPoll):
		}
		c.mu.Lock()
	}
	c.mu.Unlock()
	raiseBuffers(packetConn)
	go c.readLoop(p)
	c.signal()
	h := &Path{c: c, p: p}
	select {
	case <-p.validatedCh:
	case <-p.doneCh:
	case <-ctx.Done():
		h.Abandon(uint64(ApplicationAbandonPath))
		return nil, ctx.Err()
	case <-c.ending:
		return nil, ErrClosed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.abandoned || !p.validated {
		return nil, ErrPathAbandoned
	}
	return h, nil
}

// Paths returns the connection's paths that are not yet discarded.
func (c *Conn) Paths() []*Path {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Path
	for _, id := range c.pathIDs() {
		if p := c.paths[id]; !p.closed {
			out = append(out, &Path{c: c, p: p})
		}
	}
	return out
}

// ID is the path ID.
func (h *Path) ID() uint32 { return h.p.id }

// SetStatus asks both sides to use the path as available or only as
// backup (PATH_STATUS_AVAILABLE / PATH_STATUS_BACKUP).
func (h *Path) SetStatus(s PathStatus) error {
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.p.abandoned {
		return ErrPathAbandoned
	}
	h.p.localBackup = s == PathBackup
	h.p.statusSeq++
	h.p.sendStatus = true
	c.signal()
	return nil
}

// Abandon closes the path with an application error code (PATH_ABANDON);
// the last open path cannot be abandoned (close the connection instead).
func (h *Path) Abandon(code uint64) error {
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.p.abandoned {
		return nil
	}
	if c.livePaths() < 2 {
		return errors.New("mpquic: cannot abandon the last path")
	}
	c.abandonPath(h.p, code, time.Now())
	c.signal()
	return nil
}

// Done is closed when the path is abandoned, by either side.
func (h *Path) Done() <-chan struct{} { return h.p.doneCh }

// PathStats is one path's sample: what the issue's per-path samples report.
type PathStats struct {
	ID                                      uint32
	Status                                  PathStatus
	Validated, Abandoned, PotentiallyFailed bool
	LocalAddr, RemoteAddr                   net.Addr
	SmoothedRTT, RTTVar, MinRTT, LatestRTT  time.Duration
	CongestionWindow, BytesInFlight         int
	PacketsSent, PacketsLost, PTOCount      uint64
	// SpuriousLosses counts the path's packets declared lost that the
	// peer acknowledged later: they had arrived (a late ACK or
	// reordering); PacketsLost includes them.
	SpuriousLosses uint64
	// PTO is the probe timeout now (RFC 9002 §6.2.1, backoff included);
	// PTOBackoff the PTOs in a row without an acknowledgment (0 when the
	// path is not in timeout).
	PTO        time.Duration
	PTOBackoff int
	// BytesSent and BytesReceived count UDP payloads on this path.
	BytesSent, BytesReceived uint64
	// MaxDatagramSize is the path's datagram size now; MTUProbesSent and
	// MTUProbesLost count its PMTU probes (pmtud.go), which are not in
	// PacketsLost; MTUBlackHoles the falls back to the starting size
	// after PTOs in a row (the route shrank).
	MaxDatagramSize                             int
	MTUProbesSent, MTUProbesLost, MTUBlackHoles uint64
	// CongestionEvents counts the window's reductions on loss,
	// PersistentCongestions its collapses to the minimum window (RFC 9002
	// §7.6).
	CongestionEvents, PersistentCongestions uint64
	// ECN is the path's ECN validation (ecn.go); ECNCE the CE marks the
	// peer reported on packets we sent on the path, ECNCEEvents the window
	// reductions they caused (also in CongestionEvents), ECNCEReceived the
	// CE-marked packets that arrived on it (every space it carries).
	// ECNUnreported counts the ECT(0) packets sent on the path whose
	// arrival the peer's counts do not cover yet (in flight, lost, or
	// ACK-only packets the peer had no reason to acknowledge yet): CE
	// marks on them are not in ECNCE.
	ECN                                              ECNState
	ECNCE, ECNCEEvents, ECNCEReceived, ECNUnreported uint64
}

func (c *Conn) pathStats(p *path) PathStats {
	st := PathAvailable
	if p.backup() {
		st = PathBackup
	}
	return PathStats{ID: p.id, Status: st, Validated: p.validated, Abandoned: p.abandoned, PotentiallyFailed: p.potentiallyFailed,
		LocalAddr: p.pconn.LocalAddr(), RemoteAddr: p.remote,
		SmoothedRTT: p.rtt.Smoothed, RTTVar: p.rtt.RTTVar, MinRTT: p.rtt.Min, LatestRTT: p.rtt.Latest,
		CongestionWindow: p.cc.Cwnd, BytesInFlight: p.cc.InFlight,
		PacketsSent: p.packetsSent, PacketsLost: p.packetsLost, PTOCount: p.ptos, SpuriousLosses: p.space.Spurious,
		PTO: (p.rtt.PTO() + c.peerParams.MaxAckDelay) << p.ptoCount, PTOBackoff: p.ptoCount,
		BytesSent: p.socketSent, BytesReceived: p.socketRecv.Load(),
		MaxDatagramSize: c.pathMSS(p), MTUProbesSent: p.mtu.probesSent, MTUProbesLost: p.mtu.probesLost, MTUBlackHoles: p.mtu.blackHoles,
		CongestionEvents: p.cc.CongestionEvents, PersistentCongestions: p.persistentCongestions,
		ECN: p.ecn.state, ECNCE: p.ecn.ce, ECNCEEvents: p.ecn.ceEvents, ECNCEReceived: c.ceReceived(p),
		ECNUnreported: c.ectUnreported(p)}
}

// ectUnreported is PathStats.ECNUnreported.
func (c *Conn) ectUnreported(p *path) uint64 {
	var n uint64
	for _, sp := range c.spaceList {
		if sp.path == p {
			r := sp.peerECN
			n += sp.ectSent - min(sp.ectSent, r.ECT0+r.ECT1+r.CE)
		}
	}
	return n
}

// ceReceived counts the CE-marked packets of p's spaces (path 0 carries
// the handshake's too).
func (c *Conn) ceReceived(p *path) uint64 {
	n := p.space.ecnRecv[ecnCE]
	if p.id == 0 {
		for _, sp := range c.spaces[:spaceApp] { // p.space is spaces[spaceApp]
			n += sp.ecnRecv[ecnCE]
		}
	}
	return n
}

// Stats samples the path.
func (h *Path) Stats() PathStats {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return h.c.pathStats(h.p)
}

// PathStats samples every path not yet discarded, by path ID.
func (c *Conn) PathStats() []PathStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []PathStats
	for _, id := range c.pathIDs() {
		if p := c.paths[id]; !p.closed {
			out = append(out, c.pathStats(p))
		}
	}
	return out
}

func (s PathStats) String() string {
	st := s.Status.String()
	if s.PotentiallyFailed {
		st += " potentially-failed"
	}
	if s.Abandoned {
		st += " abandoned"
	}
	return fmt.Sprintf("path %d %s srtt %v cwnd %d inflight %d sent %d lost %d ptos %d bytes %d/%d ecn %v ce %d/%d",
		s.ID, st, s.SmoothedRTT, s.CongestionWindow, s.BytesInFlight, s.PacketsSent, s.PacketsLost, s.PTOCount, s.BytesSent, s.BytesReceived,
		s.ECN, s.ECNCE, s.ECNCEReceived)
}
