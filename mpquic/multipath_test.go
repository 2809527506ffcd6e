package mpquic

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// faultConn is fault injection for one path's socket: while blackholed it
// drops every datagram both ways, as a link that went away does.
type faultConn struct {
	net.PacketConn
	black atomic.Bool
}

func (f *faultConn) WriteTo(b []byte, to net.Addr) (int, error) {
	if f.black.Load() {
		return len(b), nil
	}
	return f.PacketConn.WriteTo(b, to)
}

func (f *faultConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, from, err := f.PacketConn.ReadFrom(b)
		if err != nil || !f.black.Load() {
			return n, from, err
		}
	}
}

// shapedConn is an emulated bottleneck on a socket's sending side:
// datagrams leave at rate bits/s through a queue of at most queue
// datagrams, and a full queue drops (as a router's does).
type shapedConn struct {
	net.PacketConn
	q     chan shapedDatagram
	done  chan struct{}
	drops atomic.Uint64 // datagrams the full queue dropped
}

type shapedDatagram struct {
	b  []byte
	to net.Addr
}

func newShapedConn(t *testing.T, rate float64, queue int) *shapedConn {
	s := &shapedConn{PacketConn: udpLoopback(t), q: make(chan shapedDatagram, queue), done: make(chan struct{})}
	t.Cleanup(func() { close(s.done) })
	go func() {
		next := time.Now()
		for {
			select {
			case d := <-s.q:
				if w := time.Until(next); w > 0 {
					time.Sleep(w)
				}
				s.PacketConn.WriteTo(d.b, d.to)
				next = maxTime(next, time.Now().Add(-time.Millisecond)).Add(time.Duration(float64(len(d.b)*8) / rate * float64(time.Second)))
			case <-s.done:
				return
			}
		}
	}()
	return s
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (s *shapedConn) WriteTo(b []byte, to net.Addr) (int, error) {
	select {
	case s.q <- shapedDatagram{append([]byte(nil), b...), to}:
	default: // queue full: dropped
		s.drops.Add(1)
	}
	return len(b), nil
}

func udpLoopback(t *testing.T) net.PacketConn {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}

// mpPair is a server with an echo handler and a client connection from
// socket a; accepted holds the server's side.
type mpPair struct {
	ctls     *tls.Config
	l        *Listener
	c        *Conn
	accepted chan *Conn
}

func newMPPair(t *testing.T, ctx context.Context, a net.PacketConn, sconf, cconf *Config) *mpPair {
	t.Helper()
	stls, ctls := testTLS(t)
	l := listenLoopback(t, stls, sconf)
	mp := &mpPair{ctls: ctls, l: l, accepted: make(chan *Conn, 1)}
	accept := func(ctx context.Context) (*Conn, error) {
		c, err := l.Accept(ctx)
		if err == nil {
			select {
			case mp.accepted <- c:
			default:
			}
		}
		return c, err
	}
	go serveEach(ctx, accept, (*Conn).AcceptStream, func(s *Stream) {
		io.Copy(s, s)
		s.Close()
	})
	c, err := Dial(ctx, a, l.Addr(), ctls, cconf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseWithError(0, "") })
	mp.c = c
	return mp
}

func (mp *mpPair) open(ctx context.Context) (io.ReadWriteCloser, error) { return mp.c.OpenStream(ctx) }

func (mp *mpPair) server(t *testing.T) *Conn {
	t.Helper()
	select {
	case c := <-mp.accepted:
		mp.accepted <- c
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("server accepted no connection")
		return nil
	}
}

