package mpquic

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// srcConn counts the datagrams it reads by whether they came from want.
type srcConn struct {
	net.PacketConn
	want          *net.UDPAddr
	right, others atomic.Int64
}

func (s *srcConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, from, err := s.PacketConn.ReadFrom(b)
	if err == nil {
		if ua, ok := from.(*net.UDPAddr); ok && ua.AddrPort().Addr().Unmap() == s.want.AddrPort().Addr().Unmap() && ua.Port == s.want.Port {
			s.right.Add(1)
		} else {
			s.others.Add(1)
		}
	}
	return n, from, err
}

// TestServerAnswersFromDialedAddress: a server on a wildcard address
// answers on every path from the address the client sent to, not from the
// kernel's default source (127.0.0.1 for a client on 127.0.0.1). Without
// pktinfo every answer to 127.0.0.2 came from 127.0.0.1, and packet
// capture matching the server's addr:port saw no received packets.
func TestServerAnswersFromDialedAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	l, err := ListenAddr(":0", stls, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go echoServe(ctx, l)
	dst := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2), Port: l.Addr().(*net.UDPAddr).Port}
	a := &srcConn{PacketConn: udpLoopback(t), want: dst}
	c, err := Dial(ctx, a, dst, ctls, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	open := func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStream(ctx) }
	exchange(t, ctx, open, testData(256<<10, 3))
	b := &srcConn{PacketConn: udpLoopback(t), want: dst}
	if _, err := c.AddPath(ctx, b, dst); err != nil {
		t.Fatal(err)
	}
	exchange(t, ctx, open, testData(256<<10, 4))
	for name, s := range map[string]*srcConn{"path 0": a, "path 1": b} {
		if s.right.Load() == 0 || s.others.Load() != 0 {
			t.Errorf("%s: %d datagrams from %v, %d from another address", name, s.right.Load(), dst, s.others.Load())
		}
	}
}
