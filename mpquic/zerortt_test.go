package mpquic

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// 0-RTT (RFC 9001 §4.6.1): a second connection sends its request in 0-RTT
// packets under the first one's ticket and the server takes it, mpquic's
// client and server against each other and against quic-go both ways;
// a server that cannot take it (another listener: the ticket does not
// decrypt) rejects it and the request arrives in 1-RTT all the same.
func TestZeroRTT(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	slowClientHello(stls)
	sink := &qlogSink{traces: map[bool]*bytes.Buffer{}, closed: map[bool]bool{}}
	mpq := listenLoopback(t, stls, &Config{Allow0RTT: true, Qlog: sink.open})
	accepted := make(chan *Conn, 16)
	go serveEach(ctx, func(ctx context.Context) (*Conn, error) {
		c, err := mpq.Accept(ctx)
		if err == nil {
			accepted <- c
		}
		return c, err
	}, (*Conn).AcceptStream, func(s *Stream) { io.Copy(s, s); s.Close() })
	other := listenLoopback(t, stls, &Config{Allow0RTT: true})
	go echoServe(ctx, other)

	ql, err := quic.ListenAddrEarly("127.0.0.1:0", stls, &quic.Config{Allow0RTT: true, MaxIdleTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ql.Close() })
	go serveEach(ctx, ql.Accept, (*quic.Conn).AcceptStream, func(s *quic.Stream) { io.Copy(s, s); s.Close() })

	req := []byte("GET /early\r\n")
	dialMPQUIC := func(t *testing.T, addr string, tc *tls.Config, early bool) EarlyDataState {
		t.Helper()
		dial := DialAddr
		if early {
			dial = DialAddrEarly
		}
		c, err := dial(ctx, addr, tc, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseWithError(0, "")
		exchange(t, ctx, func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStream(ctx) }, req)
		if !early {
			waitTicketIn(tc.ClientSessionCache)
		}
		return c.EarlyData()
	}
	// mpquicServerSaw is the 0-RTT of the next connection mpquic's
	// server accepted (its Accept may come after the client's exchange:
	// the answer went before the handshake completed).
	var lastServer *Conn
	mpquicServerSaw := func(t *testing.T) EarlyDataState {
		t.Helper()
		select {
		case c := <-accepted:
			lastServer = c
			return c.EarlyData()
		case <-ctx.Done():
			t.Fatal("mpquic's server accepted no connection")
		}
		return EarlyDataState{}
	}

	drain := func() { // what a failed subtest left
		for len(accepted) > 0 {
			<-accepted
		}
	}
	t.Run("mpquic-to-mpquic", func(t *testing.T) {
		drain()
		tc := ctls.Clone()
		tc.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		if e := dialMPQUIC(t, mpq.Addr().String(), tc, false); e.Offered {
			t.Fatalf("first connection: %+v", e)
		}
		mpquicServerSaw(t)
		e := dialMPQUIC(t, mpq.Addr().String(), tc, true)
		if !e.Offered || !e.Accepted || e.PacketsSent == 0 {
			t.Fatalf("client: %+v, want 0-RTT packets sent and accepted", e)
		}
		if s := mpquicServerSaw(t); !s.Accepted || s.PacketsReceived == 0 {
			t.Fatalf("server: %+v, want 0-RTT packets received", s)
		}
		// The trace is complete once the connection ended (the client
		// closed it): the qlog is buffered until then.
		select {
		case <-lastServer.Done():
		case <-ctx.Done():
		}
		sink.mu.Lock()
		trace := sink.traces[false].String() // the last server connection's
		sink.mu.Unlock()
		if !strings.Contains(trace, `"name":"transport:packet_received","data":{"header":{"packet_type":"0RTT"`) {
			t.Error(`the server's qlog has no 0RTT packet received`)
		}
	})
	t.Run("mpquic-to-quic-go", func(t *testing.T) {
		tc := ctls.Clone()
		tc.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		dialMPQUIC(t, ql.Addr().String(), tc, false)
		e := dialMPQUIC(t, ql.Addr().String(), tc, true)
		if !e.Offered || !e.Accepted || e.PacketsSent == 0 {
			t.Fatalf("client: %+v, want 0-RTT packets sent and accepted", e)
		}
	})
	t.Run("quic-go-to-mpquic", func(t *testing.T) {
		drain()
		tc := ctls.Clone()
		tc.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		for i := range 2 {
			c, err := quic.DialAddrEarly(ctx, mpq.Addr().String(), tc, nil)
			if err != nil {
				t.Fatal(err)
			}
			exchange(t, ctx, func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStream() }, req)
			<-c.HandshakeComplete()
			if i == 0 {
				waitTicketIn(tc.ClientSessionCache)
			}
			used := c.ConnectionState().Used0RTT
			c.CloseWithError(0, "")
			if used != (i == 1) {
				t.Fatalf("connection %d: quic-go says Used0RTT %v", i, used)
			}
			if s := mpquicServerSaw(t); (i == 1) != (s.Accepted && s.PacketsReceived > 0) {
				t.Fatalf("connection %d: server: %+v", i, s)
			}
		}
	})
	t.Run("rejected", func(t *testing.T) {
		drain()
		tc := ctls.Clone()
		tc.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		dialMPQUIC(t, mpq.Addr().String(), tc, false)
		mpquicServerSaw(t)
		// The same server name, another listener's ticket key.
		e := dialMPQUIC(t, other.Addr().String(), tc, true)
		if !e.Offered || e.Accepted || e.PacketsSent == 0 {
			t.Fatalf("client: %+v, want 0-RTT sent and rejected", e)
		}
	})
}

