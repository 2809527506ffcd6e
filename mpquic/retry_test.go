package mpquic

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/mptester/mptester/mpquic/internal/hextest"

	"github.com/quic-go/quic-go"
)

// RFC 9001 Appendix A.4: AppendRetry builds the RFC's Retry byte for byte
// from its inputs (empty DCID, SCID f067a5502a4262b5, token "token", the
// client's first DCID 8394c8f03e515708).
func TestAppendRetryRFC9001Vector(t *testing.T) {
	want := hextest.Unhex(t, "ff000000010008f067a5502a4262b5746f6b656e04a265ba2eff4d829058fb3f0f2496ba")
	got := appendRetry(nil, retryAEAD(Version1), nil, 0xff, Version1, nil, hextest.Unhex(t, "f067a5502a4262b5"), rfcDCID, []byte("token"))
	if !bytes.Equal(got, want) {
		t.Fatalf("Retry\n got %x\nwant %x", got, want)
	}
	r := AppendRetry(nil, []byte{1, 2, 3}, []byte{4, 5, 6, 7, 8, 9, 10, 11}, rfcDCID, []byte("tok"))
	h, n, err := ParseHeader(r, connIDLen)
	if err != nil || n != len(r) || h.Type != PacketRetry || string(h.Token) != "tok" || !VerifyRetry(r, rfcDCID) {
		t.Fatalf("AppendRetry's packet: %+v %v", h, err)
	}
}

// A token opens only for the address, port and connection ID it was
// issued for, unaltered, before it expires.
func TestRetryTokens(t *testing.T) {
	tk := newRetryTokens()
	now := time.Now()
	from := &net.UDPAddr{IP: net.IPv4(198, 18, 0, 7), Port: 4433}
	odcid, ndcid := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, []byte{9, 9, 9, 9, 9, 9, 9, 9}
	tok := tk.seal(now, from, odcid, ndcid)
	got, ok := tk.open(now.Add(time.Second), tok, from, ndcid)
	if !ok || !bytes.Equal(got, odcid) {
		t.Fatalf("own token: %x %v", got, ok)
	}
	if _, ok := tk.open(now.Add(retryTokenLifetime+time.Millisecond), tok, from, ndcid); ok {
		t.Error("an expired token was accepted")
	}
	for _, other := range []net.Addr{
		&net.UDPAddr{IP: net.IPv4(198, 18, 0, 8), Port: 4433},
		&net.UDPAddr{IP: net.IPv4(198, 18, 0, 7), Port: 4434},
		&net.UDPAddr{IP: net.ParseIP("fd00::7"), Port: 4433},
	} {
		if _, ok := tk.open(now, tok, other, ndcid); ok {
			t.Errorf("accepted from %v", other)
		}
	}
	if _, ok := tk.open(now, tok, from, odcid[:8]); ok {
		t.Error("accepted for another connection ID")
	}
	for i := range tok {
		bad := append([]byte(nil), tok...)
		bad[i] ^= 0x40
		if _, ok := tk.open(now, bad, from, ndcid); ok {
			t.Errorf("accepted with byte %d altered", i)
		}
	}
	if _, ok := newRetryTokens().open(now, tok, from, ndcid); ok {
		t.Error("another listener's key opened the token")
	}
	if _, ok := tk.open(now, tok[:len(tok)-1], from, ndcid); ok {
		t.Error("a truncated token was accepted")
	}
}

// mpquic follows its own listener's Retry, and the listener keeps the
// transport parameters straight (RFC 9000 §7.3): original_destination_
// connection_id is the client's first DCID, retry_source_connection_id
// the Retry's SCID.
func TestRetryMPQUICBothWays(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	l := listenLoopback(t, stls, &Config{RequireRetry: true})
	go echoServe(ctx, l)
	c, open := dialTest(t, ctx, l.Addr().String(), ctls)
	exchange(t, ctx, open, testData(1<<20, 3))
	c.mu.Lock()
	retried, params := c.retrySCID != nil, c.peerParams
	c.mu.Unlock()
	if !retried {
		t.Fatal("the client did not follow a Retry")
	}
	if !bytes.Equal(params.OriginalDCID, c.origDCID) || !bytes.Equal(params.RetrySCID, c.retrySCID) {
		t.Fatalf("server's parameters: odcid %x (want %x) retry scid %x (want %x)", params.OriginalDCID, c.origDCID, params.RetrySCID, c.retrySCID)
	}
	if s := l.Stats(); s.RetriesSent < 1 || s.BadTokens != 0 {
		t.Fatalf("listener stats %+v", s)
	}
}

func TestRetryQuicGoClientToServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	l := listenLoopback(t, stls, &Config{RequireRetry: true})
	go echoServe(ctx, l)
	c, err := quic.DialAddr(ctx, l.Addr().String(), ctls, &quic.Config{MaxIdleTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	exchange(t, ctx, func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStreamSync(ctx) }, testData(1<<20, 4))
	if s := l.Stats(); s.RetriesSent < 1 {
		t.Fatalf("no Retry sent: %+v", s)
	}
}

func TestRetryClientToQuicGoServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	pconn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	tr := &quic.Transport{Conn: pconn, VerifySourceAddress: func(net.Addr) bool { return true }}
	defer tr.Close()
	ql, err := tr.Listen(stls, &quic.Config{MaxIdleTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	go serveEach(ctx, ql.Accept, (*quic.Conn).AcceptStream, func(s *quic.Stream) {
		io.Copy(s, s)
		s.Close()
	})
	c, open := dialTest(t, ctx, pconn.LocalAddr().String(), ctls)
	exchange(t, ctx, open, testData(1<<20, 5))
	c.mu.Lock()
	retried := c.retrySCID != nil
	c.mu.Unlock()
	if !retried {
		t.Fatal("quic-go sent no Retry")
	}
}

// retryClient is a client connection that sent its first Initial (to
// odcid) into a discarding socket.
func retryClient(t *testing.T) *Conn {
	_, ctls := testTLS(t)
	conf, _ := (*Config)(nil).withDefaults()
	c := newConn(true, discardConn{}, &net.UDPAddr{}, conf, ctls)
	c.origDCID = []byte{1, 1, 1, 1, 1, 1, 1, 1}
	c.p0().dcid = c.origDCID
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.start(); err != nil {
		t.Fatal(err)
	}
	c.sendPackets(time.Now())
	t.Cleanup(func() { c.mu.Lock(); c.terminate(ErrClosed); c.mu.Unlock() })
	return c
}

// The client takes one Retry with a valid tag, a token and a new ID, and
// ignores every other (RFC 9000 §17.2.5.2).
func TestClientRetryChecks(t *testing.T) {
	scid := []byte{2, 2, 2, 2, 2, 2, 2, 2}
	for _, tc := range []struct {
		name   string
		retry  func(c *Conn) []byte
		follow bool
	}{
		{"valid", func(c *Conn) []byte { return AppendRetry(nil, c.scid, scid, c.origDCID, []byte("tok")) }, true},
		{"bad tag", func(c *Conn) []byte {
			r := AppendRetry(nil, c.scid, scid, c.origDCID, []byte("tok"))
			r[len(r)-1] ^= 1
			return r
		}, false},
		{"tag over another DCID", func(c *Conn) []byte { return AppendRetry(nil, c.scid, scid, scid, []byte("tok")) }, false},
		{"no token", func(c *Conn) []byte { return AppendRetry(nil, c.scid, scid, c.origDCID, nil) }, false},
		{"same SCID as our DCID", func(c *Conn) []byte { return AppendRetry(nil, c.scid, c.origDCID, c.origDCID, []byte("tok")) }, false},
		{"not to our SCID", func(c *Conn) []byte { return AppendRetry(nil, scid, scid, c.origDCID, []byte("tok")) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := retryClient(t)
			c.mu.Lock()
			defer c.mu.Unlock()
			in := c.spaces[spaceInitial]
			sentBefore := len(in.Sent)
			c.handleDatagram(datagram{b: tc.retry(c), from: &net.UDPAddr{}}, time.Now())
			if followed := c.retrySCID != nil; followed != tc.follow {
				t.Fatalf("followed %v, want %v", followed, tc.follow)
			}
			if c.closing || c.isDone() {
				t.Fatalf("the Retry closed the connection: %v", c.closeErr)
			}
			if !tc.follow {
				if len(in.Sent) != sentBefore || !bytes.Equal(c.p0().dcid, c.origDCID) {
					t.Fatal("an ignored Retry changed the Initial state")
				}
				return
			}
			if !bytes.Equal(c.p0().dcid, scid) || string(c.retryToken) != "tok" || len(in.Sent) != 0 {
				t.Fatalf("after the Retry: dcid %x token %q in flight %d", c.p0().dcid, c.retryToken, len(in.Sent))
			}
			// The ClientHello goes again, to the new ID with the token,
			// under the keys that ID gives, numbered on.
			pnBefore := in.nextPN
			sent := captureSend(t, c)
			h, _, err := ParseHeader(sent, connIDLen)
			if err != nil || h.Type != PacketInitial || !bytes.Equal(h.DCID, scid) || string(h.Token) != "tok" {
				t.Fatalf("Initial after the Retry: %+v %v", h, err)
			}
			client, _ := InitialKeys(scid)
			o, err := client.UnprotectHeader(sent, h.PNOffset, -1)
			if err != nil {
				t.Fatal(err)
			}
			if o.PN < pnBefore {
				t.Fatalf("packet number %d after the Retry, before it %d: reset", o.PN, pnBefore)
			}
			if _, err := client.Open(sent, o, 0); err != nil {
				t.Fatalf("the new Initial does not open under the new ID's keys: %v", err)
			}
			// A second Retry is ignored.
			second := AppendRetry(nil, c.scid, []byte{3, 3, 3, 3, 3, 3, 3, 3}, c.origDCID, []byte("again"))
			c.handleDatagram(datagram{b: second, from: &net.UDPAddr{}}, time.Now())
			if !bytes.Equal(c.p0().dcid, scid) || string(c.retryToken) != "tok" {
				t.Fatal("a second Retry was followed")
			}
		})
	}
}

// captureConn records what a connection writes.
type captureConn struct {
	discardConn
	out [][]byte
}

func (cc *captureConn) WriteTo(b []byte, _ net.Addr) (int, error) {
	cc.out = append(cc.out, append([]byte(nil), b...))
	return len(b), nil
}

func captureSend(t *testing.T, c *Conn) []byte {
	t.Helper()
	cc := &captureConn{}
	p := c.p0()
	old := p.pconn
	p.pconn, p.gso = cc, false
	c.sendPackets(time.Now())
	p.pconn = old
	if len(cc.out) == 0 {
		t.Fatal("nothing sent")
	}
	return cc.out[0]
}

// The client checks the server's retry_source_connection_id against the
// Retry it followed, and its absence when it followed none (RFC 9000 §7.3).
func TestClientRetryTransportParameters(t *testing.T) {
	rscid := []byte{2, 2, 2, 2, 2, 2, 2, 2}
	for _, tc := range []struct {
		name      string
		retried   bool
		paramRSCD []byte
		ok        bool
	}{
		{"no Retry, none", false, nil, true},
		{"no Retry, one claimed", false, rscid, false},
		{"Retry, matching", true, rscid, true},
		{"Retry, missing", true, nil, false},
		{"Retry, other", true, []byte{3, 3, 3, 3, 3, 3, 3, 3}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := retryClient(t)
			c.mu.Lock()
			defer c.mu.Unlock()
			server := []byte{4, 4, 4, 4, 4, 4, 4, 4}
			c.p0().dcid = server
			if tc.retried {
				c.retrySCID = rscid
			}
			p := DefaultTransportParameters()
			p.OriginalDCID, p.InitialSCID, p.RetrySCID = c.origDCID, server, tc.paramRSCD
			var z [16]byte
			p.StatelessResetToken = &z
			err := c.setPeerParams(p.Append(nil))
			var te *TransportError
			if tc.ok != (err == nil) || err != nil && (!errors.As(err, &te) || te.Code != TransportParameterError) {
				t.Fatalf("setPeerParams: %v", err)
			}
		})
	}
}

func (discardConn) SetReadDeadline(time.Time) error { return nil }
