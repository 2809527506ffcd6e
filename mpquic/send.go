package mpquic

import (
	"slices"
	"sync"
	"time"

	"github.com/mptester/mptester/mpquic/internal/recovery"
)

// sentRecord is a sent packet's record with room for its frames, so the
// two are one allocation (a data packet has one to three: ACK, STREAM and
// perhaps MAX_DATA).
type sentRecord struct {
	recovery.SentPacket
	inline [3]recovery.SentFrame
}

// plan is one packet of a datagram being built: its payload is final
// before headers are written, so padding can go into the last packet.
type plan struct {
	sp             *pnSpace
	si             int // sp.kind
	pn             uint64
	pnLen          int
	payload        []byte
	frames         []recovery.SentFrame
	eliciting      bool
	hasAck         bool
	largestAckSent int64
	pathProbe      bool // carries PATH_CHALLENGE or PATH_RESPONSE
	early          bool // a client's 0-RTT packet (zerortt.go)
}

func (c *Conn) hdrLen(p *path, si, pnLen, payloadLen int) int {
	if si == spaceApp && (p.id != 0 || c.early.seal == nil) {
		return 1 + len(p.dcid) + pnLen
	}
	n := 1 + 4 + 1 + len(p.dcid) + 1 + len(c.scid) + VarintLen(uint64(pnLen+payloadLen+tagLen)) + pnLen
	if si == spaceInitial {
		n += VarintLen(uint64(len(c.retryToken))) + len(c.retryToken)
	}
	return n
}

// sendPackets sends datagrams on every path while there is something to
// send and the congestion windows, pacers and anti-amplification limit
// allow; the scheduler (multipath.go) picks the path of new data.
func (c *Conn) sendPackets(now time.Time) {
	if c.closing {
		if c.closePending {
			c.closePending = false
			c.sendClose()
		}
		return
	}
	c.nextPaceAt = time.Time{}
	c.maybeUpdateKeys()
	more := false
	for _, id := range c.pathIDs() {
		if p := c.paths[id]; !p.closed && !p.abandoned && p.dcid != nil {
			more = c.sendOnPath(now, p) || more
		}
	}
	if more {
		c.signal() // more to send: come back after reading what arrived
	}
}

// sendOnPath sends what path p has to carry; true if it stopped early.
func (c *Conn) sendOnPath(now time.Time, p *path) bool {
	// Datagrams of one size go out as one GSO write where the socket
	// offers it (Linux UDP_SEGMENT): one system call per batch, not per
	// packet. A shorter datagram ends a batch; a longer one starts anew.
	// The batch buffer is pooled: a connection holds none between sends
	// (a half-open one would hold 48 KiB for its handshake's few bytes).
	bp := batchPool.Get().(*[]byte)
	c.batch = (*bp)[:0]
	defer func() {
		*bp = c.batch[:0]
		c.batch = nil
		batchPool.Put(bp)
	}()
	// The codepoint of everything this call sends on p, fixed for the
	// call so a GSO train and the packets' records agree (ecn.go).
	p.ecn.out = p.ecn.mark()
	defer func() { p.ecn.out = ecnNotECT }()
	c.maybeProbeMTU(now, p)
	c.sendResponsesAway(now, p)
	batch := c.batch[:0]
	seg, nseg := 0, 0
	more := true
	for i := 0; i < 256; i++ {
		start := len(batch)
		batch = c.buildDatagram(now, p, batch)
		n := len(batch) - start
		if n == 0 {
			more = false
			break
		}
		c.bytesSent += n // anti-amplification counts what we tried
		p.amp.sentBytes(n)
		switch {
		case nseg > 0 && n > seg:
			c.flush(p, batch[:start], seg, nseg)
			copy(batch, batch[start:])
			batch, seg, nseg = batch[:n], n, 1
		case nseg == 0:
			seg, nseg = n, 1
		default:
			nseg++
		}
		if n < seg || nseg >= maxGSOSegments || !p.gso || cap(batch)-len(batch) < maxDatagramSize+64 {
			c.flush(p, batch, seg, nseg)
			batch, nseg = batch[:0], 0
		}
	}
	if nseg > 0 {
		c.flush(p, batch, seg, nseg)
	}
	c.batch = batch[:0]
	return more
}

