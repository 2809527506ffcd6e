package mpquic

import (
	"time"
)

// plan is one packet of a datagram being built: its payload is final
// before headers are written, so padding can go into the last packet.
type plan struct {
	si             int
	pn             uint64
	pnLen          int
	payload        []byte
	frames         []sentFrame
	eliciting      bool
	hasAck         bool
	largestAckSent int64
}

func (c *Conn) hdrLen(si, pnLen, payloadLen int) int {
	if si == spaceApp {
		return 1 + len(c.dcid) + pnLen
	}
	n := 1 + 4 + 1 + len(c.dcid) + 1 + len(c.scid) + VarintLen(uint64(pnLen+payloadLen+tagLen)) + pnLen
	if si == spaceInitial {
		n++ // empty token length
	}
	return n
}

// sendPackets sends datagrams while there is something to send and the
// congestion window, pacer and anti-amplification limit allow.
func (c *Conn) sendPackets(now time.Time) {
	if c.closing {
		if c.closePending {
			c.closePending = false
			c.sendClose()
		}
		return
	}
	c.nextPaceAt = time.Time{}
	// Datagrams of one size go out as one GSO write where the socket
	// offers it (Linux UDP_SEGMENT): one system call per batch, not per
	// packet. A shorter datagram ends a batch; a longer one starts anew.
	batch := c.batch[:0]
	seg, nseg := 0, 0
	more := true
	for i := 0; i < 256; i++ {
		start := len(batch)
		batch = c.buildDatagram(now, batch)
		n := len(batch) - start
		if n == 0 {
			more = false
			break
		}
		c.bytesSent += n // anti-amplification counts what we tried
		switch {
		case nseg > 0 && n > seg:
			c.flush(batch[:start], seg, nseg)
			copy(batch, batch[start:])
			batch, seg, nseg = batch[:n], n, 1
		case nseg == 0:
			seg, nseg = n, 1
		default:
			nseg++
		}
		if n < seg || nseg >= maxGSOSegments || !c.gso || cap(batch)-len(batch) < maxDatagramSize+64 {
			c.flush(batch, seg, nseg)
			batch, nseg = batch[:0], 0
		}
	}
	if nseg > 0 {
		c.flush(batch, seg, nseg)
	}
	c.batch = batch[:0]
	if more {
		c.signal() // more to send: come back after reading what arrived
	}
}

// maxGSOSegments bounds a batch (the kernel allows 64 segments, 64 KiB).
const maxGSOSegments = 32

// flush writes nseg datagrams of seg bytes (the last may be shorter).
func (c *Conn) flush(b []byte, seg, nseg int) {
	if len(b) == 0 {
		return
	}
	if nseg > 1 && c.gso {
		if err := writeGSO(c.pconn, b, seg, c.remote, &c.oob); err == nil {
			c.socketSent += uint64(len(b))
			return
		} else if !gsoTransient(err) {
			c.gso = false // not offered here: one write per datagram from now on
		}
	}
	for len(b) > 0 {
		n := min(seg, len(b))
		if _, err := c.pconn.WriteTo(b[:n], c.remote); err == nil {
			c.socketSent += uint64(n)
		}
		b = b[n:]
	}
}

