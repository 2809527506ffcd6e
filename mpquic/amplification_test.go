package mpquic

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// spoofConn is fault injection: a client socket whose packets, from a
// moment on, leave from another socket (the "victim", whose address an
// attacker forged) while the client still reads only its own.
type spoofConn struct {
	net.PacketConn // the client's own socket
	victim         net.PacketConn
	spoof          atomic.Bool
	fromVictim     atomic.Int64 // bytes sent from the victim's address
}

func (s *spoofConn) WriteTo(b []byte, to net.Addr) (int, error) {
	if s.spoof.Load() {
		s.fromVictim.Add(int64(len(b)))
		return s.victim.WriteTo(b, to)
	}
	return s.PacketConn.WriteTo(b, to)
}

// downloadServe answers each stream's 8-byte size with that many bytes.
func downloadServe(ctx context.Context, l *Listener) {
	serveEach(ctx, l.Accept, (*Conn).AcceptStream, func(s *Stream) {
		var n [8]byte
		if _, err := io.ReadFull(s, n[:]); err != nil {
			return
		}
		s.Write(testData(int(binary.BigEndian.Uint64(n[:])), 7))
		s.Close()
	})
}

func download(ctx context.Context, c *Conn, n int) (*Stream, error) {
	s, err := c.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	_, err = s.Write(b[:])
	return s, err
}

// downloading connects from pconn to a download server, asks for 64 MB
// and reads the first n bytes.
func downloading(t *testing.T, ctx context.Context, pconn net.PacketConn, n int) (*Conn, *Stream) {
	t.Helper()
	stls, ctls := testTLS(t)
	l := listenLoopback(t, stls, nil)
	go downloadServe(ctx, l)
	c, err := Dial(ctx, pconn, l.Addr(), ctls, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseWithError(0, "") })
	s, err := download(ctx, c, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(s, make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	return c, s
}

// A server whose client's packets start to come from another address (a
// forged source) follows them but, until that address answers its
// PATH_CHALLENGE, sends there at most three times what came from there:
// mid-download, the victim gets a few hundred bytes, not the congestion
// window.
func TestAmplificationLimitUnvalidatedAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sc := &spoofConn{PacketConn: udpLoopback(t), victim: udpLoopback(t)}
	// What reaches the victim from the server's address: its port may have
	// been another test's client before, whose server still sends there.
	var server atomic.Pointer[string]
	var toVictim atomic.Int64
	go func() {
		b := make([]byte, 2048)
		for {
			n, from, err := sc.victim.ReadFrom(b)
			if err != nil {
				return
			}
			if srv := server.Load(); srv != nil && from.String() == *srv {
				toVictim.Add(int64(n))
			}
		}
	}()
	c, s := downloading(t, ctx, sc, 1<<20)
	srvAddr := c.RemoteAddr().String()
	server.Store(&srvAddr)
	sc.spoof.Store(true)
	// Keep the client's packets coming (from the victim's address): it
	// reads what still arrives and asks for more on new streams.
	go io.Copy(io.Discard, s)
	for range 20 {
		if _, err := download(ctx, c, 1<<20); err != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	from, to := sc.fromVictim.Load(), toVictim.Load()
	t.Logf("from the victim's address %d bytes, to it %d (%.2fx)", from, to, float64(to)/float64(max(from, 1)))
	if from == 0 || to == 0 {
		t.Fatalf("from the victim %d bytes, to it %d: the server never moved there", from, to)
	}
	if to > 3*from {
		t.Fatalf("the server sent %d bytes to an unvalidated address that sent %d: over 3x (RFC 9000 §8)", to, from)
	}
}

// Once the new address answers the challenge the limit lifts: a download
// whose client sends only ACKs (far under a third of what it receives)
// goes on after the rebinding. 16 MB are read after it, more than the
// flow-control window and socket buffers could have taken in before.
func TestAmplificationLimitLiftsOnValidation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc := newRebindConn(t)
	c, s := downloading(t, ctx, rc, 256<<10)
	rc.Rebind(t)
	// A client that sends nothing cannot be followed (the server learns
	// the new address from its packets): ask for a byte more.
	if _, err := download(ctx, c, 1); err != nil {
		t.Fatal(err)
	}
	s.SetReadDeadline(time.Now().Add(15 * time.Second))
	start := time.Now()
	if n, err := io.ReadFull(s, make([]byte, 16<<20)); err != nil {
		t.Fatalf("after the rebinding: %d bytes in %v, %v", n, time.Since(start).Round(time.Millisecond), err)
	}
	// What the new address received is far over three times what it
	// sent: possible only once the limit lifted.
	sent, recv := rc.sent.Load(), rc.recv.Load()
	t.Logf("16 MB after the rebinding in %v; the new address sent %d bytes, received %d (%.0fx)",
		time.Since(start).Round(time.Millisecond), sent, recv, float64(recv)/float64(max(sent, 1)))
	if recv <= 3*sent {
		t.Fatalf("the new address received %d bytes for %d sent: the limit never lifted", recv, sent)
	}
}