// maxGSOSegments bounds a batch (the kernel allows 64 segments, 64 KiB).
const maxGSOSegments = 32

var batchPool = sync.Pool{New: func() any {
	b := make([]byte, 0, maxGSOSegments*(maxDatagramSize+64))
	return &b
}}

// flush writes nseg datagrams of seg bytes (the last may be shorter) on p.
func (c *Conn) flush(p *path, b []byte, seg, nseg int) {
	if len(b) == 0 {
		return
	}
	if nseg > 1 && p.gso {
		if err := writeGSO(p.pconn, b, seg, p.remote, p.local, p.ecn.out, &p.oob); err == nil {
			c.socketSent += uint64(len(b))
			p.socketSent += uint64(len(b))
			return
		} else if !gsoTransient(err) {
			p.gso = false // not offered here: one write per datagram from now on
		}
	}
	for len(b) > 0 {
		n := min(seg, len(b))
		if err := p.write(b[:n]); err == nil {
			c.socketSent += uint64(n)
			p.socketSent += uint64(n)
		}
		b = b[n:]
	}
}

// spacesOf are the packet number spaces a datagram on p may carry.
func (c *Conn) spacesOf(p *path) []*pnSpace {
	if p.id == 0 {
		return c.spaces[:]
	}
	return []*pnSpace{p.space}
}

// buildDatagram appends one datagram for path p to dst; dst unchanged if
// there is nothing to send.
func (c *Conn) buildDatagram(now time.Time, p *path, dst []byte) []byte {
	mss := c.pathMSS(p)
	limit := mss
	if !c.isClient && !c.addrValidated {
		limit = min(limit, 3*c.bytesRecv-c.bytesSent) // RFC 9000 §8.1
		if limit < minDatagramSize {
			return dst
		}
	}
	if limit = p.amp.allowance(limit); limit < minAmpDatagram {
		return dst // §8.2, §9.3: the path's address is not validated yet
	}
	spaces := c.spacesOf(p)
	probing := false
	for _, sp := range spaces {
		probing = probing || sp.probe > 0
	}
	var dataOK bool
	if !c.multipath {
		dataOK = p.cc.CanSend(mss) || probing
		if dataOK && !probing {
			if t := p.cc.Pace(now, mss, p.rtt.Smoothed, p.rtt.HasSample); !t.IsZero() {
				c.nextPaceAt = t
				dataOK = false
			}
		}
	} else {
		// A potentially failed path probes with PINGs only: its data
		// was reinjected elsewhere.
		dataOK = (probing && !p.potentiallyFailed) || c.schedule(now) == p
	}
	var plans [numSpaces]plan
	np := 0
	remaining := limit
	for _, sp := range spaces {
		si := sp.kind
		early := si == spaceApp && c.spaces[si].seal == nil && c.early.seal != nil && p.id == 0
		if (c.spaces[si].seal == nil && !early) || sp.discarded {
			continue
		}
		pn := sp.nextPN
		pnLen := PacketNumberLen(pn, sp.LargestAcked)
		avail := remaining - c.hdrLen(p, si, pnLen, remaining) - tagLen
		if avail < 32 {
			break
		}
		pl := plan{sp: sp, si: si, pn: pn, pnLen: pnLen, largestAckSent: -1, early: early, frames: c.planFrames[np][:0]}
		c.fillPayload(&pl, avail, now, dataOK || (sp.probe > 0 && !p.potentiallyFailed))
		if len(pl.payload) == 0 {
			continue
		}
		plans[np] = pl
		np++
		remaining -= c.hdrLen(p, si, pnLen, len(pl.payload)) + len(pl.payload) + tagLen
	}
	if np == 0 {
		return dst
	}
	// Padding: Initial datagrams from the client, and the server's with
	// ack-eliciting Initials, are at least 1200 bytes (§14.1), and so are
	// those with PATH_CHALLENGE or PATH_RESPONSE as far as the path's
	// anti-amplification limit allows (§8.2.1-2: the path then carries
	// 1200 bytes both ways); every packet needs 4 bytes after the packet
	// number start for the sample.
	padTo := 0
	for _, pl := range plans[:np] {
		if pl.si == spaceInitial && (c.isClient || pl.eliciting) {
			padTo = minDatagramSize
		}
		if pl.pathProbe {
			padTo = max(padTo, min(minDatagramSize, limit))
		}
	}
	for i := range plans[:np] {
		pl := &plans[i]
		if need := 4 - pl.pnLen - len(pl.payload); need > 0 {
			pl.payload = append(pl.payload, make([]byte, need)...)
		}
	}
	if padTo > 0 {
		last := &plans[np-1]
		for {
			total := 0
			for _, pl := range plans[:np] {
				total += c.hdrLen(p, pl.si, pl.pnLen, len(pl.payload)) + len(pl.payload) + tagLen
			}
			if total >= padTo {
				break
			}
			last.payload = append(last.payload, make([]byte, padTo-total)...)
		}
	}
	buf := dst
	discardInitial := false
	for i, pl := range plans[:np] {
		buf, _ = c.sealPlan(now, p, &pl, buf)
		c.planFrames[i] = pl.frames[:0] // keep what append grew
		if c.isClient && pl.si == spaceHandshake {
			discardInitial = true // RFC 9001 §4.9.1
		}
	}
	if discardInitial {
		c.discardSpace(spaceInitial)
	}
	return buf
}

