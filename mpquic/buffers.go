package mpquic

// sendBuf is the send side of a byte stream (a STREAM or the CRYPTO stream
// of one packet number space): data written and not yet acknowledged, the
// offset up to which it was sent, and ranges declared lost that go out
// again before new data (RFC 9000 §13.3: data, not packets, is
// retransmitted).
type sendBuf struct {
	base uint64 // everything below is acknowledged
	// ring holds the size bytes from base, starting at head: a ring, so
	// acknowledged data frees room without moving what is still held.
	ring       []byte
	head, size int
	next       uint64   // first offset never sent
	lost       rangeSet // offsets to send again
	acked      rangeSet // acknowledged offsets at or above base

	fin                        bool // no more writes: the final size is end()
	finSent, finLost, finAcked bool
}

func (b *sendBuf) end() uint64    { return b.base + uint64(b.size) }
func (b *sendBuf) unsent() uint64 { return b.end() - b.next }
func (b *sendBuf) allAcked() bool { return b.fin && b.finAcked && b.base == b.end() }
func (b *sendBuf) hasLost() bool  { return len(b.lost) > 0 || b.finLost }
func (b *sendBuf) hasNew() bool   { return b.next < b.end() || (b.fin && !b.finSent) }
func (b *sendBuf) pending() bool  { return b.hasLost() || b.hasNew() }

// write appends p, growing the ring (the one time data moves) if full.
func (b *sendBuf) write(p []byte) {
	if b.size+len(p) > len(b.ring) {
		n := make([]byte, max(2*len(b.ring), b.size+len(p), minRecvBlock))
		if b.size > 0 {
			k := copy(n, b.ring[b.head:min(b.head+b.size, len(b.ring))])
			copy(n[k:b.size], b.ring)
		}
		b.ring, b.head = n, 0
	}
	for len(p) > 0 {
		i := (b.head + b.size) % len(b.ring)
		k := copy(b.ring[i:], p)
		p = p[k:]
		b.size += k
	}
}

