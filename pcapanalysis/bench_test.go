package pcapanalysis

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// benchGen writes a synthetic MPTCP capture: `open` connections at a time,
// each two subflows (MP_CAPABLE handshake, MP_JOIN), perConn bytes down in
// 1448-byte segments alternating over the subflows with 8-byte DSN
// mappings, a data ACK every second segment, one reinjection every 1000
// segments, FINs; a finished connection is replaced by a new one, so the
// analyser's state stays bounded by `open` whatever the size.
type benchGen struct {
	w       *bufio.Writer
	t       int64
	step    int64 // capture time between packets, ns
	buf     [1600]byte
	packets int64
	bytes   int64
	conns   int
}

type genConn struct {
	id     int
	keyC   uint64
	keyS   uint64
	idsnS  uint64
	sent   uint64 // data bytes sent down
	total  uint64
	sfSeq  [2]uint32 // next relative server seq per subflow
	step   int
	client [2][4]byte
	cport  [2]uint16
}

var benchServer = [4]byte{198, 18, 200, 1}

func (g *benchGen) pkt(src, dst [4]byte, sp, dp uint16, seq, ack uint32, flags byte, opts []byte, payload int) {
	b := g.buf[:]
	// Ethernet
	copy(b[0:12], []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1})
	b[12], b[13] = 0x08, 0x00
	ip := b[14:]
	olen := (len(opts) + 3) &^ 3
	tl := 20 + 20 + olen + payload
	ip[0], ip[1] = 0x45, 0
	binary.BigEndian.PutUint16(ip[2:], uint16(tl))
	binary.BigEndian.PutUint32(ip[4:], 0x40000000)
	ip[8], ip[9] = 64, 6
	ip[10], ip[11] = 0, 0
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], sp)
	binary.BigEndian.PutUint16(tcp[2:], dp)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	binary.BigEndian.PutUint32(tcp[8:], ack)
	tcp[12] = byte((20+olen)/4) << 4
	tcp[13] = flags
	binary.BigEndian.PutUint16(tcp[14:], 65535)
	tcp[16], tcp[17], tcp[18], tcp[19] = 0, 0, 0, 0
	n := copy(tcp[20:], opts)
	for i := n; i < olen; i++ {
		tcp[20+i] = 0
	}
	clear(tcp[20+olen : 20+olen+payload])
	frame := 14 + tl
	var h [16]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(g.t/1e9))
	binary.LittleEndian.PutUint32(h[4:], uint32(g.t%1e9/1e3))
	binary.LittleEndian.PutUint32(h[8:], uint32(frame))
	binary.LittleEndian.PutUint32(h[12:], uint32(frame))
	g.w.Write(h[:])
	g.w.Write(b[:frame])
	g.t += g.step
	g.packets++
	g.bytes += int64(16 + frame)
}

func tsOpt(o []byte, val, ecr uint32) []byte {
	o = append(o, 1, 1, 8, 10)
	o = binary.BigEndian.AppendUint32(o, val)
	return binary.BigEndian.AppendUint32(o, ecr)
}