// longHeader is a long header of space si on path p: a client's Initials
// after a Retry carry its token (RFC 9000 §17.2.5.2).
func (c *Conn) longHeader(si int, p *path) LongHeader {
	h := LongHeader{Type: spacePacketTypes[si], Version: c.version, DCID: p.dcid, SCID: c.scid}
	if si == spaceInitial {
		h.Token = c.retryToken
	}
	return h
}

// sealPlan appends pl as a protected packet on path p to buf and records
// it as sent (counters, qlog, ACK state, and the in-flight packet when it
// is ack-eliciting, which it returns).
func (c *Conn) sealPlan(now time.Time, p *path, pl *plan, buf []byte) ([]byte, *recovery.SentPacket) {
	sp := pl.sp
	start := len(buf)
	var err error
	pid := uint32(0)
	seal := c.spaces[pl.si].seal
	switch {
	case pl.early:
		seal = c.early.seal
		buf, err = AppendLongHeader(buf, LongHeader{Type: Packet0RTT, Version: c.vs.orig, DCID: p.dcid, SCID: c.scid}, pl.pn, pl.pnLen, len(pl.payload))
	case pl.si == spaceApp:
		pid = p.id
		buf, err = AppendShortHeader(buf, ShortHeader{DCID: p.dcid, KeyPhase: c.keyPhase}, pl.pn, pl.pnLen)
	default:
		buf, err = AppendLongHeader(buf, c.longHeader(pl.si, p), pl.pn, pl.pnLen, len(pl.payload))
	}
	if err != nil {
		panic("mpquic: " + err.Error()) // lengths are ours
	}
	hl := len(buf) - start
	var frames []Frame
	if c.qlog != nil {
		// The frames as the peer will parse them, before sealing
		// overwrites the payload; only when tracing.
		frames, _ = ParseFrames(pl.payload, spacePacketTypes[pl.si], c.multipath)
	}
	buf = append(buf, pl.payload...)
	pkt, err := seal.ProtectInPlace(buf[start:], hl, pl.pn, pid)
	if err != nil {
		panic("mpquic: " + err.Error())
	}
	buf = buf[:start+len(pkt)]
	sp.nextPN++
	c.packetsSent++
	p.packetsSent++
	ect := p.ecn.out == ecnECT0
	if ect {
		sp.ectSent++
		old := p.ecn.state
		p.ecn.onSent()
		c.ecnChanged(p, old, now)
	}
	qsi := pl.si
	switch {
	case pl.early:
		c.early.sent++
		qsi = siZeroRTT
	case pl.si == spaceApp:
		c.sentInPhase(pid, pl.pn)
	}
	if c.qlog != nil {
		c.qlog.packet(now, "transport:packet_sent", qsi, pid, pl.pn, len(pkt), frames)
	}
	if pl.hasAck {
		sp.ackAt = time.Time{}
		sp.elicitingUnacked = 0
	}
	if !pl.eliciting {
		return buf, nil
	}
	// One allocation per packet for its record and (up to three) frames;
	// pl.frames is the connection's scratch, never kept.
	rec := &sentRecord{SentPacket: recovery.SentPacket{PN: pl.pn, Time: now, Size: len(pkt), AckEliciting: true, InFlight: true, LargestAcked: pl.largestAckSent, ECT: ect}}
	if len(pl.frames) <= len(rec.inline) {
		rec.Frames = append(rec.inline[:0:len(rec.inline)], pl.frames...)
	} else {
		rec.Frames = slices.Clone(pl.frames)
	}
	sent := &rec.SentPacket
	sp.OnSent(sent)
	p.cc.OnSent(sent.Size)
	p.cc.OnPaced(sent.Size)
	if sp.probe > 0 {
		sp.probe--
		// A handshake space whose first probe took all the CRYPTO data
		// left to send puts it in the second probe too (RFC 9002 §6.2.4
		// allows copies), not a PING: under loss either datagram arriving
		// completes the flight, where a lost data probe cost a whole
		// doubled PTO period.
		if sp.probe > 0 && sp.kind != spaceApp && !sp.crypto.pending() && hasCrypto(sent) {
			c.requeue(sp, sent)
		}
	}
	return buf, sent
}

