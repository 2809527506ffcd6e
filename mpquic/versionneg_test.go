package mpquic

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// versionConn records the long-header packets through a client's socket:
// type and version of each, sent and received, in order.
type versionConn struct {
	net.PacketConn
	mu         sync.Mutex
	sent, recv []pktVersion
}

type pktVersion struct {
	typ     PacketType
	version uint32
}

func longHeaders(b []byte) []pktVersion {
	var out []pktVersion
	for len(b) > 0 && b[0]&0x80 != 0 {
		h, n, err := ParseHeader(b, connIDLen)
		if err != nil {
			break
		}
		out = append(out, pktVersion{h.Type, h.Version})
		b = b[n:]
	}
	return out
}

func (v *versionConn) WriteTo(b []byte, to net.Addr) (int, error) {
	v.mu.Lock()
	v.sent = append(v.sent, longHeaders(b)...)
	v.mu.Unlock()
	return v.PacketConn.WriteTo(b, to)
}

func (v *versionConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, from, err := v.PacketConn.ReadFrom(b)
	if err == nil {
		v.mu.Lock()
		v.recv = append(v.recv, longHeaders(b[:n])...)
		v.mu.Unlock()
	}
	return n, from, err
}

func (v *versionConn) packets() (sent, recv []pktVersion) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.sent), slices.Clone(v.recv)
}

// Compatible version negotiation (RFC 9368) as the interop runner's v2
// case has it: the client starts in version 1 offering 2, the server
// answers in 2 from its ServerHello on, and the client follows. Checked
// on the wire as the runner does (the client's first Initial is v1; the
// server's Initials include v2, after which none is v1: before, an ACK of
// a ClientHello's first packet may be; every Handshake packet both ways
// is v2) and by both ends' Version. Then the cases that must keep the first
// version: a client that offers nothing else or prefers it, a server
// that speaks only it, and quic-go on either side (it has no
// version_information).
func TestCompatibleVersionNegotiation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		name         string
		sconf, cconf *Config
		want         uint32
	}{
		{"v1 to v2", nil, &Config{Versions: []uint32{Version2, Version1}}, Version2},
		{"v1 to v2 after a Retry", &Config{RequireRetry: true}, &Config{Versions: []uint32{Version2}}, Version2},
		{"v2 to v1", nil, &Config{Version: Version2, Versions: []uint32{Version1, Version2}}, Version1},
		{"client offers one version", nil, nil, Version1},
		{"client prefers its first", nil, &Config{Versions: []uint32{Version1, Version2}}, Version1},
		{"server speaks v1 only", &Config{Versions: []uint32{Version1}}, &Config{Versions: []uint32{Version2, Version1}}, Version1},
	} {
		t.Run(c.name, func(t *testing.T) {
			vc := &versionConn{PacketConn: udpLoopback(t)}
			mp := newMPPair(t, ctx, vc, c.sconf, c.cconf)
			exchange(t, ctx, mp.open, testData(64<<10, 7))
			if v, sv := mp.c.Version(), mp.server(t).Version(); v != c.want || sv != c.want {
				t.Fatalf("client in 0x%08x, server in 0x%08x, want 0x%08x", v, sv, c.want)
			}
			first := Version1
			if c.cconf != nil && c.cconf.Version != 0 {
				first = c.cconf.Version
			}
			sent, recv := vc.packets()
			if len(sent) == 0 || sent[0] != (pktVersion{PacketInitial, first}) {
				t.Fatalf("client's first packet %+v, want an Initial of 0x%08x", sent, first)
			}
			var served bool
			for _, p := range recv {
				if p.typ == PacketRetry {
					continue
				}
				if p.version != c.want && (served || p.typ != PacketInitial) {
					t.Errorf("server sent a %v packet of 0x%08x (received %+v)", p.typ, p.version, recv)
				}
				served = served || p.typ == PacketInitial && p.version == c.want
			}
			if !served {
				t.Errorf("no server Initial of 0x%08x: %+v", c.want, recv)
			}
			handshakes := 0
			for _, p := range sent {
				if p.typ == PacketHandshake {
					handshakes++
					if p.version != c.want {
						t.Errorf("client sent a Handshake packet of 0x%08x (sent %+v)", p.version, sent)
					}
				}
			}
			if handshakes == 0 {
				t.Errorf("client sent no Handshake packet: %+v", sent)
			}
			// After the server's first, the client's Initials too are in
			// the negotiated version (how many came before is unknown).
			if last := sent[len(sent)-1]; last.version != c.want {
				t.Errorf("client's last long-header packet %+v, want 0x%08x (sent %+v)", last, c.want, sent)
			}
		})
	}

	stls, ctls := testTLS(t)
	t.Run("quic-go client", func(t *testing.T) {
		l := listenLoopback(t, stls, nil)
		go echoServe(ctx, l)
		qc, err := quic.DialAddr(ctx, l.Addr().String(), ctls, &quic.Config{Versions: []quic.Version{quic.Version1, quic.Version2}})
		if err != nil {
			t.Fatal(err)
		}
		defer qc.CloseWithError(0, "")
		exchange(t, ctx, func(ctx context.Context) (io.ReadWriteCloser, error) { return qc.OpenStreamSync(ctx) }, testData(16<<10, 8))
		if v := qc.ConnectionState().Version; v != quic.Version1 {
			t.Errorf("quic-go in %v, want version 1 (it sent no version_information)", v)
		}
	})
	t.Run("quic-go server", func(t *testing.T) {
		ql, err := quic.ListenAddr("127.0.0.1:0", stls, &quic.Config{Versions: []quic.Version{quic.Version1, quic.Version2}})
		if err != nil {
			t.Fatal(err)
		}
		defer ql.Close()
		go serveEach(ctx, ql.Accept, (*quic.Conn).AcceptStream, func(s *quic.Stream) { io.Copy(s, s); s.Close() })
		c, err := DialAddr(ctx, ql.Addr().String(), ctls, &Config{Versions: []uint32{Version2, Version1}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseWithError(0, "")
		exchange(t, ctx, func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStream(ctx) }, testData(16<<10, 9))
		if v := c.Version(); v != Version1 {
			t.Errorf("in 0x%08x, want version 1 (quic-go does not move clients)", v)
		}
	})
}

