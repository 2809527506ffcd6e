package mpquic

// sendBuf is the send side of a byte stream (a STREAM or the CRYPTO stream
// of one packet number space): data written and not yet acknowledged, the
// offset up to which it was sent, and ranges declared lost that go out
// again before new data (RFC 9000 §13.3: data, not packets, is
// retransmitted).
type sendBuf struct {
	base  uint64 // offset of buf[0]; everything below is acknowledged
	buf   []byte
	next  uint64   // first offset never sent
	lost  rangeSet // offsets to send again
	acked rangeSet // acknowledged offsets at or above base

	fin                        bool // no more writes: the final size is end()
	finSent, finLost, finAcked bool
}

func (b *sendBuf) end() uint64      { return b.base + uint64(len(b.buf)) }
func (b *sendBuf) unsent() uint64   { return b.end() - b.next }
func (b *sendBuf) write(p []byte)   { b.buf = append(b.buf, p...) }
func (b *sendBuf) allAcked() bool   { return b.fin && b.finAcked && b.base == b.end() }
func (b *sendBuf) hasLost() bool    { return len(b.lost) > 0 || b.finLost }
func (b *sendBuf) hasNew() bool     { return b.next < b.end() || (b.fin && !b.finSent) }
func (b *sendBuf) pending() bool    { return b.hasLost() || b.hasNew() }
func (b *sendBuf) inFlight() uint64 { return b.next - b.base }

// popLost returns up to max bytes of lost data to send again; fin is set
// when the chunk ends at the final size and the FIN is to be resent.
func (b *sendBuf) popLost(max int) (off uint64, data []byte, fin bool, ok bool) {
	for len(b.lost) > 0 {
		s := &b.lost[0]
		if s.hi < b.base {
			b.lost = b.lost[1:]
			continue
		}
		lo := max64(s.lo, b.base)
		n := s.hi - lo + 1
		if n > uint64(max) {
			n = uint64(max)
		}
		if lo+n-1 >= s.hi {
			b.lost = b.lost[1:]
		} else {
			s.lo = lo + n
		}
		data = b.buf[lo-b.base : lo-b.base+n]
		fin = b.finLost && b.fin && lo+n == b.end()
		if fin {
			b.finLost = false
		}
		return lo, data, fin, true
	}
	if b.finLost {
		b.finLost = false
		return b.end(), nil, true, true
	}
	return 0, nil, false, false
}

// popNew returns up to max new bytes below limit (flow control).
func (b *sendBuf) popNew(max int, limit uint64) (off uint64, data []byte, fin bool) {
	off = b.next
	end := min(b.end(), limit, off+uint64(max))
	if end > off {
		data = b.buf[off-b.base : end-b.base]
	}
	b.next = max64(end, off)
	if b.fin && !b.finSent && b.next == b.end() {
		b.finSent, fin = true, true
	}
	return off, data, fin
}

func (b *sendBuf) onAck(off, n uint64, fin bool) {
	if fin {
		b.finAcked = true
	}
	if n == 0 || off+n <= b.base {
		return
	}
	b.acked.add(max64(off, b.base), off+n-1)
	if len(b.acked) > 0 && b.acked[0].lo == b.base {
		adv := b.acked[0].hi + 1 - b.base
		b.buf = b.buf[adv:]
		b.base += adv
		b.acked = b.acked[1:]
		if len(b.buf) == 0 {
			b.buf = b.buf[:0:0] // let the old array go
		}
	}
}

func (b *sendBuf) onLost(off, n uint64, fin bool) {
	if fin && !b.finAcked {
		b.finLost = true
	}
	if n == 0 || off+n <= b.base {
		return
	}
	lo, hi := max64(off, b.base), off+n-1
	// Only the parts not acknowledged since.
	for _, a := range b.acked {
		if a.hi < lo {
			continue
		}
		if a.lo > hi {
			break
		}
		if a.lo > lo {
			b.lost.add(lo, a.lo-1)
		}
		lo = a.hi + 1
	}
	if lo <= hi {
		b.lost.add(lo, hi)
	}
}

func max64(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// chunk is received data beyond the contiguous prefix.
type chunk struct {
	off  uint64
	data []byte
}

// recvBuf reassembles a received byte stream (STREAM or CRYPTO frames in
// any order, overlapping or repeated) into the contiguous bytes the reader
// takes from the front.
type recvBuf struct {
	readOff uint64 // offset of ready[0]
	ready   []byte
	chunks  []chunk // sorted by offset, all beyond readOff+len(ready)
	highest uint64  // largest offset+length received
}

func (r *recvBuf) contiguous() uint64 { return r.readOff + uint64(len(r.ready)) }

// push stores a copy of data at off.
func (r *recvBuf) push(off uint64, data []byte) {
	if e := off + uint64(len(data)); e > r.highest {
		r.highest = e
	}
	end := r.contiguous()
	if off+uint64(len(data)) <= end {
		return
	}
	if off > end {
		i := len(r.chunks)
		for i > 0 && r.chunks[i-1].off > off {
			i--
		}
		r.chunks = append(r.chunks, chunk{})
		copy(r.chunks[i+1:], r.chunks[i:])
		r.chunks[i] = chunk{off, append([]byte(nil), data...)}
		return
	}
	r.ready = append(r.ready, data[end-off:]...)
	for len(r.chunks) > 0 {
		c := r.chunks[0]
		end = r.contiguous()
		if c.off > end {
			break
		}
		if ce := c.off + uint64(len(c.data)); ce > end {
			r.ready = append(r.ready, c.data[end-c.off:]...)
		}
		r.chunks = r.chunks[1:]
	}
}

// read copies ready bytes into p.
func (r *recvBuf) read(p []byte) int {
	n := copy(p, r.ready)
	r.ready = r.ready[n:]
	r.readOff += uint64(n)
	if len(r.ready) == 0 {
		r.ready = r.ready[:0:0]
	}
	return n
}