// slice is up to n bytes from off (at or above base); shorter where the
// ring wraps.
func (b *sendBuf) slice(off, n uint64) []byte {
	if n == 0 {
		return nil
	}
	i := (b.head + int(off-b.base)) % len(b.ring)
	return b.ring[i : i+int(min(n, uint64(len(b.ring)-i)))]
}

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
		data = b.slice(lo, n)
		n = uint64(len(data))
		if lo+n-1 >= s.hi {
			b.lost = b.lost[1:]
		} else {
			s.lo = lo + n
		}
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
		data = b.slice(off, end-off)
	}
	b.next = off + uint64(len(data))
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
		b.head = (b.head + int(adv)) % len(b.ring)
		b.size -= int(adv)
		b.base += adv
		// Shift in place: re-slicing from the front would shrink the
		// capacity and make the next add allocate (once per ACK).
		b.acked = b.acked[:copy(b.acked, b.acked[1:])]
		if b.size == 0 && b.fin {
			b.ring, b.head = nil, 0 // done: let the memory go
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

func (c chunk) end() uint64 { return c.off + uint64(len(c.data)) }

// recvBlock is the size of the blocks received data is copied into: one
// allocation per 64 KiB, not per frame, and no growing buffer to move.
// The first block is minRecvBlock and each next one twice the last, up to
// recvBlock: a CRYPTO stream or a short stream holds about what it
// received (a half-open connection held 64 KiB for its ClientHello).
const (
	recvBlock    = 64 << 10
	minRecvBlock = 2 << 10
)

// recvBuf reassembles a received byte stream (STREAM or CRYPTO frames in
// any order, overlapping or repeated) into the contiguous bytes the reader
// takes from the front. Each byte is stored once, and pieces that follow
// one another in the stream and in memory are one entry: what a peer can
// make it hold is the bytes flow control lets it send plus one entry per
// gap it leaves (the caller bounds len(chunks), RFC 9000 §21.13).
type recvBuf struct {
	readOff uint64   // offset of the first ready byte
	ready   [][]byte // contiguous data from readOff, in order
	nready  int
	chunks  []chunk // sorted, disjoint, all beyond contiguous()
	highest uint64  // largest offset+length received
	block   []byte  // spare room for copies
	// entries, when set, counts chunks over every buffer that shares it
	// (a connection's streams).
	entries *int
}

func (r *recvBuf) contiguous() uint64 { return r.readOff + uint64(r.nready) }

// readable is how many bytes read can return now.
func (r *recvBuf) readable() int { return r.nready }

// gaps is how many separate pieces are held beyond the contiguous prefix.
func (r *recvBuf) gaps() int { return len(r.chunks) }

// copyIn copies p into the block; when prev ends where the copy starts
// (the last copy into this block) the result is prev extended by p, so
// pieces that arrive in stream order stay one entry.
func (r *recvBuf) copyIn(prev, p []byte) (out []byte, merged bool) {
	if cap(r.block)-len(r.block) < len(p) {
		size := min(max(2*cap(r.block), minRecvBlock), recvBlock)
		r.block = make([]byte, 0, max(size, len(p)))
	}
	start := len(r.block)
	if n := len(prev); n > 0 && n <= start && &prev[n-1] == &r.block[start-1] {
		start, merged = start-n, true
	}
	r.block = append(r.block, p...)
	return r.block[start:len(r.block):len(r.block)], merged
}

func (r *recvBuf) appendReady(p []byte) {
	if len(p) > 0 {
		r.ready = append(r.ready, p)
		r.nready += len(p)
	}
}

// appendReadyCopy copies p after the ready data, into the last ready
// entry when it was the last copy.
func (r *recvBuf) appendReadyCopy(p []byte) {
	var prev []byte
	if k := len(r.ready); k > 0 {
		prev = r.ready[k-1]
	}
	q, merged := r.copyIn(prev, p)
	if merged {
		r.ready[len(r.ready)-1] = q
		r.nready += len(p)
		return
	}
	r.appendReady(q)
}

func (r *recvBuf) setChunks(c []chunk) {
	if r.entries != nil {
		*r.entries += len(c) - len(r.chunks)
	}
	r.chunks = c
}

// push stores a copy of the bytes of data at off not held yet.
func (r *recvBuf) push(off uint64, data []byte) {
	end := off + uint64(len(data))
	if end > r.highest {
		r.highest = end
	}
	cont := r.contiguous()
	if end <= cont {
		return
	}
	if off < cont {
		data, off = data[cont-off:], cont
	}
	if off > cont {
		r.insert(off, data)
		return
	}
	r.appendReadyCopy(data)
	i := 0
	for i < len(r.chunks) {
		c := r.chunks[i]
		end = r.contiguous()
		if c.off > end {
			break
		}
		if c.end() > end {
			r.appendReady(c.data[end-c.off:])
		}
		i++
	}
	if i > 0 {
		r.setChunks(r.chunks[i:])
	}
}

// insert stores the parts of data at off (beyond contiguous()) that no
// chunk holds, merging a part into the chunk before it where they touch
// in memory too.
func (r *recvBuf) insert(off uint64, data []byte) {
	cs := r.chunks
	// i: the first chunk that ends after off.
	i := len(cs)
	for i > 0 && cs[i-1].end() > off {
		i--
	}
	for len(data) > 0 {
		if i < len(cs) && cs[i].off <= off {
			skip := cs[i].end() - off
			if skip >= uint64(len(data)) {
				break
			}
			data, off = data[skip:], off+skip
			i++
			continue
		}
		n := uint64(len(data))
		if i < len(cs) {
			n = min(n, cs[i].off-off)
		}
		var prev []byte
		if i > 0 && cs[i-1].end() == off {
			prev = cs[i-1].data
		}
		q, merged := r.copyIn(prev, data[:n])
		if merged {
			cs[i-1].data = q
		} else {
			cs = append(cs, chunk{})
			copy(cs[i+1:], cs[i:])
			cs[i] = chunk{off, q}
			if r.entries != nil {
				*r.entries++
			}
			i++
		}
		data, off = data[n:], off+n
	}
	r.chunks = cs
}

// read copies ready bytes into p.
func (r *recvBuf) read(p []byte) int {
	n, i := 0, 0
	for n < len(p) && i < len(r.ready) {
		k := copy(p[n:], r.ready[i])
		n += k
		if k == len(r.ready[i]) {
			i++
		} else {
			r.ready[i] = r.ready[i][k:]
		}
	}
	clear(r.ready[:i])
	if i == len(r.ready) {
		r.ready = r.ready[:0] // keeps the capacity for the next appends
	} else {
		r.ready = r.ready[i:]
	}
	r.nready -= n
	r.readOff += uint64(n)
	if r.nready == 0 && len(r.chunks) == 0 {
		// Nothing refers to the block any more (read copies out): the
		// next frames reuse it from its start, so a reader that keeps
		// up costs no allocation per block (it was 64 KiB per 64 KiB
		// received, the receiver's largest allocation).
		r.block = r.block[:0]
	}
	return n
}

// discard drops everything buffered (a reset or canceled stream).
func (r *recvBuf) discard() {
	r.setChunks(nil)
	r.ready, r.nready, r.block = nil, 0, nil
}