// fillPayload adds frames to one packet: an ACK if owed, CRYPTO data, then
// (1-RTT) the path's own frames, control frames and stream data, in at most
// avail bytes.
func (c *Conn) fillPayload(pl *plan, avail int, now time.Time, dataOK bool) {
	sp := pl.sp
	b := c.payloadBuf(pl.si, avail)
	ackDue := !sp.ackAt.IsZero() && !sp.ackAt.After(now)
	ackOwed := !sp.ackAt.IsZero() || (len(sp.recvd) > 0 && dataOK && sp.elicitingUnacked > 0)
	if ackOwed && len(sp.recvd) > 0 && !pl.early { // no ACK in 0-RTT (RFC 9000 §12.4)
		f := c.ackFrame(sp, now)
		var b2 []byte
		if sp.kind == spaceApp && sp.path.id != 0 {
			b2 = PathAckFrame{PathID: uint64(sp.path.id), Ack: f}.Append(b)
		} else {
			b2 = f.Append(b)
		}
		if len(b2) <= avail/2 || ackDue {
			b = b2
			pl.hasAck = true
			pl.largestAckSent = int64(f.Ranges[0].Largest)
		}
	}
	ackLen := len(b)
	if pl.si == spaceApp && !pl.early {
		b = c.fillPathFrames(pl, b, avail)
	}
	if dataOK {
		if pl.si != spaceApp || sp == c.spaces[spaceApp] {
			b = c.fillCrypto(pl, sp, b, avail)
		}
		if pl.si == spaceApp {
			b = c.fillControl(pl, b, avail)
			b = c.fillStreams(pl, b, avail)
			if c.testFrames != nil {
				b = c.testFrames(b, avail)
			}
		}
	}
	if len(b) > ackLen {
		pl.eliciting = true
	} else if sp.probe > 0 {
		b = PingFrame{}.Append(b)
		pl.eliciting = true
	} else if !ackDue {
		b = b[:0] // a piggyback ACK alone is not worth a packet yet
		pl.hasAck = false
	}
	pl.payload = b
}

func (c *Conn) ackFrame(sp *pnSpace, now time.Time) AckFrame {
	n := min(len(sp.recvd), maxAckRanges)
	f := AckFrame{Ranges: make([]AckRange, 0, n)}
	for i := len(sp.recvd) - 1; i >= len(sp.recvd)-n; i-- {
		f.Ranges = append(f.Ranges, AckRange{Smallest: sp.recvd[i].lo, Largest: sp.recvd[i].hi})
	}
	if sp.kind == spaceApp {
		f.AckDelay = uint64(now.Sub(sp.largestRecvTime).Microseconds()) >> DefaultAckDelayExponent
	}
	f.ECN = sp.ackECN()
	return f
}