// buildDatagram appends one datagram to dst; dst unchanged if there is
// nothing to send.
func (c *Conn) buildDatagram(now time.Time, dst []byte) []byte {
	limit := c.mss
	if !c.isClient && !c.addrValidated {
		limit = min(limit, 3*c.bytesRecv-c.bytesSent) // RFC 9000 §8.1
		if limit < minDatagramSize {
			return dst
		}
	}
	probing := false
	for _, n := range c.probe {
		probing = probing || n > 0
	}
	dataOK := c.cc.canSend(c.mss) || probing
	if dataOK && !probing {
		if t := c.cc.pace(now, c.mss, c.rtt.smoothed, c.rtt.hasSample); !t.IsZero() {
			c.nextPaceAt = t
			dataOK = false
		}
	}
	var plans [numSpaces]plan
	np := 0
	remaining := limit
	for si, sp := range c.spaces {
		if sp.seal == nil || sp.discarded {
			continue
		}
		pn := sp.nextPN
		pnLen := PacketNumberLen(pn, sp.largestAcked)
		avail := remaining - c.hdrLen(si, pnLen, remaining) - tagLen
		if avail < 32 {
			break
		}
		pl := plan{si: si, pn: pn, pnLen: pnLen, largestAckSent: -1}
		c.fillPayload(&pl, avail, now, dataOK || c.probe[si] > 0)
		if len(pl.payload) == 0 {
			continue
		}
		plans[np] = pl
		np++
		remaining -= c.hdrLen(si, pnLen, len(pl.payload)) + len(pl.payload) + tagLen
	}
	if np == 0 {
		return dst
	}
	// Padding: Initial datagrams from the client, and the server's with
	// ack-eliciting Initials, are at least 1200 bytes (§14.1); every packet
	// needs 4 bytes after the packet number start for the sample.
	pad := false
	for _, pl := range plans[:np] {
		if pl.si == spaceInitial && (c.isClient || pl.eliciting) {
			pad = true
		}
	}
	for i := range plans[:np] {
		pl := &plans[i]
		if need := 4 - pl.pnLen - len(pl.payload); need > 0 {
			pl.payload = append(pl.payload, make([]byte, need)...)
		}
	}
	if pad {
		last := &plans[np-1]
		for {
			total := 0
			for _, pl := range plans[:np] {
				total += c.hdrLen(pl.si, pl.pnLen, len(pl.payload)) + len(pl.payload) + tagLen
			}
			if total >= minDatagramSize {
				break
			}
			last.payload = append(last.payload, make([]byte, minDatagramSize-total)...)
		}
	}
	buf := dst
	discardInitial := false
	for _, pl := range plans[:np] {
		sp := c.spaces[pl.si]
		start := len(buf)
		var err error
		if pl.si == spaceApp {
			buf, err = AppendShortHeader(buf, ShortHeader{DCID: c.dcid, KeyPhase: c.keyPhase}, pl.pn, pl.pnLen)
		} else {
			buf, err = AppendLongHeader(buf, LongHeader{Type: spacePacketTypes[pl.si], DCID: c.dcid, SCID: c.scid}, pl.pn, pl.pnLen, len(pl.payload))
		}
		if err != nil {
			panic("mpquic: " + err.Error()) // lengths are ours
		}
		hl := len(buf) - start
		buf = append(buf, pl.payload...)
		pkt, err := sp.seal.ProtectInPlace(buf[start:], hl, pl.pn, 0)
		if err != nil {
			panic("mpquic: " + err.Error())
		}
		buf = buf[:start+len(pkt)]
		sp.nextPN++
		c.packetsSent++
		if pl.hasAck {
			sp.ackAt = time.Time{}
			sp.elicitingUnacked = 0
		}
		if pl.eliciting {
			p := &sentPacket{pn: pl.pn, time: now, size: len(pkt), ackEliciting: true, inFlight: true, largestAcked: pl.largestAckSent, frames: pl.frames}
			sp.sent = append(sp.sent, p)
			sp.lastEliciting = now
			c.cc.onSent(p.size)
			c.cc.onPaced(p.size)
			if c.probe[pl.si] > 0 {
				c.probe[pl.si]--
			}
		}
		if c.isClient && pl.si == spaceHandshake {
			discardInitial = true // RFC 9001 §4.9.1
		}
	}
	if discardInitial {
		c.discardSpace(spaceInitial)
	}
	return buf
}

// fillPayload adds frames to one packet: an ACK if owed, CRYPTO data, then
// (1-RTT) control frames and stream data, in at most avail bytes.
func (c *Conn) fillPayload(pl *plan, avail int, now time.Time, dataOK bool) {
	sp := c.spaces[pl.si]
	b := make([]byte, 0, avail)
	ackDue := !sp.ackAt.IsZero() && !sp.ackAt.After(now)
	ackOwed := !sp.ackAt.IsZero() || (len(sp.recvd) > 0 && dataOK && sp.elicitingUnacked > 0)
	if ackOwed && len(sp.recvd) > 0 {
		f := c.ackFrame(sp, now)
		if b2 := f.Append(b); len(b2) <= avail/2 || ackDue {
			b = b2
			pl.hasAck = true
			pl.largestAckSent = int64(f.Ranges[0].Largest)
		}
	}
	ackLen := len(b)
	if dataOK {
		b = c.fillCrypto(pl, sp, b, avail)
		if pl.si == spaceApp {
			b = c.fillControl(pl, b, avail)
			b = c.fillStreams(pl, b, avail)
		}
	}
	if len(b) > ackLen {
		pl.eliciting = true
	} else if c.probe[pl.si] > 0 {
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
	if sp == c.spaces[spaceApp] {
		f.AckDelay = uint64(now.Sub(sp.largestRecvTime).Microseconds()) >> DefaultAckDelayExponent
	}
	return f
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
		pl.frames = append(pl.frames, sentFrame{kind: sfCrypto, off: off, n: uint64(len(data))})
	}
	return b
}

