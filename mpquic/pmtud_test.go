package mpquic

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Over loopback both ends find the largest datagram either accepts (1452)
// within the first transfer, and the probes cost no declared loss.
func TestPathMTUDiscoveryLoopback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mp := newMPPair(t, ctx, udpLoopback(t), nil, nil)
	exchange(t, ctx, mp.open, testData(4<<20, 3))
	for _, c := range []*Conn{mp.c, mp.server(t)} {
		s := pathStat(t, c, 0)
		t.Logf("client %v: size %d, probes %d sent, %d lost, packets lost %d", c.isClient, s.MaxDatagramSize, s.MTUProbesSent, s.MTUProbesLost, s.PacketsLost)
		if s.MaxDatagramSize != maxDatagramSize || s.MTUProbesSent == 0 || s.MTUProbesLost != 0 {
			t.Errorf("client %v: datagram size %d after %d probes (%d lost), want %d", c.isClient, s.MaxDatagramSize, s.MTUProbesSent, s.MTUProbesLost, maxDatagramSize)
		}
	}
	// Disabled, the paths keep the starting size.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	off := &Config{DisablePathMTUDiscovery: true}
	mp2 := newMPPair(t, ctx2, udpLoopback(t), off, off)
	exchange(t, ctx2, mp2.open, testData(1<<20, 4))
	if s := pathStat(t, mp2.c, 0); s.MaxDatagramSize != 1252 || s.MTUProbesSent != 0 {
		t.Errorf("disabled: size %d, %d probes", s.MaxDatagramSize, s.MTUProbesSent)
	}
}

// mtuConn is a real UDP socket behind a link that drops every datagram
// larger than limit on the way out (a tunnel's smaller MTU, say); the
// limit may change (a route that shrinks).
type mtuConn struct {
	*net.UDPConn
	limit atomic.Int64
}

func newMTUConn(t *testing.T, limit int) *mtuConn {
	m := &mtuConn{UDPConn: udpLoopback(t).(*net.UDPConn)}
	m.limit.Store(int64(limit))
	return m
}

func (m *mtuConn) WriteTo(b []byte, to net.Addr) (int, error) {
	if len(b) > int(m.limit.Load()) {
		return len(b), nil // gone on the way, as a real too-small link does with DF
	}
	return m.UDPConn.WriteTo(b, to)
}

// A path that carries at most 1350 bytes settles just under it by
// bisection; the lost probes are counted as probes, not as packet loss,
// and do not shrink the congestion window.
func TestPathMTUDiscoverySmallerLink(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const limit = 1350
	mc := newMTUConn(t, limit)
	mp := newMPPair(t, ctx, mc, nil, nil)
	// The search takes a few lost probes per size too large (each found
	// lost an RTT or a PTO later, then pmtuRetry): transfers until it ends.
	start := time.Now()
	var s PathStats
	for i := 0; i < 100; i++ {
		exchange(t, ctx, mp.open, testData(1<<20, byte(i)))
		if mp.c.mu.Lock(); mp.c.paths[0].mtu.done() {
			mp.c.mu.Unlock()
			break
		}
		mp.c.mu.Unlock()
	}
	t.Logf("search ended after %v", time.Since(start))
	s = pathStat(t, mp.c, 0)
	t.Logf("size %d, probes %d sent, %d lost, packets lost %d, window %d", s.MaxDatagramSize, s.MTUProbesSent, s.MTUProbesLost, s.PacketsLost, s.CongestionWindow)
	if s.MaxDatagramSize > limit || s.MaxDatagramSize < limit-pmtuPrecision {
		t.Errorf("datagram size %d, want within %d below %d", s.MaxDatagramSize, pmtuPrecision, limit)
	}
	if s.MTUProbesLost < maxPMTUProbes || s.PacketsLost != 0 {
		t.Errorf("%d probes lost (want at least %d), %d packets declared lost (want 0)", s.MTUProbesLost, maxPMTUProbes, s.PacketsLost)
	}
}

// sizeConn records the sizes of the datagrams a path's socket sends and
// receives.
type sizeConn struct {
	net.PacketConn
	mu         sync.Mutex
	sent, recv []int
}

func (s *sizeConn) WriteTo(b []byte, to net.Addr) (int, error) {
	s.mu.Lock()
	s.sent = append(s.sent, len(b))
	s.mu.Unlock()
	return s.PacketConn.WriteTo(b, to)
}

func (s *sizeConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, from, err := s.PacketConn.ReadFrom(b)
	if err == nil {
		s.mu.Lock()
		s.recv = append(s.recv, n)
		s.mu.Unlock()
	}
	return n, from, err
}

// A new path's validation goes in datagrams of at least 1200 bytes both
// ways (RFC 9000 §8.2.1-2): the PATH_CHALLENGE the client sends first on
// it and the server's PATH_RESPONSE (with its own challenge) that comes
// back first.
func TestPathValidationPadded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mp := newMPPair(t, ctx, udpLoopback(t), nil, nil)
	sc := &sizeConn{PacketConn: udpLoopback(t)}
	if _, err := mp.c.AddPath(ctx, sc, mp.l.Addr()); err != nil { // returns validated
		t.Fatal(err)
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	t.Logf("first datagrams on the new path: sent %v, received %v", sc.sent[:min(3, len(sc.sent))], sc.recv[:min(3, len(sc.recv))])
	if len(sc.sent) == 0 || len(sc.recv) == 0 || sc.sent[0] < minDatagramSize || sc.recv[0] < minDatagramSize {
		t.Errorf("path validation datagrams: sent %v, received %v; want the first each way at least %d bytes", sc.sent, sc.recv, minDatagramSize)
	}
}

// A route that shrinks under a path that found 1,452 bytes (a black hole
// for every full packet): after PTOs in a row the path goes back to its
// starting size, the transfer completes, and the search resumes below the
// size that stopped working. Without the fallback the transfer stalls
// until the idle timeout.
func TestPathMTUBlackHole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mc := newMTUConn(t, 1500)
	mp := newMPPair(t, ctx, mc, nil, &Config{MaxIdleTimeout: 20 * time.Second})
	exchange(t, ctx, mp.open, testData(1<<20, 6))
	if s := pathStat(t, mp.c, 0); s.MaxDatagramSize != maxDatagramSize {
		t.Fatalf("size %d before the route shrank, want %d", s.MaxDatagramSize, maxDatagramSize)
	}
	mc.limit.Store(1300)
	start := time.Now()
	exchange(t, ctx, mp.open, testData(4<<20, 7))
	took := time.Since(start)
	s := pathStat(t, mp.c, 0)
	t.Logf("after the route shrank to 1300: transfer took %v; size %d, black holes %d, probes %d sent / %d lost", took, s.MaxDatagramSize, s.MTUBlackHoles, s.MTUProbesSent, s.MTUProbesLost)
	if s.MTUBlackHoles == 0 || s.MaxDatagramSize > 1300 || took > 10*time.Second {
		t.Errorf("black holes %d, size %d, transfer %v: want a fallback, at most 1300 bytes, well under the idle timeout", s.MTUBlackHoles, s.MaxDatagramSize, took)
	}
}
