//go:build !race

package mpquic

import (
	"context"
	"io"
	"runtime"
	"testing"
	"time"
)

// TestUploadAllocationsPerPacket bounds the heap allocations of a bulk
// upload between two mpquic endpoints in this process, both ends counted,
// per packet sent: the per-packet work that bounds loopback goodput
// (docs/benchmarks.md). A data packet costs its sent record with its frames (one
// allocation); its decoding, ACKs, block copies and range bookkeeping
// should cost nothing per packet (what is left, ~0.3, is ACK frames and
// timers). Before the record and its frames were one allocation, the
// received blocks reused, STREAM frames unboxed and the frame slice and
// acked ranges kept, it was 5.5 per packet.
// Not under -race, whose instrumentation allocates.
func TestUploadAllocationsPerPacket(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stls, ctls := testTLS(t)
	conf := &Config{MaxDatagramSize: maxDatagramSize}
	l := listenLoopback(t, stls, conf)
	go serveEach(ctx, l.Accept, (*Conn).AcceptStream, func(s *Stream) { sink(s) })
	c, err := DialAddr(ctx, l.Addr().String(), ctls, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	data := testData(16<<20, 3)
	up := func() {
		s, err := c.OpenStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write(data); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if n, err := io.ReadFull(s, make([]byte, 1)); n != 1 {
			t.Fatal(err)
		}
	}
	up() // windows open, buffers grown
	var m0, m1 runtime.MemStats
	p0 := c.Stats().PacketsSent
	runtime.ReadMemStats(&m0)
	for range 3 {
		up()
	}
	runtime.ReadMemStats(&m1)
	pkts := c.Stats().PacketsSent - p0
	perPkt := float64(m1.Mallocs-m0.Mallocs) / float64(pkts)
	t.Logf("%d packets, %d allocations: %.2f per packet", pkts, m1.Mallocs-m0.Mallocs, perPkt)
	if pkts < 3*uint64(len(data))/maxDatagramSize {
		t.Fatalf("only %d packets for %d bytes", pkts, 3*len(data))
	}
	if perPkt > 2 {
		t.Errorf("%.2f allocations per packet sent, want at most 2", perPkt)
	}
}

// TestRecvBufReusesDrainedBlock: a reader that keeps up frees the block
// for the next frames, so receiving costs no allocation per block.
func TestRecvBufReusesDrainedBlock(t *testing.T) {
	var r recvBuf
	p := make([]byte, recvBlock)
	out := make([]byte, recvBlock)
	off := uint64(0)
	step := func() {
		r.push(off, p)
		off += uint64(len(p))
		if n := r.read(out); n != len(p) {
			t.Fatalf("read %d of %d", n, len(p))
		}
	}
	for range 8 {
		step() // the block grows to recvBlock
	}
	if a := testing.AllocsPerRun(50, step); a != 0 {
		t.Errorf("%v allocations per drained %d-byte frame, want 0", a, len(p))
	}
}

// TestSendBufInOrderAckDoesNotAllocate: acknowledging the front of the
// stream, the usual case, keeps the acked ranges' storage.
func TestSendBufInOrderAckDoesNotAllocate(t *testing.T) {
	var b sendBuf
	chunk := make([]byte, 1200)
	for range 64 {
		b.write(chunk)
	}
	off := uint64(0)
	// One piece out of order first, so the ranges are in use.
	b.onAck(off+1200, 1200, false)
	step := func() {
		b.write(chunk)
		b.onAck(off, 1200, false)
		off += 1200
		b.onAck(off+1200, 1200, false)
	}
	if a := testing.AllocsPerRun(200, step); a != 0 {
		t.Errorf("%v allocations per in-order ACK, want 0", a)
	}
}