// fillPathFrames adds what must go on this very path: its PATH_CHALLENGE
// and the PATH_RESPONSEs to challenges that arrived on it (RFC 9000 §8.2).
func (c *Conn) fillPathFrames(pl *plan, b []byte, avail int) []byte {
	p := pl.sp.path
	if p.challenge != nil && !p.challengeSent && avail-len(b) >= 16 {
		b = PathChallengeFrame{Data: *p.challenge}.Append(b)
		pl.frames = append(pl.frames, recovery.SentFrame{Kind: sfPathChallenge, PathID: p.id})
		p.challengeSent = true
		pl.pathProbe = true
	}
	// A path's status goes first on the path itself: a peer may ignore a
	// status for a path ID it has not seen a packet on yet (picoquic
	// does), and the draft lets it ride with the path's first packets.
	if p.sendStatus && !p.abandoned && avail-len(b) >= 16 {
		b = PathStatusFrame{PathID: uint64(p.id), Seq: p.statusSeq, Backup: p.localBackup}.Append(b)
		pl.frames = append(pl.frames, recovery.SentFrame{Kind: sfPathStatus, PathID: p.id, ID: p.statusSeq})
		p.sendStatus = false
	}
	for i := 0; i < len(p.responses) && avail-len(b) >= 16; {
		if !p.responses[i].onPath(p) {
			i++ // sendResponsesAway's
			continue
		}
		b = PathResponseFrame{Data: p.responses[i].data}.Append(b)
		pl.frames = append(pl.frames, recovery.SentFrame{Kind: sfAck})
		p.responses = slices.Delete(p.responses, i, i+1)
		pl.pathProbe = true
	}
	return b
}

func (c *Conn) fillCrypto(pl *plan, sp *pnSpace, b []byte, avail int) []byte {
	for sp.crypto.pending() {
		room := avail - len(b) - 1 - 8 - 4
		if room < 16 {
			break
		}
		off, data, _, ok := sp.crypto.popLost(room)
		if !ok {
			off, data, _ = sp.crypto.popNew(room, 1<<62)
		}
		if len(data) == 0 {
			break
		}
		b = CryptoFrame{Offset: off, Data: data}.Append(b)
		pl.frames = append(pl.frames, recovery.SentFrame{Kind: sfCrypto, Off: off, N: uint64(len(data))})
	}
	return b
}

func (c *Conn) fillControl(pl *plan, b []byte, avail int) []byte {
	add := func(f Frame, sf recovery.SentFrame) bool {
		if avail-len(b) < 48 { // NEW_CONNECTION_ID: up to 46 bytes
			return false
		}
		b = f.Append(b)
		pl.frames = append(pl.frames, sf)
		return true
	}
	if c.sendHandshakeDone && add(HandshakeDoneFrame{}, recovery.SentFrame{Kind: sfHandshakeDone}) {
		c.sendHandshakeDone = false
	}
	if c.sendMaxData && add(MaxDataFrame{Max: c.localMaxData}, recovery.SentFrame{Kind: sfMaxData}) {
		c.sendMaxData = false
	}
	if c.sendMaxStreams && add(MaxStreamsFrame{Bidi: true, Max: c.localMaxBidi}, recovery.SentFrame{Kind: sfMaxStreams}) {
		c.sendMaxStreams = false
	}
	if c.uni.sendMax && add(MaxStreamsFrame{Max: c.uni.localMax}, recovery.SentFrame{Kind: sfMaxStreamsUni}) {
		c.uni.sendMax = false
	}
	for _, cs := range c.cidOrder {
		id := cs.id
		for len(cs.queue) > 0 {
			f, ok := cs.issued[cs.queue[0]]
			var fr Frame = f
			if id != 0 {
				fr = PathNewConnectionIDFrame{PathID: uint64(id), Seq: f.Seq, RetirePriorTo: f.RetirePriorTo, ConnID: f.ConnID, ResetToken: f.ResetToken}
			}
			if ok && !add(fr, recovery.SentFrame{Kind: sfNewCID, PathID: id, ID: f.Seq}) {
				break
			}
			cs.queue = cs.queue[1:]
		}
		for len(cs.retireQueue) > 0 {
			var fr Frame = RetireConnectionIDFrame{Seq: cs.retireQueue[0]}
			if id != 0 {
				fr = PathRetireConnectionIDFrame{PathID: uint64(id), Seq: cs.retireQueue[0]}
			}
			if !add(fr, recovery.SentFrame{Kind: sfRetireCID, PathID: id, ID: cs.retireQueue[0]}) {
				break
			}
			cs.retireQueue = cs.retireQueue[1:]
		}
	}
	if c.sendMaxPathID && add(MaxPathIDFrame{MaxPathID: uint64(c.localMaxPathID)}, recovery.SentFrame{Kind: sfMaxPathID}) {
		c.sendMaxPathID = false
	}
	if c.pathsBlocked && add(PathsBlockedFrame{MaxPathID: uint64(c.peerMaxPathID)}, recovery.SentFrame{Kind: sfAck}) {
		c.pathsBlocked = false
	}
	for len(c.pathCIDs.owed) > 0 && add(c.pathCIDs.owed[0], recovery.SentFrame{Kind: sfAck}) {
		c.pathCIDs.owed = c.pathCIDs.owed[1:]
		c.pathCIDs.sent++
	}
	for len(c.injectFrames) > 0 && add(c.injectFrames[0], recovery.SentFrame{Kind: sfAck}) {
		c.injectFrames = c.injectFrames[1:]
	}
	for _, id := range c.pathIDs() {
		p := c.paths[id]
		if p.sendAbandon && add(PathAbandonFrame{PathID: uint64(p.id), ErrorCode: p.abandonCode}, recovery.SentFrame{Kind: sfPathAbandon, PathID: p.id}) {
			p.sendAbandon = false
		}
		if p.sendStatus && !p.abandoned && c.peerKnowsPath(p) && add(PathStatusFrame{PathID: uint64(p.id), Seq: p.statusSeq, Backup: p.localBackup}, recovery.SentFrame{Kind: sfPathStatus, PathID: p.id, ID: p.statusSeq}) {
			p.sendStatus = false
		}
	}
	return b
}