// next emits the connection's next packet(s); false when it is finished.
func (g *benchGen) next(c *genConn) bool {
	var o [64]byte
	const mss = 1448
	s := benchServer
	switch c.step {
	case 0:
		g.pkt(c.client[0], s, c.cport[0], 5002, 0, 0, flagSYN, append(tsOpt(o[:0], 1, 0), 30, 4, 0x01, 0x81), 0)
	case 1:
		g.pkt(s, c.client[0], 5002, c.cport[0], 0, 1, flagSYN|flagACK, binary.BigEndian.AppendUint64(append(tsOpt(o[:0], 1, 1), 30, 12, 0x01, 0x81), c.keyS), 0)
	case 2:
		op := append(tsOpt(o[:0], 2, 1), 30, 20, 0x01, 0x81)
		op = binary.BigEndian.AppendUint64(op, c.keyC)
		op = binary.BigEndian.AppendUint64(op, c.keyS)
		g.pkt(c.client[0], s, c.cport[0], 5002, 1, 1, flagACK, op, 0)
	case 3:
		op := append(tsOpt(o[:0], 3, 1), 30, 12, 0x10, 1)
		op = binary.BigEndian.AppendUint32(op, Token(c.keyS))
		op = binary.BigEndian.AppendUint32(op, 99)
		g.pkt(c.client[1], s, c.cport[1], 5002, 0, 0, flagSYN, op, 0)
	case 4:
		op := append(tsOpt(o[:0], 3, 3), 30, 16, 0x10, 0)
		op = binary.BigEndian.AppendUint64(op, 7)
		op = binary.BigEndian.AppendUint32(op, 8)
		g.pkt(s, c.client[1], 5002, c.cport[1], 0, 1, flagSYN|flagACK, op, 0)
	case 5:
		op := append(tsOpt(o[:0], 4, 3), 30, 24, 0x10, 0)
		op = append(op, make([]byte, 20)...)
		g.pkt(c.client[1], s, c.cport[1], 5002, 1, 1, flagACK, op, 0)
	default:
		if c.sent >= c.total {
			for sf := 0; sf < 2; sf++ {
				g.pkt(s, c.client[sf], 5002, c.cport[sf], c.sfSeq[sf], 1, flagFIN|flagACK, tsOpt(o[:0], 9, 9), 0)
				g.pkt(c.client[sf], s, c.cport[sf], 5002, 1, c.sfSeq[sf]+1, flagFIN|flagACK, tsOpt(o[:0], 9, 9), 0)
			}
			return false
		}
		k := c.step - 6
		sf := k & 1
		n := uint64(mss)
		if c.total-c.sent < n {
			n = c.total - c.sent
		}
		dsn := c.idsnS + 1 + c.sent
		if k > 0 && k%1000 == 0 && c.sent >= mss {
			// Reinjection: the previous segment's data again on the other subflow.
			dsn -= mss
			n = mss
		} else {
			c.sent += n
		}
		op := append(tsOpt(o[:0], uint32(k), 5), 30, 22, 0x20, 0x01|0x04|0x08)
		op = binary.BigEndian.AppendUint32(op, 9)
		op = binary.BigEndian.AppendUint64(op, dsn)
		op = binary.BigEndian.AppendUint32(op, c.sfSeq[sf])
		op = binary.BigEndian.AppendUint16(op, uint16(n))
		g.pkt(s, c.client[sf], 5002, c.cport[sf], c.sfSeq[sf], 1, flagACK, op, int(n))
		c.sfSeq[sf] += uint32(n)
		if k&1 == 1 {
			ack := append(tsOpt(o[:0], 5, uint32(k)), 30, 8, 0x20, 0x01)
			ack = binary.BigEndian.AppendUint32(ack, uint32(dsn+n))
			g.pkt(c.client[sf], s, c.cport[sf], 5002, 1, c.sfSeq[sf], flagACK, ack, 0)
		}
	}
	c.step++
	return true
}

func (g *benchGen) newConn(id int, perConn uint64) *genConn {
	c := &genConn{id: id, keyC: uint64(id)*0x9e3779b97f4a7c15 + 1, keyS: uint64(id)*0xbf58476d1ce4e5b9 + 2, total: perConn, sfSeq: [2]uint32{1, 1}}
	c.idsnS = IDSN(c.keyS)
	c.client[0] = [4]byte{198, 18, 1, byte(2 + id%200)}
	c.client[1] = [4]byte{198, 18, 2, byte(2 + id%200)}
	c.cport[0], c.cport[1] = uint16(10000+id%50000), uint16(10000+id%50000)
	g.conns++
	return c
}

// writeBenchCapture writes about size bytes of capture.
func writeBenchCapture(w io.Writer, size int64, open int, perConn uint64) (*benchGen, error) {
	return writeBenchCaptureStep(w, size, open, perConn, 10*time.Microsecond)
}

