package mpquic

import (
	"bytes"
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
