package mpquic

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// initialScript is fault injection on a server's socket: it opens each
// datagram the server sends that starts with an Initial packet (with the
// Initial keys of the client's first Destination Connection ID), notes
// whether it carries CRYPTO data, and drops it when drop says so.
type initialScript struct {
	net.PacketConn
	mu      sync.Mutex
	odcid   []byte
	start   time.Time
	drop    func(n int, since time.Duration) bool // n: CRYPTO Initials sent before this one
	cryptos []time.Duration                       // when each CRYPTO Initial was sent
	dropped int
	all     []string
	// pairs: CRYPTO Initials sent right after another one, no datagram
	// between (a PTO's two probes are built in one go).
	pairs    int
	lastWasC bool
}

func newInitialScript(t *testing.T, drop func(int, time.Duration) bool) *initialScript {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return &initialScript{PacketConn: pc, drop: drop}
}

func (s *initialScript) ReadFrom(b []byte) (int, net.Addr, error) {
	n, from, err := s.PacketConn.ReadFrom(b)
	if err == nil {
		s.mu.Lock()
		if s.odcid == nil {
			if h, _, err := ParseHeader(b[:n], connIDLen); err == nil && h.Type == PacketInitial {
				s.odcid, s.start = append([]byte(nil), h.DCID...), time.Now()
			}
		}
		s.mu.Unlock()
	}
	return n, from, err
}

func (s *initialScript) WriteTo(b []byte, to net.Addr) (int, error) {
	s.mu.Lock()
	crypto := s.odcid != nil && s.carriesInitialCrypto(b)
	if s.odcid != nil {
		h, _, _ := ParseHeader(b, connIDLen)
		s.all = append(s.all, fmt.Sprintf("%v:%v:%d:%v", time.Since(s.start).Round(time.Millisecond), h.Type, len(b), crypto))
		if crypto && s.lastWasC {
			s.pairs++
		}
		s.lastWasC = crypto
	}
	if crypto {
		since := time.Since(s.start)
		drop := s.drop(len(s.cryptos), since)
		s.cryptos = append(s.cryptos, since)
		if drop {
			s.dropped++
			s.mu.Unlock()
			return len(b), nil
		}
	}
	s.mu.Unlock()
	return s.PacketConn.WriteTo(b, to)
}

func (s *initialScript) carriesInitialCrypto(b []byte) bool {
	h, n, err := ParseHeader(b, connIDLen)
	if err != nil || h.Type != PacketInitial {
		return false
	}
	_, server := InitialKeys(s.odcid)
	pkt := append([]byte(nil), b[:n]...)
	o, err := server.UnprotectHeader(pkt, h.PNOffset, -1)
	if err != nil {
		return false
	}
	if o, err = server.Open(pkt, o, 0); err != nil {
		return false
	}
	frames, _ := ParseFrames(o.Payload, PacketInitial, false)
	for _, f := range frames {
		if _, ok := f.(CryptoFrame); ok {
			return true
		}
	}
	return false
}

func (s *initialScript) log() (cryptos []time.Duration, dropped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.cryptos...), s.dropped
}

// TestHandshakeSpeedUp (RFC 9002 §6.2.3): the server's first Initial
// (its ServerHello) is lost, its Handshake packets arrive. mpquic's client
// sends its Initial CRYPTO again at once (Handshake packets without their
// keys), the server answers that duplicate with its Initial CRYPTO again
// at once, and the handshake completes with no PTO on either side; before,
// both waited for their first PTO (999 ms without an RTT sample).
func TestHandshakeSpeedUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	sc := newInitialScript(t, func(n int, _ time.Duration) bool { return n == 0 })
	l, err := Listen(sc, stls, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *Conn, 1)
	go func() {
		if c, err := l.Accept(ctx); err == nil {
			accepted <- c
		}
	}()
	c, err := DialAddr(ctx, sc.LocalAddr().String(), ctls, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	var sconn *Conn
	select {
	case sconn = <-accepted:
	case <-ctx.Done():
		t.Fatal("no connection accepted")
	}
	cryptos, dropped := sc.log()
	ss, cs := sconn.Stats(), c.Stats() // the client's PTOs may be Handshake probes after the early resend
	t.Logf("server CRYPTO Initials at %v (%d dropped); PTOs: server %d, client %d", cryptos, dropped, ss.PTOCount, cs.PTOCount)
	if dropped != 1 {
		t.Fatalf("%d CRYPTO Initials dropped: the script tested nothing", dropped)
	}
	// Both sides' first PTO is 999 ms without an RTT sample (RFC 9002
	// §6.2.2): the ServerHello sent again before half of it was sent
	// early, whatever the machine's load.
	if len(cryptos) < 2 || cryptos[1] > 500*time.Millisecond || ss.PTOCount != 0 {
		t.Errorf("the lost ServerHello was not sent again early (server PTOs %d)", ss.PTOCount)
	}
}

// TestProbesCarryCryptoTwice (RFC 9002 §6.2.4): with one packet of
// Initial CRYPTO data to resend at a PTO, both probe datagrams carry it
// (one right after the other), not the data and a PING, so losing either one no
// longer costs a doubled PTO period. quic-go is the client here; every
// CRYPTO Initial the server sends in its first 1.5 s is lost (the first
// flight, early resends, the first PTO's probes).
func TestProbesCarryCryptoTwice(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	sc := newInitialScript(t, func(_ int, since time.Duration) bool { return since < 1500*time.Millisecond })
	l, err := Listen(sc, stls, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go echoServe(ctx, l)
	c, err := quic.DialAddr(ctx, sc.LocalAddr().String(), ctls, &quic.Config{HandshakeIdleTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	time.Sleep(200 * time.Millisecond) // the second probe may follow the handshake's end
	cryptos, dropped := sc.log()
	sc.mu.Lock()
	pairs, all := sc.pairs, sc.all
	sc.mu.Unlock()
	t.Logf("server CRYPTO Initials at %v (%d dropped); datagrams (time:type:size:crypto) %v", cryptos, dropped, all)
	if pairs == 0 {
		t.Errorf("no CRYPTO Initial right after another: a PTO's second probe carried no CRYPTO data")
	}
}
