package patterns

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/patterns/wire"
)

// sourceRecorder notes where every datagram came from. Being a wrapper it
// hides the UDP socket's OOB methods, so quic-go reads with plain ReadFrom.
type sourceRecorder struct {
	net.PacketConn
	mu   sync.Mutex
	from map[string]int
}

func (s *sourceRecorder) ReadFrom(b []byte) (int, net.Addr, error) {
	n, a, err := s.PacketConn.ReadFrom(b)
	if err == nil {
		s.mu.Lock()
		s.from[a.String()]++
		s.mu.Unlock()
	}
	return n, a, err
}

// TestQUICRepliesFromReachedAddress: a server listening on every address
// answers from the address the client sent to (127.0.0.2 here, while the
// kernel would pick 127.0.0.1 towards a 127.0.0.1 client), so multi-homed
// servers work with clients that check the source.
func TestQUICRepliesFromReachedAddress(t *testing.T) {
	loopback(t) // Linux only
	srv := startServer(t, Limits{})
	if from := quicSources(t, srv.quicPort); len(from) != 1 || from["127.0.0.2:"+itoa(srv.quicPort)] == 0 {
		t.Fatalf("replies came from %v, want only 127.0.0.2", from)
	}
	// Control: a server socket without IP_PKTINFO (hidden behind a
	// wrapper) lets the kernel pick 127.0.0.1, and the check catches it.
	cert, _, _ := certs.SelfSigned(nil)
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := NewServer(ServerConfig{Certificate: cert, Sockets: map[string][]any{quicName: {&sourceRecorder{PacketConn: pc, from: map[string]int{}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	port := uint16(pc.LocalAddr().(*net.UDPAddr).Port)
	if from := quicSources(t, port); from["127.0.0.1:"+itoa(port)] == 0 {
		t.Fatalf("control server replied from %v, want 127.0.0.1", from)
	}
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }

// quicSources runs one interactive exchange with 127.0.0.2:port and
// returns where the client's datagrams came from.
func quicSources(t *testing.T, port uint16) map[string]int {
	t.Helper()
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	rec := &sourceRecorder{PacketConn: udp, from: map[string]int{}}
	tr := &quic.Transport{Conn: rec}
	defer tr.Close()
	target := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), port)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := tr.Dial(ctx, net.UDPAddrFromAddrPort(target), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{ALPNInteractive}}, transport.QUICConfig(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := wire.Hello{Version: wire.Version, Kind: wire.KindInteractiveUpload, Duration: time.Second, ChunkSize: 100, Interval: 100 * time.Millisecond}
	_ = wire.WriteFrame(s, wire.TypeHello, h.Encode())
	_, _ = s.Write(wire.AppendChunk(nil, 0, 100))
	_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := wire.NewReader(s, 0).ReadFrame()
	if err != nil || f.Type != wire.TypeAck {
		t.Fatalf("ack: %v %v", f.Type, err)
	}
	_ = c.CloseWithError(0, "")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.from
}
