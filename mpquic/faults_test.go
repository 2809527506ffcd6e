package mpquic

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// lossyConn is fault injection: it drops a share of the datagrams in each
// direction and holds some back to send after the next one (reordering).
type lossyConn struct {
	net.PacketConn
	mu         sync.Mutex
	rng        *rand.Rand
	loss       float64
	reorder    float64
	held       []byte
	heldTo     net.Addr
	dropped    int
	writeDrops int // of dropped, those on the sending side
}

func newLossyConn(t *testing.T, loss, reorder float64) *lossyConn {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return &lossyConn{PacketConn: pc, rng: rand.New(rand.NewPCG(1, 2)), loss: loss, reorder: reorder}
}

func (l *lossyConn) WriteTo(b []byte, to net.Addr) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rng.Float64() < l.loss {
		l.dropped++
		l.writeDrops++
		return len(b), nil
	}
	if l.held == nil && l.rng.Float64() < l.reorder {
		l.held, l.heldTo = append([]byte(nil), b...), to
		return len(b), nil
	}
	n, err := l.PacketConn.WriteTo(b, to)
	if l.held != nil {
		l.PacketConn.WriteTo(l.held, l.heldTo)
		l.held = nil
	}
	return n, err
}

func (l *lossyConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, from, err := l.PacketConn.ReadFrom(b)
		if err != nil {
			return n, from, err
		}
		l.mu.Lock()
		drop := l.rng.Float64() < l.loss
		if drop {
			l.dropped++
		}
		l.mu.Unlock()
		if !drop {
			return n, from, nil
		}
	}
}

func (l *lossyConn) drops() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}