// waitTicketIn waits (up to 2 s) for a session ticket in cache.
func waitTicketIn(cache tls.ClientSessionCache) {
	for i := 0; i < 200; i++ {
		if s, ok := cache.Get("localhost"); ok && s != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A server takes 0-RTT only under limits at least those its ticket
// promised (RFC 9000 §7.4.1), and only when allowed; a client offers it
// only with the server's limits remembered.
func TestZeroRTTTicketLimits(t *testing.T) {
	stls, _ := testTLS(t)
	conf, err := (&Config{Allow0RTT: true}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	server := newConn(false, nil, nil, conf, stls)
	promised := server.localParams()
	ticket := func(p TransportParameters) *tls.SessionState {
		return &tls.SessionState{EarlyData: true, Extra: [][]byte{[]byte("other"), append(append([]byte(nil), extraServerParams...), appendLimits(p)...)}}
	}
	if !early(server, ticket(promised)) {
		t.Error("refused under the limits it promised")
	}
	more := promised
	more.InitialMaxStreamsBidi++
	if early(server, ticket(more)) {
		t.Error("accepted under a lower stream limit than promised")
	}
	more = promised
	more.InitialMaxData++
	if early(server, ticket(more)) {
		t.Error("accepted under a lower max_data than promised")
	}
	if early(server, newTicket()) {
		t.Error("accepted a ticket without the promised limits")
	}
	server.conf.Allow0RTT = false
	if early(server, ticket(promised)) {
		t.Error("accepted 0-RTT without Allow0RTT")
	}

	client := newConn(true, nil, nil, conf, stls)
	if early(client, newTicket()) {
		t.Error("client offers 0-RTT without the server's limits")
	}
	p := DefaultTransportParameters()
	p.InitialMaxData, p.InitialMaxStreamsBidi = 12345, 7
	ss := &tls.SessionState{EarlyData: true, Extra: [][]byte{append(append([]byte(nil), extraPeerParams...), appendLimits(p)...)}}
	client.onResumeSession(ss)
	if !ss.EarlyData || client.peerMaxData != 12345 || client.peerMaxBidi != 7 {
		t.Errorf("client: early %v, max_data %d, max_streams %d; want the remembered 12345, 7", ss.EarlyData, client.peerMaxData, client.peerMaxBidi)
	}
	// The server accepted 0-RTT: its parameters may not lower a limit
	// the client kept to (RFC 9000 §7.4.1).
	client.early.offered = true
	client.peerParams.InitialMaxData = 12345
	if err := client.checkEarlyLimits(); err != nil {
		t.Errorf("equal limits: %v", err)
	}
	client.peerParams.InitialMaxData = 12344
	var te *TransportError
	if err := client.checkEarlyLimits(); !errors.As(err, &te) || te.Code != ProtocolViolation {
		t.Errorf("lowered max_data after accepting 0-RTT: %v, want PROTOCOL_VIOLATION", err)
	}
	client.early.rejected = true
	if err := client.checkEarlyLimits(); err != nil {
		t.Errorf("rejected 0-RTT binds no limits: %v", err)
	}
}

func newTicket() *tls.SessionState { return &tls.SessionState{EarlyData: true} }

// early is what c decides of 0-RTT under ticket ss.
func early(c *Conn, ss *tls.SessionState) bool {
	c.onResumeSession(ss)
	return ss.EarlyData
}

// slowClientHello makes servers of stls take 50 ms over a ClientHello, so a
// client's request goes out before their answer brings the 1-RTT keys
// (else it may not be 0-RTT on a loaded machine); the 0-RTT packets wait
// for the early key.
func slowClientHello(stls *tls.Config) {
	stls.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		time.Sleep(50 * time.Millisecond)
		return nil, nil
	}
}