// Downgrade prevention (RFC 9368 §4), with our own version_information
// rewritten as an attacker could not (it is inside the TLS handshake):
// a server whose chosen version is not the one in use, a server that
// moved the client without saying so, and a client whose chosen version
// is not its first flight's end with VERSION_NEGOTIATION_ERROR.
func TestVersionDowngradePrevention(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	offer := []uint32{Version2, Version1}
	for _, c := range []struct {
		name         string
		sconf, cconf *Config
		peer         bool // the server detects it (the client sees its close)
	}{
		{"server says v1, speaks v2", &Config{testVersionInfo: func(vi *VersionInfo) *VersionInfo { vi.Chosen = Version1; return vi }}, &Config{Versions: offer}, false},
		{"server moves without version_information", &Config{testVersionInfo: func(*VersionInfo) *VersionInfo { return nil }}, &Config{Versions: offer}, false},
		{"client says v2, starts in v1", nil, &Config{Versions: offer, testVersionInfo: func(vi *VersionInfo) *VersionInfo { vi.Chosen = Version2; return vi }}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := listenLoopback(t, stls, c.sconf)
			go echoServe(ctx, l)
			conn, err := DialAddr(ctx, l.Addr().String(), ctls, c.cconf)
			if err == nil {
				// The client's check runs with the server's parameters,
				// the server's with the client's: wait for either.
				_, err = conn.OpenStream(ctx)
				if err == nil {
					select {
					case <-conn.done:
						err = conn.closeErr
					case <-time.After(3 * time.Second):
					}
				}
				conn.CloseWithError(0, "")
			}
			var te *TransportError
			var pe *PeerCloseError
			if !errors.As(err, &te) || te.Code != VersionNegotiationError || errors.As(err, &pe) != c.peer {
				t.Fatalf("Dial: %v, want VERSION_NEGOTIATION_ERROR (from the server: %v)", err, c.peer)
			}
		})
	}
}