func pathStat(t *testing.T, c *Conn, id uint32) PathStats {
	t.Helper()
	for _, s := range c.PathStats() {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("no path %d in %v", id, c.PathStats())
	return PathStats{}
}

func TestMultipathNegotiation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Run("both", func(t *testing.T) {
		mp := newMPPair(t, ctx, udpLoopback(t), nil, nil)
		if !mp.c.Multipath() || !mp.server(t).Multipath() {
			t.Fatalf("multipath client %v server %v", mp.c.Multipath(), mp.server(t).Multipath())
		}
	})
	t.Run("client disabled", func(t *testing.T) {
		mp := newMPPair(t, ctx, udpLoopback(t), nil, &Config{DisableMultipath: true})
		if mp.c.Multipath() || mp.server(t).Multipath() {
			t.Fatal("multipath with one side not offering it")
		}
		if _, err := mp.c.AddPath(ctx, udpLoopback(t), mp.l.Addr()); !errors.Is(err, ErrNoMultipath) {
			t.Fatalf("AddPath: %v", err)
		}
		exchange(t, ctx, mp.open, testData(1<<20, 9))
	})
	t.Run("quic-go server", func(t *testing.T) {
		stls, ctls := testTLS(t)
		addr := quicgoEchoServer(t, ctx, stls)
		c, err := Dial(ctx, udpLoopback(t), addr, ctls, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseWithError(0, "")
		if c.Multipath() {
			t.Fatal("multipath with quic-go")
		}
		if _, err := c.AddPath(ctx, udpLoopback(t), addr); !errors.Is(err, ErrNoMultipath) {
			t.Fatalf("AddPath: %v", err)
		}
		exchange(t, ctx, func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStream(ctx) }, testData(1<<20, 8))
	})
	t.Run("quic-go client", func(t *testing.T) {
		stls, ctls := testTLS(t)
		l := listenLoopback(t, stls, nil)
		got := make(chan *Conn, 1)
		go func() {
			c, err := l.Accept(ctx)
			if err == nil {
				got <- c
				echoConn(ctx, c)
			}
		}()
		c, err := quic.DialAddr(ctx, l.Addr().String(), ctls, &quic.Config{MaxIdleTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseWithError(0, "")
		exchange(t, ctx, func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStreamSync(ctx) }, testData(1<<20, 7))
		if (<-got).Multipath() {
			t.Fatal("multipath with quic-go")
		}
	})
}

func echoConn(ctx context.Context, c *Conn) {
	for {
		s, err := c.AcceptStream(ctx)
		if err != nil {
			return
		}
		go func() {
			io.Copy(s, s)
			s.Close()
		}()
	}
}

// Two client sockets, each behind an emulated 40 Mbit/s bottleneck, to one
// server: a bulk echo arrives byte for byte and both paths carry a real
// share of the upload (the scheduler fills the lower-RTT path's window,
// then the other's).
func TestMultipathTwoPathsBulk(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	shaped := []*shapedConn{newShapedConn(t, 40e6, 100), newShapedConn(t, 40e6, 100)}
	// Both sides' traces say which packets the server declared lost and
	// which of them the client received.
	sink := &qlogSink{traces: map[bool]*bytes.Buffer{}, closed: map[bool]bool{}}
	conf := &Config{Qlog: sink.open}
	mp := newMPPair(t, ctx, shaped[0], conf, conf)
	p, err := mp.c.AddPath(ctx, shaped[1], mp.l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if p.ID() != 1 {
		t.Fatalf("path ID %d", p.ID())
	}
	const size = 8 << 20
	start := time.Now()
	exchange(t, ctx, mp.open, testData(size, 11))
	t.Logf("%d MiB echoed in %v (upload limited to 2 x 40 Mbit/s)", size>>20, time.Since(start))
	for _, c := range []*Conn{mp.c} {
		var total uint64
		st := c.PathStats()
		if len(st) != 2 {
			t.Fatalf("%d paths: %v", len(st), st)
		}
		for _, s := range st {
			total += s.BytesSent
		}
		for _, s := range st {
			t.Logf("client %v: %v", c.isClient, s)
			if !s.Validated || s.BytesSent < total/4 {
				t.Errorf("client %v: path %d sent %d of %d bytes (validated %v)", c.isClient, s.ID, s.BytesSent, total, s.Validated)
			}
		}
		if total < size {
			t.Errorf("%d bytes sent for a %d-byte transfer", total, size)
		}
		// Losses are the shapers' drops, path by path (ground truth).
		for _, s := range st {
			d := shaped[s.ID].drops.Load()
			t.Logf("path %d: %d declared lost, %d dropped by its shaper", s.ID, s.PacketsLost, d)
			if float64(s.PacketsLost) > 1.5*float64(d)+5 {
				t.Errorf("path %d declared %d packets lost, its shaper dropped %d", s.ID, s.PacketsLost, d)
			}
		}
	}
	// The echo comes back over unshaped loopback: nothing drops it but
	// the kernel, at a client socket whose buffer its starved reader let
	// fill (a loaded host under -race).
	srv := mp.server(t)
	srvStats := srv.PathStats()
	rxDropped := mp.c.Stats().DatagramsDropped
	evs := closedTraces(t, sink, mp.c, srv)
	for _, s := range srvStats {
		drops, ok := socketDrops(t, shaped[s.ID].PacketConn)
		if !ok {
			checkCleanPath(t, "server", s)
			continue
		}
		checkCleanPathTruth(t, "server", s, lossesOnPath(evs[false], evs[true], s.ID), drops+rxDropped)
	}
}

// closedTraces closes the connection, waits for both sides to end and
// returns their qlog events by isClient.
func closedTraces(t *testing.T, sink *qlogSink, c, srv *Conn) map[bool][]qlogEvent {
	t.Helper()
	c.CloseWithError(0, "done")
	for _, x := range []*Conn{c, srv} {
		select {
		case <-x.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("connection did not end")
		}
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	out := map[bool][]qlogEvent{}
	for _, isClient := range []bool{true, false} {
		if !sink.closed[isClient] {
			t.Fatalf("client %v: trace not closed", isClient)
		}
		_, out[isClient] = parseQlog(t, sink.traces[isClient].Bytes())
	}
	return out
}

// lossTruth is what a receiver saw of the packets its peer declared lost
// on one path: received (the declaration was spurious) or never.
type lossTruth struct{ declared, spurious, neverArrived int }

// lossesOnPath reads the 1-RTT packets the sender declared lost on path
// pid and those the receiver got on it from their traces.
func lossesOnPath(sender, receiver []qlogEvent, pid uint32) lossTruth {
	onPath := func(e qlogEvent) bool {
		return e.Data.Header.PacketType == "1RTT" && e.Data.Header.PathID != nil && *e.Data.Header.PathID == pid
	}
	got := map[uint64]bool{}
	for _, e := range receiver {
		if e.Name == "transport:packet_received" && onPath(e) {
			got[e.Data.Header.PacketNumber] = true
		}
	}
	var lt lossTruth
	for _, e := range sender {
		if e.Name == "recovery:packet_lost" && onPath(e) {
			lt.declared++
			if got[e.Data.Header.PacketNumber] {
				lt.spurious++
			} else {
				lt.neverArrived++
			}
		}
	}
	return lt
}

// checkCleanPathTruth: on a path nothing drops but the receiving host
// (drops: the kernel's count at its socket plus its own input queue's), a
// packet declared lost that never arrived is one of those drops, and a
// declaration is spurious only when a packet's acknowledgment came
// later than the loss delay (9/8 of the RTT, RFC 9002 §6.1.2) after a
// later packet's: on in-order loopback, never.
func checkCleanPathTruth(t *testing.T, side string, s PathStats, lt lossTruth, drops uint64) {
	t.Helper()
	t.Logf("%s: clean path %d declared %d of %d packets lost (MTU probes included): %d never arrived (the receiving host dropped %d), %d spurious",
		side, s.ID, lt.declared, s.PacketsSent, lt.neverArrived, drops, lt.spurious)
	if uint64(lt.neverArrived) > drops {
		t.Errorf("%s: clean path %d: %d packets declared lost never arrived, the receiving host dropped only %d", side, s.ID, lt.neverArrived, drops)
	}
	if lt.spurious > 0 {
		t.Errorf("%s: clean path %d: %d packets declared lost were received", side, s.ID, lt.spurious)
	}
}

// checkCleanPath, where the kernel's drop count cannot be read: a path
// whose datagrams nothing drops declares (almost) no losses. On loopback
// the only drops left are a full socket buffer, which the receiver's
// blocking read and 4 MiB buffers make rare; 0.5% plus 2 leaves room for
// a reader starved under -race.
func checkCleanPath(t *testing.T, side string, s PathStats) {
	t.Helper()
	if float64(s.PacketsLost) > 0.005*float64(s.PacketsSent)+2 {
		t.Errorf("%s: clean path %d declared %d of %d packets lost", side, s.ID, s.PacketsLost, s.PacketsSent)
	}
}

// streamThrough echoes data on a new stream of c; after readBefore bytes
// came back it calls mid (once), then checks the echo byte for byte.
func streamThrough(t *testing.T, ctx context.Context, c *Conn, data []byte, readBefore int, mid func()) {
	t.Helper()
	echo(t, ctx, func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStream(ctx) }, data, readBefore, mid)
}

// A backup path carries (almost) nothing while the primary works; when the
// primary's socket is blackholed mid-stream the stream continues on the
// backup, byte for byte.
func TestMultipathBackup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	primary := &faultConn{PacketConn: udpLoopback(t)}
	// The client's receive window keeps the echo paced by its reader, so
	// most of it is still to come when the primary goes dark (with the
	// default 6 MiB the whole echo could already be here).
	mp := newMPPair(t, ctx, primary, nil, &Config{StreamReceiveWindow: 256 << 10, ConnectionReceiveWindow: 512 << 10})
	p, err := mp.c.AddPathStatus(ctx, udpLoopback(t), mp.l.Addr(), PathBackup)
	if err != nil {
		t.Fatal(err)
	}
	srv := mp.server(t)
	deadline := time.Now().Add(5 * time.Second)
	// Both sides validated the path (the server's PATH_CHALLENGE and the
	// client's PATH_RESPONSE are 1200-byte datagrams on it) and the server
	// knows it is a backup.
	for s := pathStat(t, srv, 1); s.Status != PathBackup || !s.Validated; s = pathStat(t, srv, 1) {
		if time.Now().After(deadline) {
			t.Fatal("the server never saw PATH_STATUS_BACKUP or never validated the path")
		}
		time.Sleep(5 * time.Millisecond)
	}
	c0, s0 := pathStat(t, mp.c, 1), pathStat(t, srv, 1)
	ptos0 := pathStat(t, mp.c, 0).PTOCount + pathStat(t, srv, 0).PTOCount
	exchange(t, ctx, mp.open, testData(4<<20, 12))
	c1, s1 := pathStat(t, mp.c, 1), pathStat(t, srv, 1)
	total := pathStat(t, mp.c, 0).BytesSent + pathStat(t, srv, 0).BytesSent
	backup := (c1.BytesSent - c0.BytesSent) + (s1.BytesSent - s0.BytesSent)
	ptos := pathStat(t, mp.c, 0).PTOCount + pathStat(t, srv, 0).PTOCount - ptos0
	t.Logf("while the primary works: backup %d bytes, primary %d; primary PTOs %d", backup, total, ptos)
	// A PTO on the primary (a loaded machine starving a side for a PTO,
	// ~30 ms here) can mark it potentially failed and move data to the
	// backup, as it should; without one the backup carries nothing but
	// its own acknowledgments.
	if limit := 1000 + ptos*total/100; backup > limit { // 1% of the transfer per PTO
		t.Fatalf("the backup path carried %d bytes while the primary carried %d with %d PTOs", backup, total, ptos)
	}
	data := testData(4<<20, 13)
	streamThrough(t, ctx, mp.c, data, 1<<20, func() { primary.black.Store(true) })
	c2, s2 := pathStat(t, mp.c, 1), pathStat(t, srv, 1)
	t.Logf("after the primary failed: client %v; server %v", c2, s2)
	// At least 2.7 MiB of the echo was still to come when the primary went
	// dark (read 1 MiB, at most 512 KiB granted beyond; the client's upload
	// may have been complete by then).
	if s2.BytesSent-s1.BytesSent < 2<<20 {
		t.Fatalf("the backup carried %d up and %d down after the primary failed", c2.BytesSent-c1.BytesSent, s2.BytesSent-s1.BytesSent)
	}
	// The server was sending the echo on the primary when it went dark (the
	// client's upload may have been complete, leaving it nothing to time out).
	if !pathStat(t, srv, 0).PotentiallyFailed {
		t.Error("the blackholed primary is not marked potentially failed at the server")
	}
	// PATH_STATUS_AVAILABLE turns it back (the newer sequence number wins).
	if err := p.SetStatus(PathAvailable); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for pathStat(t, srv, 1).Status != PathAvailable {
		if time.Now().After(deadline) {
			t.Fatal("the server never saw PATH_STATUS_AVAILABLE")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A path abandoned by either side is cleaned up on both (its state
// discarded after 3 PTOs), and the connection goes on over the other.
func TestMultipathAbandon(t *testing.T) {
	for _, side := range []string{"client", "server"} {
		t.Run(side, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			mp := newMPPair(t, ctx, udpLoopback(t), nil, nil)
			if _, err := mp.c.AddPath(ctx, udpLoopback(t), mp.l.Addr()); err != nil {
				t.Fatal(err)
			}
			srv := mp.server(t)
			exchange(t, ctx, mp.open, testData(1<<20, 14))
			by := mp.c
			if side == "server" {
				by = srv
			}
			var h *Path
			for _, q := range by.Paths() {
				if q.ID() == 1 {
					h = q
				}
			}
			if h == nil {
				t.Fatalf("no path 1 at the %s", side)
			}
			if err := h.Abandon(uint64(ApplicationAbandonPath)); err != nil {
				t.Fatal(err)
			}
			select {
			case <-h.Done():
			case <-time.After(time.Second):
				t.Fatal("Done not closed")
			}
			for _, c := range []*Conn{mp.c, srv} {
				deadline := time.Now().Add(5 * time.Second)
				for len(c.PathStats()) != 1 {
					if time.Now().After(deadline) {
						t.Fatalf("client %v still has paths %v", c.isClient, c.PathStats())
					}
					time.Sleep(10 * time.Millisecond)
				}
				c.mu.Lock()
				for cid, r := range c.localCIDs {
					if r.path == 1 {
						t.Errorf("client %v: connection ID %x of path 1 still active", c.isClient, cid)
					}
				}
				c.mu.Unlock()
			}
			before := pathStat(t, mp.c, 0).BytesSent
			exchange(t, ctx, mp.open, testData(1<<20, 15))
			if pathStat(t, mp.c, 0).BytesSent-before < 1<<20 {
				t.Fatal("path 0 did not carry the transfer after the abandon")
			}
			if err := mp.c.Paths()[0].Abandon(0); err == nil {
				t.Fatal("abandoning the last path was allowed")
			}
		})
	}
}

// Loss on one path's socket is recovered by that path's own loss
// detection: it counts the losses, the clean path does not, and the
// transfer is complete.
func TestMultipathPerPathRecovery(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sink := &qlogSink{traces: map[bool]*bytes.Buffer{}, closed: map[bool]bool{}}
	conf := &Config{Qlog: sink.open}
	a0 := udpLoopback(t)
	mp := newMPPair(t, ctx, a0, conf, conf)
	lossy := newLossyConn(t, 0.05, 0)
	if _, err := mp.c.AddPath(ctx, lossy, mp.l.Addr()); err != nil {
		t.Fatal(err)
	}
	exchange(t, ctx, mp.open, testData(8<<20, 16))
	if lossy.drops() == 0 {
		t.Fatal("no datagram was dropped: the test tested nothing")
	}
	srv := mp.server(t)
	// The clean path's receivers: the server's listener socket (both
	// paths share it) and the client's first socket.
	cleanRx := map[bool]struct {
		pc      net.PacketConn
		dropped uint64
	}{true: {mp.l.pconn, srv.Stats().DatagramsDropped}, false: {a0, mp.c.Stats().DatagramsDropped}}
	cleanSent := map[bool]PathStats{}
	for _, c := range []*Conn{mp.c, srv} {
		clean, bad := pathStat(t, c, 0), pathStat(t, c, 1)
		t.Logf("client %v: %v; %v", c.isClient, clean, bad)
		cleanSent[c.isClient] = clean
		if bad.PacketsLost == 0 || bad.PacketsSent == 0 {
			t.Errorf("client %v: the lossy path declared %d of %d packets lost", c.isClient, bad.PacketsLost, bad.PacketsSent)
		}
		if !c.isClient {
			continue
		}
		// The client's lossy path declared losses, no more than the
		// wrapper dropped on its way out (ACK-only packets among those are
		// never declared; a few declarations may be spurious), and only its
		// window shrank to a few packets: loss on one path is not another's.
		lossy.mu.Lock()
		wd := lossy.writeDrops
		lossy.mu.Unlock()
		if bad.PacketsLost == 0 || float64(bad.PacketsLost) > 1.5*float64(wd)+5 || clean.CongestionWindow <= 4*bad.CongestionWindow {
			t.Errorf("lossy path declared %d lost of %d dropped; window clean %d, lossy %d", bad.PacketsLost, wd, clean.CongestionWindow, bad.CongestionWindow)
		}
	}
	t.Logf("%d datagrams dropped", lossy.drops())
	// Kernel drops are read before the sockets close with the connections.
	kernel := map[bool]uint64{}
	known := true
	for isClient, rx := range cleanRx {
		n, ok := socketDrops(t, rx.pc)
		kernel[isClient], known = n+rx.dropped, known && ok
	}
	evs := closedTraces(t, sink, mp.c, srv)
	for _, isClient := range []bool{true, false} {
		side := map[bool]string{true: "client", false: "server"}[isClient]
		if !known {
			checkCleanPath(t, side, cleanSent[isClient])
			continue
		}
		checkCleanPathTruth(t, side, cleanSent[isClient], lossesOnPath(evs[isClient], evs[!isClient], 0), kernel[isClient])
	}
}

// A peer using a path ID above our initial_max_path_id gets
// PROTOCOL_VIOLATION; one sending multipath frames without having
// negotiated the extension gets FRAME_ENCODING_ERROR (they are unknown
// frames then); the server keeps serving another connection.
func TestMultipathViolations(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cases := []struct {
		name  string
		sconf *Config
		frame Frame
		code  TransportErrorCode
	}{
		{"path ID above the limit", nil, PathNewConnectionIDFrame{PathID: 9, Seq: 0, ConnID: []byte{1, 2, 3, 4, 5, 6, 7, 8}}, ProtocolViolation},
		{"PATH_ACK above the limit", nil, PathAckFrame{PathID: 4, Ack: AckFrame{Ranges: []AckRange{{Smallest: 0, Largest: 0}}}}, ProtocolViolation},
		{"PATH_ACK of a packet never sent", nil, PathAckFrame{PathID: 0, Ack: AckFrame{Ranges: []AckRange{{Smallest: 1 << 20, Largest: 1 << 20}}}}, ProtocolViolation},
		{"without negotiation", &Config{DisableMultipath: true}, PathAbandonFrame{PathID: 0}, FrameEncodingError},
		{"PATH_CIDS_BLOCKED above the limit", nil, PathCIDsBlockedFrame{PathID: 9}, ProtocolViolation},
		{"PATH_CIDS_BLOCKED for an ID never issued", nil, PathCIDsBlockedFrame{PathID: 1, NextSeq: 99}, ProtocolViolation},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mp := newMPPair(t, ctx, udpLoopback(t), tc.sconf, nil)
			mp.c.mu.Lock()
			mp.c.injectFrames = append(mp.c.injectFrames, tc.frame)
			mp.c.signal()
			mp.c.mu.Unlock()
			select {
			case <-mp.c.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the server did not close the connection")
			}
			var te *TransportError
			if !errors.As(mp.c.Err(), &te) || te.Code != tc.code {
				t.Fatalf("closed with %v, want %s", mp.c.Err(), tc.code)
			}
		})
	}
	// Another connection to a server that closed one keeps working.
	mp := newMPPair(t, ctx, udpLoopback(t), nil, nil)
	bad, err := Dial(ctx, udpLoopback(t), mp.l.Addr(), mp.ctls, nil)
	if err != nil {
		t.Fatal(err)
	}
	bad.mu.Lock()
	bad.injectFrames = append(bad.injectFrames, PathAbandonFrame{PathID: 1 << 20})
	bad.signal()
	bad.mu.Unlock()
	<-bad.Done()
	exchange(t, ctx, mp.open, testData(1<<20, 17))
}

// The path limit: a server allowing path IDs up to 1 lets the client open
// one more path and no second (PATHS_BLOCKED); once that path is abandoned
// and discarded the server raises the limit with MAX_PATH_ID and the
// client opens path 2.
func TestMultipathPathLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mp := newMPPair(t, ctx, udpLoopback(t), &Config{MaxPathID: 1}, nil)
	p1, err := mp.c.AddPath(ctx, udpLoopback(t), mp.l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mp.c.AddPath(ctx, udpLoopback(t), mp.l.Addr()); !errors.Is(err, ErrPathLimit) {
		t.Fatalf("second AddPath: %v, want ErrPathLimit", err)
	}
	if err := p1.Abandon(uint64(ApplicationAbandonPath)); err != nil {
		t.Fatal(err)
	}
	var p2 *Path
	deadline := time.Now().Add(5 * time.Second)
	for p2 == nil {
		p2, err = mp.c.AddPath(ctx, udpLoopback(t), mp.l.Addr())
		if err != nil && !errors.Is(err, ErrPathLimit) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the limit was never raised")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if p2.ID() != 2 {
		t.Fatalf("new path ID %d, want 2", p2.ID())
	}
	exchange(t, ctx, mp.open, testData(1<<20, 18))
	if s := p2.Stats(); s.BytesSent == 0 || !s.Validated {
		t.Fatalf("path 2: %v", s)
	}
}

// delayConn is fault injection: it holds each datagram it sends for d
// (a slower path), in order.
type delayConn struct {
	net.PacketConn
	d time.Duration
}

func (c *delayConn) WriteTo(b []byte, to net.Addr) (int, error) {
	b = append([]byte(nil), b...)
	time.AfterFunc(c.d, func() { c.PacketConn.WriteTo(b, to) })
	return len(b), nil
}

// A new path's first packet can overtake the connection IDs the server
// needs to answer on it (sent on a slower path 0): the path still opens,
// once they arrive.
func TestMultipathPathBeforeItsIDs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	slow := &delayConn{PacketConn: udpLoopback(t), d: 100 * time.Millisecond}
	mp := newMPPair(t, ctx, slow, nil, nil)
	actx, acancel := context.WithTimeout(ctx, 5*time.Second)
	defer acancel()
	p, err := mp.c.AddPath(actx, udpLoopback(t), mp.l.Addr())
	if err != nil {
		t.Fatalf("AddPath: %v", err)
	}
	exchange(t, ctx, mp.open, testData(1<<20, 19))
	if s := p.Stats(); s.BytesReceived == 0 || !s.Validated {
		t.Fatalf("path 1: %v", s)
	}
}

// TestPotentiallyFailedFloor: with Config.MinFailureTimeout a PTO on a
// ~20 ms path marks it potentially failed only once nothing was received
// on it for the floor; without the floor one PTO period suffices.
func TestPotentiallyFailedFloor(t *testing.T) {
	for _, tc := range []struct {
		floor     time.Duration
		quiet     time.Duration
		wantFails bool
	}{
		{0, 120 * time.Millisecond, true},
		{200 * time.Millisecond, 120 * time.Millisecond, false},
		{200 * time.Millisecond, 210 * time.Millisecond, true},
	} {
		conf, err := (&Config{MinFailureTimeout: tc.floor}).withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		c := newConn(true, discardConn{}, &net.UDPAddr{}, conf, &tls.Config{})
		c.peerParams = DefaultTransportParameters()
		c.multipath = true
		c.newPath(1, discardConn{}, &net.UDPAddr{})
		p := c.p0()
		p.rtt.Update(20*time.Millisecond, 0, true, c.peerParams.MaxAckDelay)
		now := time.Now()
		p.lastRecv = now.Add(-tc.quiet)
		c.onPathPTO(p, now)
		if p.potentiallyFailed != tc.wantFails {
			t.Errorf("floor %v, %v quiet (PTO %v): potentially failed %v, want %v", tc.floor, tc.quiet, p.rtt.PTO(), p.potentiallyFailed, tc.wantFails)
		}
		if tc.wantFails {
			continue
		}
		// The PTO armed the check: the path is marked when the floor is up,
		// not at the next (backed-off, pushed-out) PTO...
		p.ptoCount = 1
		if at := c.failTimer(); at.IsZero() || !at.Equal(p.lastRecv.Add(tc.floor)) {
			t.Errorf("failure timer %v, want lastRecv+%v", at, tc.floor)
		}
		c.checkPathFailures(now.Add(tc.floor - tc.quiet - time.Millisecond))
		if p.potentiallyFailed {
			t.Error("marked before the floor")
		}
		c.checkPathFailures(now.Add(tc.floor - tc.quiet))
		if !p.potentiallyFailed {
			t.Error("not marked once quiet for the floor after a PTO")
		}
		// ...unless an acknowledgement came first.
		p.potentiallyFailed = false
		c.onPathPTO(p, now)
		p.ptoCount = 0
		c.checkPathFailures(now.Add(time.Second))
		if p.potentiallyFailed || !c.failTimer().IsZero() {
			t.Error("an acknowledged path is marked, or its check stays armed")
		}
	}
	if _, err := (&Config{MinFailureTimeout: -time.Second}).withDefaults(); err == nil {
		t.Error("a negative MinFailureTimeout is accepted")
	}
}