func (c *Conn) fillControl(pl *plan, b []byte, avail int) []byte {
	add := func(f Frame, sf sentFrame) bool {
		if avail-len(b) < 48 { // NEW_CONNECTION_ID: up to 46 bytes
			return false
		}
		b = f.Append(b)
		pl.frames = append(pl.frames, sf)
		return true
	}
	if c.sendHandshakeDone && add(HandshakeDoneFrame{}, sentFrame{kind: sfHandshakeDone}) {
		c.sendHandshakeDone = false
	}
	if c.sendMaxData && add(MaxDataFrame{Max: c.localMaxData}, sentFrame{kind: sfMaxData}) {
		c.sendMaxData = false
	}
	if c.sendMaxStreams && add(MaxStreamsFrame{Bidi: true, Max: c.localMaxBidi}, sentFrame{kind: sfMaxStreams}) {
		c.sendMaxStreams = false
	}
	for len(c.cidQueue) > 0 {
		f, ok := c.issued[c.cidQueue[0]]
		if ok && !add(f, sentFrame{kind: sfNewCID, id: f.Seq}) {
			break
		}
		c.cidQueue = c.cidQueue[1:]
	}
	for len(c.retireQueue) > 0 && add(RetireConnectionIDFrame{Seq: c.retireQueue[0]}, sentFrame{kind: sfRetireCID, id: c.retireQueue[0]}) {
		c.retireQueue = c.retireQueue[1:]
	}
	if c.challenge != nil && !c.challengeSent && add(PathChallengeFrame{Data: *c.challenge}, sentFrame{kind: sfPathChallenge}) {
		c.challengeSent = true
	}
	for len(c.pathResponses) > 0 && add(PathResponseFrame{Data: c.pathResponses[0]}, sentFrame{kind: sfAck}) {
		c.pathResponses = c.pathResponses[1:]
	}
	return b
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
			pl.frames = append(pl.frames, sentFrame{kind: sfMaxStreamData, id: s.id})
		}
		if s.stopPending {
			s.stopPending = false
			b = StopSendingFrame{StreamID: s.id, ErrorCode: s.stopCode}.Append(b)
			pl.frames = append(pl.frames, sentFrame{kind: sfStopSending, id: s.id})
		}
		if s.resetPending {
			s.resetPending = false
			b = ResetStreamFrame{StreamID: s.id, ErrorCode: *s.resetCode, FinalSize: s.send.next}.Append(b)
			pl.frames = append(pl.frames, sentFrame{kind: sfResetStream, id: s.id})
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
			if len(data) == 0 && !fin {
				return b
			}
			if s.send.unsent() <= uint64(c.conf.SendBuffer/2) {
				notify(s.writeReady) // a blocked Write finds half the buffer free
			}
		}
		b = StreamFrame{StreamID: s.id, Offset: off, Data: data, Fin: fin}.Append(b)
		pl.frames = append(pl.frames, sentFrame{kind: sfStream, id: s.id, off: off, n: uint64(len(data)), fin: fin})
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
// §10.2.3); before 1-RTT an application close becomes APPLICATION_ERROR.
func (c *Conn) sendClose() {
	f := *c.closeFrame
	buf := c.sendScratch[:0]
	for si, sp := range c.spaces {
		if sp.seal == nil || sp.discarded {
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
		pnLen := PacketNumberLen(sp.nextPN, sp.largestAcked)
		if need := 4 - pnLen - len(payload); need > 0 {
			payload = append(payload, make([]byte, need)...)
		}
		if si == spaceInitial && c.isClient && len(payload) < minDatagramSize-100 {
			payload = append(payload, make([]byte, minDatagramSize-100-len(payload))...)
		}
		start := len(buf)
		if si == spaceApp {
			buf, _ = AppendShortHeader(buf, ShortHeader{DCID: c.dcid, KeyPhase: c.keyPhase}, sp.nextPN, pnLen)
		} else {
			buf, _ = AppendLongHeader(buf, LongHeader{Type: spacePacketTypes[si], DCID: c.dcid, SCID: c.scid}, sp.nextPN, pnLen, len(payload))
		}
		hl := len(buf) - start
		buf = append(buf, payload...)
		pkt, err := sp.seal.ProtectInPlace(buf[start:], hl, sp.nextPN, 0)
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
		if _, err := c.pconn.WriteTo(buf, c.remote); err == nil {
			c.socketSent += uint64(len(buf))
		}
	}
	select {
	case <-c.closeSent:
	default:
		close(c.closeSent)
	}
}
