package mpquic

import (
	"bytes"
	"crypto/tls"
	"errors"
	"math/rand/v2"
	"testing"
)

// Random overlapping, repeated and out-of-order pieces of a stream, read
// in random sizes, give back the stream exactly.
func TestRecvBufReassembly(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := 0; round < 50; round++ {
		data := testData(200_000+rng.IntN(100_000), byte(round))
		var r recvBuf
		var got []byte
		for r.contiguous() < uint64(len(data)) {
			off := rng.IntN(len(data))
			if rng.IntN(3) == 0 {
				off = int(r.contiguous()) // keep progressing
			}
			n := min(1+rng.IntN(3000), len(data)-off)
			r.push(uint64(off), data[off:off+n])
			if rng.IntN(4) == 0 {
				p := make([]byte, rng.IntN(5000))
				got = append(got, p[:r.read(p)]...)
			}
		}
		for r.readable() > 0 {
			p := make([]byte, 4096)
			got = append(got, p[:r.read(p)]...)
		}
		if !bytes.Equal(got, data) || r.readOff != uint64(len(data)) || r.highest != uint64(len(data)) {
			t.Fatalf("round %d: %d of %d bytes back, equal prefix %d", round, len(got), len(data), commonPrefix(got, data))
		}
	}
}

// The send side: data lost and acknowledged in any order is sent again
// until every byte was acknowledged once, and the buffer is then empty.
func TestSendBufLossAndAck(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var b sendBuf
	data := testData(100_000, 9)
	written := 0
	write := func() { // in pieces, so the ring wraps and grows
		if written < len(data) {
			k := min(len(data)-written, 1+rng.IntN(7000))
			b.write(data[written : written+k])
			written += k
			if written == len(data) {
				b.fin = true
			}
		}
	}
	type piece struct {
		off, n uint64
		fin    bool
	}
	var inflight []piece
	for !b.allAcked() {
		if rng.IntN(3) == 0 {
			write()
		}
		if b.pending() && rng.IntN(2) == 0 {
			off, d, fin, ok := b.popLost(1200)
			if !ok {
				off, d, fin = b.popNew(1200, 1<<62)
			}
			if !bytes.Equal(d, data[off:off+uint64(len(d))]) {
				t.Fatalf("popped bytes at %d differ", off)
			}
			inflight = append(inflight, piece{off, uint64(len(d)), fin})
			continue
		}
		if len(inflight) == 0 {
			write()
			continue
		}
		i := rng.IntN(len(inflight))
		p := inflight[i]
		inflight = append(inflight[:i], inflight[i+1:]...)
		if rng.IntN(4) == 0 {
			b.onLost(p.off, p.n, p.fin)
		} else {
			b.onAck(p.off, p.n, p.fin)
		}
	}
	if b.size != 0 || b.base != uint64(len(data)) {
		t.Fatalf("all acknowledged but %d bytes kept, base %d", b.size, b.base)
	}
}

// A byte sent again and again beyond a gap is held once, pieces that
// follow one another are one entry, and single bytes in order that nobody
// reads are one entry per block, not one per frame (RFC 9000 §21.13).
func TestRecvBufHoldsEachByteOnce(t *testing.T) {
	var r recvBuf
	for range 100_000 {
		r.push(10, []byte{1})
	}
	if r.gaps() != 1 || len(r.block) != 1 {
		t.Fatalf("one byte pushed 100,000 times: %d pieces, %d bytes copied", r.gaps(), len(r.block))
	}
	for off := uint64(11); off < 20_000; off++ {
		r.push(off, []byte{byte(off)})
	}
	if r.gaps() > 5 { // one per block: 2, 4, 8, 16 KiB, ...
		t.Fatalf("bytes 10..19999 pushed in order beyond a gap: %d pieces", r.gaps())
	}
	r.push(5, []byte{0, 0, 0, 0, 0, 0, 0}) // overlaps the first piece
	for off := uint64(0); off < 5; off++ {
		r.push(off, []byte{0})
	}
	if r.gaps() != 0 || r.readable() != 20_000 {
		t.Fatalf("gap filled: %d pieces left, %d readable", r.gaps(), r.readable())
	}
	var q recvBuf
	for off := uint64(0); off < 300_000; off++ {
		q.push(off, []byte{byte(off)})
	}
	if len(q.ready) > 300_000/recvBlock+6 {
		t.Fatalf("300,000 bytes in order, unread: %d entries", len(q.ready))
	}
	p := make([]byte, 300_000)
	if n := q.read(p); n != len(p) || p[299_999] != byte(299_999%256) {
		t.Fatalf("read %d bytes back", n)
	}
}

// A peer that leaves a gap before every byte is closed with
// PROTOCOL_VIOLATION once a stream holds more pieces than its limit, and
// so is one that spreads them over streams past the connection's limit;
// the count follows what the streams hold.
func TestStreamGapLimits(t *testing.T) {
	conf, _ := (&Config{StreamReceiveWindow: 64 << 10, ConnectionReceiveWindow: 256 << 10}).withDefaults()
	newServer := func() *Conn {
		c := newConn(false, nil, nil, conf, &tls.Config{})
		c.peerParams = DefaultTransportParameters()
		return c
	}
	c := newServer()
	sl, cl := c.gapLimits()
	var err error
	n := 0
	for ; err == nil && n < 10*sl; n++ {
		err = c.handleStreamFrame(StreamFrame{StreamID: 0, Offset: uint64(10 + 2*n), Data: []byte{1}})
	}
	var te *TransportError
	if !errors.As(err, &te) || te.Code != ProtocolViolation || n != sl+1 {
		t.Fatalf("after %d fragments: %v, want PROTOCOL_VIOLATION after %d", n, err, sl+1)
	}

	c = newServer()
	err = nil
	n = 0
	for ; err == nil && n < 10*cl; n++ {
		id := uint64(n%50) * 4
		err = c.handleStreamFrame(StreamFrame{StreamID: id, Offset: uint64(10 + 2*(n/50)), Data: []byte{1}})
	}
	if !errors.As(err, &te) || te.Code != ProtocolViolation || n != cl+1 {
		t.Fatalf("over 50 streams, after %d fragments: %v, want PROTOCOL_VIOLATION after %d", n, err, cl+1)
	}
	// Resetting a stream lets its pieces go from the count.
	c = newServer()
	for i := range 10 {
		if err := c.handleStreamFrame(StreamFrame{StreamID: 0, Offset: uint64(10 + 2*i), Data: []byte{1}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.handleStreamFrame(ResetStreamFrame{StreamID: 0, ErrorCode: 1, FinalSize: 100}); err != nil {
		t.Fatal(err)
	}
	if c.recvGaps != 0 {
		t.Fatalf("after the reset %d pieces are still counted", c.recvGaps)
	}
}