// 0-RTT and compatible negotiation: 0-RTT stays in the version the client
// started in (its keys and headers) while the handshake moves on to the
// server's choice; and a ticket is its connection's version's (RFC 9369
// §5): a client whose ticket came from a connection moved to v2 offers no
// 0-RTT when it starts in v1 again.
func TestVersionNegotiationZeroRTT(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	slowClientHello(stls) // the request leaves before the server's answer
	l := listenLoopback(t, stls, &Config{Allow0RTT: true})
	accepted := make(chan *Conn, 8)
	go serveEach(ctx, func(ctx context.Context) (*Conn, error) {
		c, err := l.Accept(ctx)
		if err == nil {
			accepted <- c
		}
		return c, err
	}, (*Conn).AcceptStream, func(s *Stream) { io.Copy(s, s); s.Close() })
	server := func(t *testing.T) *Conn {
		t.Helper()
		select {
		case c := <-accepted:
			return c
		case <-ctx.Done():
			t.Fatal("no connection accepted")
			return nil
		}
	}
	offer := &Config{Versions: []uint32{Version2, Version1}}
	dial := func(t *testing.T, tc *tls.Config, conf *Config, early bool) (*Conn, *versionConn) {
		t.Helper()
		vc := &versionConn{PacketConn: udpLoopback(t)}
		d := Dial
		if early {
			d = DialEarly
		}
		c, err := d(ctx, vc, l.Addr(), tc, conf)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.CloseWithError(0, "") })
		exchange(t, ctx, func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStream(ctx) }, []byte("GET /early\r\n"))
		return c, vc
	}
	// ticketIn: a client configuration holding the ticket of a first
	// connection (conf) that ended in version want.
	ticketIn := func(t *testing.T, conf *Config, want uint32) *tls.Config {
		t.Helper()
		tc := ctls.Clone()
		tc.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		if c, _ := dial(t, tc, conf, false); c.Version() != want {
			t.Fatalf("first connection in 0x%08x", c.Version())
		}
		waitTicketIn(tc.ClientSessionCache)
		server(t)
		return tc
	}
	t.Run("v1 ticket, 0-RTT in v1, moved to v2", func(t *testing.T) {
		tc := ticketIn(t, nil, Version1)
		c, vc := dial(t, tc, offer, true)
		if e := c.EarlyData(); !e.Accepted || e.PacketsSent == 0 || c.Version() != Version2 {
			t.Fatalf("0-RTT %+v in 0x%08x: want accepted, then version 2", e, c.Version())
		}
		// Opened by the server, which has moved on to version 2.
		if s := server(t); s.EarlyData().PacketsReceived == 0 || s.Version() != Version2 {
			t.Errorf("server: 0-RTT %+v in 0x%08x, want 0-RTT packets opened", s.EarlyData(), s.Version())
		}
		sent, _ := vc.packets()
		n := 0
		for _, p := range sent {
			if p.typ == Packet0RTT {
				n++
				if p.version != Version1 {
					t.Errorf("a 0-RTT packet of 0x%08x, want the first version's", p.version)
				}
			}
		}
		if n == 0 {
			t.Errorf("no 0-RTT packet on the wire: %+v", sent)
		}
	})
	t.Run("v2 ticket: starts in v2, 0-RTT in v2", func(t *testing.T) {
		tc := ticketIn(t, offer, Version2)
		c, vc := dial(t, tc, offer, true)
		if e := c.EarlyData(); !e.Accepted || c.Version() != Version2 {
			t.Fatalf("0-RTT %+v in 0x%08x: want accepted, version 2", e, c.Version())
		}
		server(t)
		sent, _ := vc.packets()
		if len(sent) == 0 || sent[0] != (pktVersion{PacketInitial, Version2}) {
			t.Fatalf("first packet %+v, want an Initial of version 2 (the ticket's)", sent)
		}
		for _, p := range sent {
			if p.version != Version2 {
				t.Fatalf("a %v packet of 0x%08x under a version 2 ticket", p.typ, p.version)
			}
		}
	})
	t.Run("v2 ticket, v1 only: no 0-RTT", func(t *testing.T) {
		tc := ticketIn(t, offer, Version2)
		c, vc := dial(t, tc, nil, true) // offers v1 alone: cannot start in the ticket's
		if e := c.EarlyData(); e.Offered || c.Version() != Version1 {
			t.Fatalf("0-RTT %+v in 0x%08x: want none offered, version 1", e, c.Version())
		}
		server(t)
		sent, _ := vc.packets()
		for _, p := range sent {
			if p.typ == Packet0RTT {
				t.Fatalf("a 0-RTT packet under a version 2 ticket: %+v", sent)
			}
		}
	})
}

// A server takes 0-RTT only under a ticket of the version the client
// started in (RFC 9369 §5; the ticket holds its connection's negotiated
// version), and a client offers it only then.
func TestTicketVersionBindsZeroRTT(t *testing.T) {
	stls, _ := testTLS(t)
	conf, err := (&Config{Allow0RTT: true}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	for _, isClient := range []bool{false, true} {
		c := newConn(isClient, nil, nil, conf, stls)
		prefix, p := extraServerParams, c.localParams()
		if isClient {
			prefix, p = extraPeerParams, DefaultTransportParameters()
		}
		ticket := func(v uint32) *tls.SessionState {
			q := p
			q.VersionInfo = &VersionInfo{Chosen: v, Available: []uint32{v}}
			return &tls.SessionState{EarlyData: true, Extra: [][]byte{append(append([]byte(nil), prefix...), appendLimits(q)...)}}
		}
		c.vs.orig = Version1
		if !early(c, ticket(Version1)) {
			t.Errorf("client %v: refused under a ticket of the version it started in", isClient)
		}
		if early(c, ticket(Version2)) {
			t.Errorf("client %v: 0-RTT under a version 2 ticket in a version 1 connection", isClient)
		}
		c.vs.orig = Version2
		if !early(c, ticket(Version2)) {
			t.Errorf("client %v: refused a version 2 ticket in a version 2 connection", isClient)
		}
	}
}
