package mpquic

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rebindConn is fault injection: a client socket whose local port changes
// (Rebind closes the old socket), as behind a NAT that rebinds.
type rebindConn struct {
	net.PacketConn // the current socket, for LocalAddr and deadlines
	mu             sync.Mutex
	in             chan rebindDatagram
	closed         chan struct{}
	sent, recv     atomic.Int64 // bytes through the current socket
}

type rebindDatagram struct {
	b    []byte
	from net.Addr
}

func newRebindConn(t *testing.T) *rebindConn {
	r := &rebindConn{in: make(chan rebindDatagram, 1024), closed: make(chan struct{})}
	r.Rebind(t)
	t.Cleanup(func() { r.Close() })
	return r
}

func (r *rebindConn) Rebind(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	old := r.PacketConn
	r.PacketConn = pc
	r.sent.Store(0)
	r.recv.Store(0)
	r.mu.Unlock()
	if old != nil {
		old.Close()
	}
	go func() {
		for {
			b := make([]byte, 2048)
			n, from, err := pc.ReadFrom(b)
			if err != nil {
				return
			}
			r.recv.Add(int64(n))
			select {
			case r.in <- rebindDatagram{b[:n], from}:
			case <-r.closed:
				return
			}
		}
	}()
}

func (r *rebindConn) cur() net.PacketConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.PacketConn
}

func (r *rebindConn) WriteTo(b []byte, to net.Addr) (int, error) {
	r.sent.Add(int64(len(b)))
	return r.cur().WriteTo(b, to)
}

func (r *rebindConn) ReadFrom(b []byte) (int, net.Addr, error) {
	select {
	case d := <-r.in:
		return copy(b, d.b), d.from, nil
	case <-r.closed:
		return 0, nil, net.ErrClosed
	}
}

func (r *rebindConn) SetReadDeadline(time.Time) error { return nil }

func (r *rebindConn) Close() error {
	select {
	case <-r.closed:
	default:
		close(r.closed)
	}
	return r.cur().Close()
}

// A client whose address changes mid-connection (NAT rebinding): the
// server follows it to the new address, validates it with PATH_CHALLENGE,
// and the transfer completes; without the migration the answers would go
// to the closed old socket.
func TestServerFollowsRebinding(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	l := listenLoopback(t, stls, nil)
	accepted := make(chan *Conn, 1)
	go serveEach(ctx, func(ctx context.Context) (*Conn, error) {
		c, err := l.Accept(ctx)
		if err == nil {
			accepted <- c
		}
		return c, err
	}, (*Conn).AcceptStream, func(s *Stream) {
		buf := make([]byte, 64<<10)
		for {
			n, err := s.Read(buf)
			s.Write(buf[:n])
			if err != nil {
				s.Close()
				return
			}
		}
	})
	rc := newRebindConn(t)
	c, err := Dial(ctx, rc, l.Addr(), ctls, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	srv := <-accepted
	open := func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStream(ctx) }
	exchange(t, ctx, open, []byte("before"))
	before := srv.RemoteAddr().String()
	rc.Rebind(t)
	exchange(t, ctx, open, testData(512<<10, 12))
	srv.mu.Lock()
	after, validated := srv.p0().remote.String(), srv.pathsValidated
	srv.mu.Unlock()
	if after == before || after != rc.LocalAddr().String() {
		t.Fatalf("server sends to %s (was %s), client now at %s", after, before, rc.LocalAddr())
	}
	if validated != 1 {
		t.Fatalf("%d paths validated, want the new one", validated)
	}
}

// A NAT rebinding mid-download loses what was in flight to the old port;
// the server retransmits it but keeps its window (RFC 9000 §9.4 lets a
// port-only change keep the congestion state, and those losses say
// nothing of the new path). The server's socket is a 40 Mbit/s bottleneck
// whose queue holds the whole transfer, so no loss is congestion: the
// window must never be reduced. (Before, it was halved at the rebinding
// and left in congestion avoidance; against picoquic's delayed ACKs a
// 10 MB transfer then took 8 times as long.)
func TestRebindingLossesAreNoCongestion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	shaped := newShapedConn(t, 40e6, 4096)
	l, err := Listen(shaped, stls, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted := make(chan *Conn, 1)
	go serveEach(ctx, func(ctx context.Context) (*Conn, error) {
		c, err := l.Accept(ctx)
		if err == nil {
			accepted <- c
		}
		return c, err
	}, (*Conn).AcceptStream, func(s *Stream) {
		var n [8]byte
		if _, err := io.ReadFull(s, n[:]); err == nil {
			s.Write(make([]byte, binary.BigEndian.Uint64(n[:])))
		}
		s.Close()
	})
	rc := newRebindConn(t)
	c, err := Dial(ctx, rc, l.Addr(), ctls, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	srv := <-accepted
	const total = 3 << 20
	s, err := download(ctx, c, total)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(s, make([]byte, 512<<10)); err != nil {
		t.Fatal(err)
	}
	rc.Rebind(t)
	// The server learns the new address from the client's next packet.
	if _, err := download(ctx, c, 1); err != nil {
		t.Fatal(err)
	}
	s.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(s, make([]byte, total-512<<10)); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	p := srv.p0()
	events, lost, cwnd := p.cc.CongestionEvents, p.packetsLost, p.cc.Cwnd
	srv.mu.Unlock()
	t.Logf("server: %d packets lost, %d congestion events, cwnd %d, queue drops %d", lost, events, cwnd, shaped.drops.Load())
	if lost == 0 {
		t.Fatal("nothing was lost at the rebinding: the test did not rebind mid-flight")
	}
	if shaped.drops.Load() == 0 && events > 0 {
		t.Fatalf("%d congestion events with no datagram dropped by the bottleneck: the rebinding's losses were taken as congestion", events)
	}
}