// peerKnowsPath: the peer has had a packet on p (its PATH_RESPONSE came
// back), or opened p itself, so a frame naming p's ID on another path is
// not one it may drop as naming an unknown path.
func (c *Conn) peerKnowsPath(p *path) bool {
	return p.id == 0 || !c.isClient || p.validated
}

// fillStreams adds stream signals and data, round robin over active streams.
func (c *Conn) fillStreams(pl *plan, b []byte, avail int) []byte {
	kept := c.active[:0]
	for i, s := range c.active {
		if avail-len(b) < 32 {
			kept = append(kept, c.active[i:]...)
			break
		}
		if s.sendMaxStreamData {
			s.sendMaxStreamData = false
			b = MaxStreamDataFrame{StreamID: s.id, Max: s.recvMax}.Append(b)
			pl.frames = append(pl.frames, recovery.SentFrame{Kind: sfMaxStreamData, ID: s.id})
		}
		if s.stopPending {
			s.stopPending = false
			b = StopSendingFrame{StreamID: s.id, ErrorCode: s.stopCode}.Append(b)
			pl.frames = append(pl.frames, recovery.SentFrame{Kind: sfStopSending, ID: s.id})
		}
		if s.resetPending {
			s.resetPending = false
			b = ResetStreamFrame{StreamID: s.id, ErrorCode: *s.resetCode, FinalSize: s.send.next}.Append(b)
			pl.frames = append(pl.frames, recovery.SentFrame{Kind: sfResetStream, ID: s.id})
		}
		if s.resetCode == nil {
			b = c.fillStreamData(pl, s, b, avail)
		}
		if c.streamPending(s) {
			kept = append(kept, s)
		} else {
			s.isActive = false
		}
	}
	// Rotate so the next packet starts with another stream.
	if len(kept) > 1 {
		kept = append(kept[1:], kept[0])
	}
	c.active = kept
	return b
}

func (c *Conn) connCredit() uint64 {
	if c.peerMaxData > c.dataSent {
		return c.peerMaxData - c.dataSent
	}
	return 0
}

func (c *Conn) streamPending(s *Stream) bool {
	if s.sendMaxStreamData || s.stopPending || s.resetPending {
		return true
	}
	if s.resetCode != nil {
		return false
	}
	if s.send.hasLost() {
		return true
	}
	if s.send.fin && !s.send.finSent && s.send.next == s.send.end() {
		return true
	}
	return s.send.next < s.send.end() && s.send.next < s.peerMax && c.connCredit() > 0
}