// 3% loss each way plus 5% reordering on mptester's socket: the transfer
// must still arrive complete and in order, against quic-go both ways.
func TestInteropLossy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	data := testData(2<<20, 4)

	t.Run("client", func(t *testing.T) {
		addr := quicgoEchoServer(t, ctx, stls)
		lc := newLossyConn(t, 0.03, 0.05)
		c, err := Dial(ctx, lc, addr, ctls, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseWithError(0, "")
		exchange(t, ctx, func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStream(ctx) }, data)
		if lc.drops() == 0 {
			t.Fatal("no datagram was dropped: the test tested nothing")
		}
		t.Logf("%d datagrams dropped", lc.drops())
	})
	t.Run("server", func(t *testing.T) {
		lc := newLossyConn(t, 0.03, 0.05)
		l, err := Listen(lc, stls, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go echoServe(ctx, l)
		c, err := quic.DialAddr(ctx, lc.LocalAddr().String(), ctls, &quic.Config{MaxIdleTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseWithError(0, "")
		exchange(t, ctx, func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStreamSync(ctx) }, data)
		if lc.drops() == 0 {
			t.Fatal("no datagram was dropped: the test tested nothing")
		}
		t.Logf("%d datagrams dropped", lc.drops())
	})
}

// A peer that ignores our stream window is closed with FLOW_CONTROL_ERROR
// (RFC 9000 §4.1), and the server keeps serving other connections.
func TestFlowControlViolation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	l := listenLoopback(t, stls, &Config{StreamReceiveWindow: 64 << 10, ConnectionReceiveWindow: 1 << 20})
	accepted := make(chan *Conn, 4)
	go func() {
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			accepted <- c
			go func() {
				for {
					if _, err := c.AcceptStream(ctx); err != nil {
						return
					}
					// never read: the window stays at 64 KiB
				}
			}()
		}
	}()
	good, err := DialAddr(ctx, l.Addr().String(), ctls, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer good.CloseWithError(0, "")

	bad, err := DialAddr(ctx, l.Addr().String(), ctls, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := bad.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bad.mu.Lock()
	s.peerMax = 1 << 40 // misbehave: ignore the server's MAX_STREAM_DATA
	bad.mu.Unlock()
	s.Write(testData(256<<10, 5))
	select {
	case <-bad.Done():
	case <-ctx.Done():
		t.Fatal("the server did not close the connection")
	}
	var pe *PeerCloseError
	if err := bad.Err(); !errors.As(err, &pe) || pe.Err.Code != FlowControlError {
		t.Fatalf("closed with %v, want the peer's FLOW_CONTROL_ERROR", err)
	}
	// The well-behaved connection still works.
	gs, err := good.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gs.Write([]byte("still here")); err != nil {
		t.Fatal(err)
	}
}

// Garbage datagrams, including ones carrying a live connection's ID, are
// dropped without harming the connections being served.
func TestGarbageDoesNotHurtServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	l := listenLoopback(t, stls, nil)
	go echoServe(ctx, l)
	c, open := dialTest(t, ctx, l.Addr().String(), ctls)
	exchange(t, ctx, open, []byte("before"))

	junk, err := net.Dial("udp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer junk.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	c.mu.Lock()
	serverCID := append([]byte(nil), c.p0().dcid...)
	c.mu.Unlock()
	for i := 0; i < 2000; i++ {
		b := make([]byte, 1+rng.IntN(1400))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		switch i % 4 {
		case 1: // a short header to the live connection
			b = append([]byte{0x40}, append(serverCID, b...)...)
		case 2: // an Initial-looking long header
			b = append([]byte{0xc0, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0}, b...)
		}
		junk.Write(b)
	}
	exchange(t, ctx, open, testData(256<<10, 6))
}

// A server speaking only other versions makes Dial fail with
// ErrVersionNegotiation; our server answers an unknown version with a
// Version Negotiation packet offering version 1.
func TestVersionNegotiationConn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fake, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	go func() {
		b := make([]byte, 2048)
		n, from, err := fake.ReadFrom(b)
		if err != nil {
			return
		}
		h, _, err := ParseHeader(b[:n], 0)
		if err != nil {
			return
		}
		fake.WriteTo(AppendVersionNegotiation(nil, h.SCID, h.DCID, 0x6b3343cf, 0xff00001d), from)
	}()
	_, ctls := testTLS(t)
	if _, err := DialAddr(ctx, fake.LocalAddr().String(), ctls, nil); !errors.Is(err, ErrVersionNegotiation) {
		t.Fatalf("Dial: %v, want ErrVersionNegotiation", err)
	}

	stls, _ := testTLS(t)
	l := listenLoopback(t, stls, nil)
	cl, err := net.Dial("udp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pkt := append([]byte{0xc0, 0x1a, 0x2a, 0x3a, 0x4a, 8, 1, 2, 3, 4, 5, 6, 7, 8, 4, 9, 9, 9, 9}, make([]byte, 1200)...)
	cl.Write(pkt)
	cl.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 2048)
	n, err := cl.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := ParseVersionNegotiation(b[:n])
	if err != nil || len(vs) != 2 || vs[0] != Version1 || vs[1] != Version2 {
		t.Fatalf("answer %x: versions %v, %v", b[:n], vs, err)
	}
}

// A client that breaks the rules gets the right CONNECTION_CLOSE code
// from our server: HANDSHAKE_DONE is a server's frame (PROTOCOL_VIOLATION,
// RFC 9000 §19.20), and a stream beyond MAX_STREAMS is STREAM_LIMIT_ERROR
// (§4.6).
func TestPeerViolations(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	l := listenLoopback(t, stls, &Config{MaxIncomingStreams: 4})
	go echoServe(ctx, l)
	for _, tc := range []struct {
		name    string
		misdo   func(c *Conn)
		want    TransportErrorCode
		streams int
	}{
		{"handshake done from a client", func(c *Conn) { c.sendHandshakeDone = true }, ProtocolViolation, 1},
		{"stream beyond the limit", func(c *Conn) { c.peerMaxBidi = 100 }, StreamLimitError, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := DialAddr(ctx, l.Addr().String(), ctls, nil)
			if err != nil {
				t.Fatal(err)
			}
			c.mu.Lock()
			tc.misdo(c)
			c.mu.Unlock()
			for i := 0; i < tc.streams; i++ {
				s, err := c.OpenStream(ctx)
				if err != nil {
					break
				}
				s.Write([]byte("x"))
			}
			select {
			case <-c.Done():
			case <-ctx.Done():
				t.Fatal("the server did not close the connection")
			}
			var pe *PeerCloseError
			if err := c.Err(); !errors.As(err, &pe) || pe.Err.Code != tc.want {
				t.Fatalf("closed with %v, want the peer's %s", err, tc.want)
			}
		})
	}
}