func writeBenchCaptureStep(w io.Writer, size int64, open int, perConn uint64, step time.Duration) (*benchGen, error) {
	g := &benchGen{w: bufio.NewWriterSize(w, 1<<20), t: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC).UnixNano(), step: int64(step)}
	var hdr [24]byte
	binary.LittleEndian.PutUint32(hdr[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(hdr[4:], 2)
	binary.LittleEndian.PutUint16(hdr[6:], 4)
	binary.LittleEndian.PutUint32(hdr[16:], 65535)
	binary.LittleEndian.PutUint32(hdr[20:], 1)
	g.w.Write(hdr[:])
	cs := make([]*genConn, open)
	id := 0
	for i := range cs {
		id++
		cs[i] = g.newConn(id, perConn)
	}
	for g.bytes < size {
		for i, c := range cs {
			if c == nil {
				continue
			}
			if !g.next(c) {
				cs[i] = nil
				if g.bytes < size {
					id++
					cs[i] = g.newConn(id, perConn)
				}
			}
		}
	}
	// Finish the open ones.
	for _, c := range cs {
		for c != nil && c.sent < c.total {
			c.total = c.sent
		}
		for c != nil && g.next(c) {
		}
	}
	return g, g.w.Flush()
}

func TestBenchCaptureTruth(t *testing.T) {
	// The generator's own truth, on a small capture: every connection
	// found, all data once, the planted reinjections counted.
	path := filepath.Join(t.TempDir(), "b.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := writeBenchCapture(f, 20<<20, 8, 2<<20)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	r, err := AnalyzeFile(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Summary.MPTCP != g.conns || r.Packets != g.packets {
		t.Fatalf("%d connections, %d packets; generated %d, %d", r.Summary.MPTCP, r.Packets, g.conns, g.packets)
	}
	full := 0
	for _, c := range r.Connections {
		if len(c.Subflows) != 2 {
			t.Fatalf("connection %d has %d subflows", c.ID, len(c.Subflows))
		}
		if c.Data[1] == 2<<20 {
			full++
			// k = 1000, 2000, ... of ceil(2 MiB / 1448) + reinjections segments.
			if c.Reinjections[1] != 1 || c.ReinjectedBytes[1] != 1448 {
				t.Errorf("connection %d: %d reinjections, %d bytes; planted 1, 1448", c.ID, c.Reinjections[1], c.ReinjectedBytes[1])
			}
		}
	}
	if full < g.conns-8 {
		t.Errorf("%d of %d connections carried their full 2 MiB", full, g.conns)
	}
}

// TestStateBounded: the analyser's state follows the open connections, not
// the capture: 8 open at a time, 1 ms between packets (closed flows are
// freed after a second of capture time), ~100 connections in all. A
// connection lasts ~270 packets and the 8 interleave, so at most the 8
// open and the 8 before them (closed less than a second ago) are held: at
// no packet more than 32 subflows or 32 tokens (2 per connection), and
// nothing at the end.
func TestStateBounded(t *testing.T) {
	var buf bytes.Buffer
	g, err := writeBenchCaptureStep(&buf, 30<<20, 8, 256<<10, time.Millisecond)
	require.NoError(t, err)
	pr, err := pcapgo.NewReader(&buf)
	require.NoError(t, err)
	a := newAnalyzer(Options{OnConnection: func(*Connection) {}})
	maxFlows, maxTokens := 0, 0
	for {
		data, ci, err := pr.ZeroCopyReadPacketData()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		require.NoError(t, a.packet(linkEthernet, data, ci, func(int) string { return "" }))
		maxFlows, maxTokens = max(maxFlows, len(a.flows)), max(maxTokens, len(a.byToken))
	}
	r := a.finish()
	t.Logf("%d connections, %d packets; at most %d flows and %d tokens held", g.conns, g.packets, maxFlows, maxTokens)
	assert.Greater(t, g.conns, 80)
	assert.Equal(t, g.conns, r.Summary.MPTCP)
	assert.LessOrEqual(t, maxFlows, 4*8)
	assert.LessOrEqual(t, maxTokens, 2*2*8)
	assert.Empty(t, a.flows)
	assert.Empty(t, a.byToken)
	assert.Empty(t, r.Connections, "streamed, not kept")
}

// BenchmarkAnalyze measures analyze throughput on a synthetic capture of
// MPTCP_BENCH_SIZE bytes (default 256 MiB; scripts/bench-analyze uses 1
// GiB and keeps the file in MPTCP_BENCH_FILE for tshark).
func BenchmarkAnalyze(b *testing.B) {
	size := int64(256 << 20)
	if s := os.Getenv("MPTCP_BENCH_SIZE"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		size = v
	}
	open := 64
	if s := os.Getenv("MPTCP_BENCH_OPEN"); s != "" {
		open, _ = strconv.Atoi(s)
	}
	path := os.Getenv("MPTCP_BENCH_FILE")
	if path == "" {
		path = filepath.Join(b.TempDir(), "bench.pcap")
	}
	if st, err := os.Stat(path); err != nil || st.Size() < size {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := writeBenchCapture(f, size, open, 4<<20); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	st, _ := os.Stat(path)
	b.SetBytes(st.Size())
	b.ResetTimer()
	var peak uint64
	for i := 0; i < b.N; i++ {
		done := make(chan struct{})
		go func() {
			var ms runtime.MemStats
			for {
				select {
				case <-done:
					return
				case <-time.After(2 * time.Millisecond):
					runtime.ReadMemStats(&ms)
					peak = max(peak, ms.HeapInuse)
				}
			}
		}()
		n := 0
		_, err := AnalyzeFile(context.Background(), path, Options{OnConnection: func(*Connection) { n++ }})
		close(done)
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			b.Logf("%s: %d bytes, %d connections", path, st.Size(), n)
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
}