func (c *Conn) fillStreamData(pl *plan, s *Stream, b []byte, avail int) []byte {
	for {
		room := avail - len(b) - 1 - VarintLen(s.id) - 8 - 2
		if room < 8 {
			return b
		}
		off, data, fin, ok := s.send.popLost(room)
		if !ok {
			limit := min(s.peerMax, s.send.next+c.connCredit())
			if s.send.next >= limit && !(s.send.fin && !s.send.finSent && s.send.next == s.send.end()) {
				if s.send.next < s.send.end() {
					b = c.noteBlocked(s, b)
				}
				return b
			}
			before := s.send.next
			off, data, fin = s.send.popNew(room, limit)
			c.dataSent += s.send.next - before
			c.unsent -= int(s.send.next - before)
			if len(data) == 0 && !fin {
				return b
			}
			if s.send.unsent() <= uint64(c.conf.SendBuffer/2) {
				notify(s.writeReady) // a blocked Write finds half the buffer free
			}
			c.wakeSendWaiters()
		}
		b = StreamFrame{StreamID: s.id, Offset: off, Data: data, Fin: fin}.Append(b)
		pl.frames = append(pl.frames, recovery.SentFrame{Kind: sfStream, ID: s.id, Off: off, N: uint64(len(data)), Fin: fin})
	}
}

// noteBlocked sends DATA_BLOCKED / STREAM_DATA_BLOCKED once per limit
// (RFC 9000 §4.1), so a stalled peer is told why.
func (c *Conn) noteBlocked(s *Stream, b []byte) []byte {
	if c.connCredit() == 0 && c.blockedAt != c.peerMaxData {
		c.blockedAt = c.peerMaxData
		b = DataBlockedFrame{Limit: c.peerMaxData}.Append(b)
	}
	if s.send.next >= s.peerMax && s.blockedAt != s.peerMax {
		s.blockedAt = s.peerMax
		b = StreamDataBlockedFrame{StreamID: s.id, Limit: s.peerMax}.Append(b)
	}
	return b
}

// sendClose sends the CONNECTION_CLOSE in every space we can (RFC 9000
// §10.2.3), on path 0 or, if it was abandoned, another open path; before
// 1-RTT an application close becomes APPLICATION_ERROR.
func (c *Conn) sendClose() {
	f := *c.closeFrame
	buf := c.sendScratch[:0]
	p := c.p0()
	if p.abandoned || p.closed || p.dcid == nil {
		for _, id := range c.pathIDs() {
			if q := c.paths[id]; !q.abandoned && !q.closed && q.dcid != nil {
				p = q
				break
			}
		}
	}
	for _, sp := range c.spacesOf(p) {
		si := sp.kind
		seal := c.spaces[si].seal
		if seal == nil || sp.discarded {
			continue
		}
		g := f
		if si != spaceApp && g.Application {
			g = ConnectionCloseFrame{ErrorCode: uint64(ApplicationError)}
		}
		payload := g.Append(nil)
		if si == spaceApp && !c.handshakeComplete && !c.isClient && g.Application {
			continue
		}
		pnLen := PacketNumberLen(sp.nextPN, sp.LargestAcked)
		if need := 4 - pnLen - len(payload); need > 0 {
			payload = append(payload, make([]byte, need)...)
		}
		if si == spaceInitial && c.isClient && len(payload) < minDatagramSize-100 {
			payload = append(payload, make([]byte, minDatagramSize-100-len(payload))...)
		}
		start := len(buf)
		pid := uint32(0)
		if si == spaceApp {
			pid = p.id
			buf, _ = AppendShortHeader(buf, ShortHeader{DCID: p.dcid, KeyPhase: c.keyPhase}, sp.nextPN, pnLen)
		} else {
			buf, _ = AppendLongHeader(buf, c.longHeader(si, p), sp.nextPN, pnLen, len(payload))
		}
		hl := len(buf) - start
		buf = append(buf, payload...)
		pkt, err := seal.ProtectInPlace(buf[start:], hl, sp.nextPN, pid)
		if err != nil {
			return
		}
		buf = buf[:start+len(pkt)]
		sp.nextPN++
		if len(buf) > maxDatagramSize {
			break
		}
	}
	if len(buf) > 0 {
		if err := p.write(buf); err == nil {
			c.socketSent += uint64(len(buf))
			p.socketSent += uint64(len(buf))
		}
	}
	select {
	case <-c.closeSent:
	default:
		close(c.closeSent)
	}
}
