package mpquic

import (
	"bytes"
	"crypto/rand"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/mptester/mptester/mpquic/internal/hextest"
)

// recordConn is a PacketConn the listener under test writes to (from its
// connections' goroutines too) and never reads from.
type recordConn struct {
	discardConn
	mu  sync.Mutex
	out []sent
}

type sent struct {
	b  []byte
	to net.Addr
}

func (r *recordConn) WriteTo(b []byte, to net.Addr) (int, error) {
	r.mu.Lock()
	r.out = append(r.out, sent{append([]byte(nil), b...), to})
	r.mu.Unlock()
	return len(b), nil
}

func (r *recordConn) LocalAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4433}
}

func (r *recordConn) sent() []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sent(nil), r.out...)
}

// testListener is a listener whose datagrams the test hands to dispatch;
// its connections end with the test.
func testListener(t testing.TB, conf *Config) (*Listener, *recordConn) {
	t.Helper()
	stls, _ := testTLS(t)
	rc := &recordConn{}
	l, err := newListener(rc, stls, conf, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { endAll(l) })
	return l, rc
}

func endAll(l *Listener) {
	for _, c := range l.connList() {
		c.mu.Lock()
		c.terminate(ErrClosed)
		c.mu.Unlock()
	}
}

func (l *Listener) connList() []*Conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[*Conn]bool{}
	var out []*Conn
	for _, c := range l.conns {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

// sealInitial protects payload as a client's Initial to dcid, padded to a
// 1200-byte datagram.
func sealInitial(t testing.TB, dcid, scid, token, payload []byte, pn uint64) []byte {
	t.Helper()
	client := clientInitialKeys(dcid)
	h := LongHeader{Type: PacketInitial, DCID: dcid, SCID: scid, Token: token}
	hdr, err := AppendLongHeader(nil, h, pn, 4, 1000)
	if err != nil {
		t.Fatal(err)
	}
	p := append([]byte(nil), payload...)
	if pad := minDatagramSize - len(hdr) - tagLen - len(p); pad > 0 {
		p = append(p, make([]byte, pad)...)
	}
	hdr, _ = AppendLongHeader(nil, h, pn, 4, len(p))
	pkt, err := client.Protect(nil, hdr, p, pn, 0)
	if err != nil {
		t.Fatal(err)
	}
	return pkt
}

// fakeInitial is what a flooder sends: 1,200 random bytes with an
// Initial's first byte, version 1, 8-byte IDs, no token and a Length.
func fakeInitial(b []byte) []byte {
	b = b[:1200]
	rand.Read(b)
	b[0] = 0xc0 | b[0]&0x0f
	copy(b[1:5], []byte{0, 0, 0, 1})
	b[5] = 8
	b[14] = 8
	b[23] = 0                 // token length
	b[24], b[25] = 0x44, 0x96 // Length 1174: to the datagram's end
	return b
}

func udp(ip byte, port int) *net.UDPAddr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 1, ip), Port: port}
}

// clientHelloPayload is the plaintext of an mpquic client's first Initial
// (CRYPTO with the ClientHello or its start, then PADDING).
func clientHelloPayload(t testing.TB) []byte {
	t.Helper()
	_, ctls := testTLS(t)
	conf, _ := (*Config)(nil).withDefaults()
	cc := &captureConn{}
	c := newConn(true, cc, &net.UDPAddr{}, conf, ctls)
	c.origDCID = randomID(8)
	c.p0().dcid = c.origDCID
	c.p0().gso = false
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.start(); err != nil {
		t.Fatal(err)
	}
	c.sendPackets(time.Now())
	c.terminate(ErrClosed)
	pkt := cc.out[0]
	h, n, err := ParseHeader(pkt, connIDLen)
	if err != nil {
		t.Fatal(err)
	}
	client, _ := InitialKeys(c.origDCID)
	o, err := client.UnprotectHeader(pkt[:n], h.PNOffset, -1)
	if err != nil {
		t.Fatal(err)
	}
	o, err = client.Open(pkt[:n], o, 0)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), o.Payload...)
}

func dispatchAll(l *Listener, b []byte, from net.Addr) bool {
	return l.dispatch(datagram{b: append([]byte(nil), b...), from: from})
}

// Initials that do not decrypt leave no state and start no goroutine
// (before, each made a connection with its TLS state and goroutines).
func TestListenerUndecryptableInitials(t *testing.T) {
	l, rc := testListener(t, nil)
	before := runtime.NumGoroutine()
	buf := make([]byte, 1500)
	const n = 2000
	for i := range n {
		dispatchAll(l, fakeInitial(buf), udp(2, 1000+i/16))
	}
	if got := len(l.connList()); got != 0 {
		t.Fatalf("%d connections from undecryptable Initials", got)
	}
	if s := l.Stats(); s.Undecryptable != n || s.HalfOpen != 0 || s.RetriesSent != 0 {
		t.Fatalf("stats %+v", s)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("goroutines %d -> %d", before, after)
	}
	if out := rc.sent(); len(out) != 0 {
		t.Fatalf("%d datagrams answered undecryptable Initials", len(out))
	}
}

// The half-open caps without Retry: per source, then overall; a source's
// connections that complete or end free its share.
func TestListenerHalfOpenCapsDrop(t *testing.T) {
	l, rc := testListener(t, &Config{MaxHalfOpen: 8, MaxHalfOpenPerSource: 3, RetryAboveHalfOpen: -1, RetryAboveRate: -1})
	payload := clientHelloPayload(t)
	send := func(src byte, port int) bool {
		return dispatchAll(l, sealInitial(t, randomID(8), randomID(8), nil, payload, 0), udp(src, port))
	}
	for i := range 5 {
		if got, want := send(2, 1000+i), i < 3; got != want {
			t.Fatalf("source 2, Initial %d: admitted %v", i, got)
		}
	}
	for i := range 5 { // sources 3 and 4 fill the overall cap, source 5 finds it full
		if got, want := send(byte(3+i/3), 2000+i), true; got != want {
			t.Fatalf("Initial %d from another source: admitted %v", i, got)
		}
	}
	if send(5, 3000) {
		t.Fatal("admitted beyond MaxHalfOpen")
	}
	s := l.Stats()
	if s.HalfOpen != 8 || s.Refused != 3 || s.RetriesSent != 0 {
		t.Fatalf("stats %+v", s)
	}
	for _, o := range rc.sent() {
		if o.b[0]&0xf0 == 0xf0 {
			t.Fatal("a Retry was sent with Retry off")
		}
	}
	// One of source 2's connections ends: its share and the overall
	// count go down, and source 2 is admitted again.
	var victim *Conn
	for _, c := range l.connList() {
		if c.lsrc == sourceOf(udp(2, 0)) {
			victim = c
			break
		}
	}
	victim.mu.Lock()
	victim.terminate(ErrClosed)
	victim.mu.Unlock()
	if s := l.Stats(); s.HalfOpen != 7 {
		t.Fatalf("half-open %d after one ended", s.HalfOpen)
	}
	if !send(2, 1100) {
		t.Fatal("source 2 not admitted after one of its connections ended")
	}
}

// With Retry: beyond the per-source and automatic thresholds an Initial
// gets a Retry; the client's next Initial with the token is admitted even
// though its source is at its unvalidated cap; the token from another port
// or to another ID is refused.
func TestListenerHalfOpenCapsRetry(t *testing.T) {
	l, rc := testListener(t, &Config{MaxHalfOpen: 100, MaxHalfOpenPerSource: 2, RetryAboveHalfOpen: 50, RetryAboveRate: -1})
	payload := clientHelloPayload(t)
	for i := range 2 {
		if !dispatchAll(l, sealInitial(t, randomID(8), randomID(8), nil, payload, 0), udp(2, 1000+i)) {
			t.Fatalf("Initial %d not admitted", i)
		}
	}
	odcid, scid := randomID(8), randomID(8)
	from := udp(2, 1002)
	if dispatchAll(l, sealInitial(t, odcid, scid, nil, payload, 0), from) {
		t.Fatal("admitted beyond the per-source cap")
	}
	out := rc.sent()
	retry := out[len(out)-1]
	h, _, err := ParseHeader(retry.b, connIDLen)
	if err != nil || h.Type != PacketRetry || !bytes.Equal(h.DCID, scid) || !VerifyRetry(retry.b, odcid) || retry.to.String() != from.String() {
		t.Fatalf("answer %+v %v to %v", h, err, retry.to)
	}
	if s := l.Stats(); s.RetriesSent != 1 || s.HalfOpen != 2 {
		t.Fatalf("stats %+v", s)
	}
	// The token from elsewhere, or to another ID: dropped.
	if dispatchAll(l, sealInitial(t, h.SCID, scid, h.Token, payload, 1), udp(2, 1003)) ||
		dispatchAll(l, sealInitial(t, randomID(8), scid, h.Token, payload, 1), from) {
		t.Fatal("a token was accepted from another port or for another ID")
	}
	if s := l.Stats(); s.BadTokens != 2 {
		t.Fatalf("stats %+v", s)
	}
	if !dispatchAll(l, sealInitial(t, h.SCID, scid, h.Token, payload, 1), from) {
		t.Fatal("the Initial with the Retry's token was not admitted")
	}
	var c *Conn
	l.mu.Lock()
	c = l.conns[string(h.SCID)]
	l.mu.Unlock()
	if c == nil || !c.lvalid || !bytes.Equal(c.origDCID, odcid) || !bytes.Equal(c.retrySCID, h.SCID) || !c.addrValidated {
		t.Fatalf("the validated connection: %+v", c)
	}
	// Above RetryAboveHalfOpen every new source gets a Retry too.
	for i := range 47 {
		dispatchAll(l, sealInitial(t, randomID(8), randomID(8), nil, payload, 0), udp(byte(10+i), 1000))
	}
	before := l.Stats()
	if dispatchAll(l, sealInitial(t, randomID(8), randomID(8), nil, payload, 0), udp(200, 1000)) {
		t.Fatal("admitted without Retry above RetryAboveHalfOpen")
	}
	if s := l.Stats(); s.RetriesSent != before.RetriesSent+1 || s.HalfOpen != 50 {
		t.Fatalf("stats %+v, before %+v", s, before)
	}
}

// RequireRetry: no Initial without a token makes a connection.
func TestListenerRequireRetry(t *testing.T) {
	l, _ := testListener(t, &Config{RequireRetry: true})
	payload := clientHelloPayload(t)
	for i := range 10 {
		if dispatchAll(l, sealInitial(t, randomID(8), randomID(8), nil, payload, 0), udp(2, 1000+i)) {
			t.Fatal("admitted without a token")
		}
	}
	if s := l.Stats(); s.RetriesSent != 10 || s.HalfOpen != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// A connection's IDs are indexed by the connection: ending it removes all
// of them (the handshake's, those it issued since) and nothing else, and
// a retired one is removed at once.
func TestListenerForgetsItsOwnIDs(t *testing.T) {
	l, _ := testListener(t, &Config{MaxHalfOpenPerSource: 1000, RetryAboveHalfOpen: -1, RetryAboveRate: -1})
	payload := clientHelloPayload(t)
	for i := range 50 {
		dispatchAll(l, sealInitial(t, randomID(8), randomID(8), nil, payload, 0), udp(2, 1000+i))
	}
	conns := l.connList()
	if len(conns) != 50 {
		t.Fatalf("%d connections", len(conns))
	}
	c := conns[7]
	extra := []string{string(randomID(8)), string(randomID(8)), string(randomID(8))}
	for _, id := range extra {
		c.onNewCID([]byte(id))
	}
	c.onRetireID([]byte(extra[1]))
	l.mu.Lock()
	total, own := len(l.conns), len(c.lkeys)
	_, retired := l.conns[extra[1]]
	l.mu.Unlock()
	if total != 50*2+2 || own != 4 || retired {
		t.Fatalf("%d routes, %d of the connection's, retired one routed %v", total, own, retired)
	}
	c.mu.Lock()
	c.terminate(ErrClosed)
	c.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, v := range l.conns {
		if v == c {
			t.Fatalf("ID %x still routes to the ended connection", k)
		}
	}
	if len(l.conns) != 49*2 || l.halfOpen != 49 || c.lkeys != nil {
		t.Fatalf("%d routes, %d half-open after one of 50 ended", len(l.conns), l.halfOpen)
	}
}

// BenchmarkListenerForget is the cost of ending one connection (two IDs)
// among n others: flat in n (it was a scan of every connection's IDs under
// the lock the read loop needs).
func BenchmarkListenerForget(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(itoa(n), func(b *testing.B) {
			l := &Listener{conns: map[string]*Conn{}, sources: map[sourceKey]*sourceCount{}}
			route := func() *Conn {
				c := &Conn{done: make(chan struct{})}
				l.routeLocked(c, string(randomID(8)))
				l.routeLocked(c, string(randomID(8)))
				return c
			}
			for range n {
				route()
			}
			gone := make([]*Conn, b.N)
			for i := range gone {
				gone[i] = route()
			}
			b.ResetTimer()
			for _, c := range gone {
				l.forget(c)
			}
		})
	}
}

func itoa(n int) string {
	switch {
	case n >= 1000000 && n%1000000 == 0:
		return itoa(n/1000000) + "M"
	case n >= 1000 && n%1000 == 0:
		return itoa(n/1000) + "K"
	}
	const d = "0123456789"
	if n < 10 {
		return d[n : n+1]
	}
	return itoa(n/10) + d[n%10:n%10+1]
}

// FuzzListenerDispatch hands a listener datagrams from the fuzzer: as they
// are, or as the plaintext of an Initial protected under the keys of its
// destination ID (so that they pass decryption and reach admission, Retry
// tokens and the new connection), with or without a token. Nothing may
// panic, and the listener's books must hold: every route's connection
// lists it, the half-open count matches the connections still in their
// handshake and stays under its cap.
func FuzzListenerDispatch(f *testing.F) {
	buf := make([]byte, 1500)
	f.Add(fakeInitial(buf), false, []byte(nil), uint8(0))
	f.Add(clientHelloPayload(f), true, []byte(nil), uint8(1))
	f.Add(clientHelloPayload(f), true, []byte("a forged token of some length, 40 bytes+"), uint8(2))
	f.Add(PingFrame{}.Append(nil), true, []byte(nil), uint8(3))
	f.Add(append([]byte{0x40}, make([]byte, 40)...), false, []byte(nil), uint8(4))
	f.Add(append([]byte{0xc0, 0, 0, 0, 2, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0}, make([]byte, 1200)...), false, []byte(nil), uint8(5))
	f.Add(AppendRetry(nil, []byte{1}, []byte{2}, []byte{3}, []byte("t")), false, []byte(nil), uint8(6))
	l, _ := testListener(f, &Config{MaxHalfOpen: 4, MaxHalfOpenPerSource: 2, RetryAboveHalfOpen: 3, RetryAboveRate: -1})
	f.Fuzz(func(t *testing.T, b []byte, protect bool, token []byte, src uint8) {
		if len(b) > 1400 || len(token) > 200 {
			return
		}
		from := udp(src%4, 1000+int(src))
		if protect {
			dcid := append([]byte{src}, make([]byte, 7)...)
			b = sealInitial(t, dcid, []byte{9, 9, 9, 9, 9, 9, 9, 9}, token, b, 0)
		}
		l.dispatch(datagram{b: b, from: from})
		l.mu.Lock()
		half := 0
		for k, c := range l.conns {
			found := false
			for _, own := range c.lkeys {
				found = found || own == k
			}
			if !found {
				l.mu.Unlock()
				t.Fatalf("route %x not listed by its connection", k)
			}
		}
		seen := map[*Conn]bool{}
		for _, c := range l.conns {
			if !seen[c] && c.lhalfOpen {
				half++
			}
			seen[c] = true
		}
		h := l.halfOpen
		l.mu.Unlock()
		if h != half || h > 4 {
			t.Fatalf("half-open count %d, connections in their handshake %d (cap 4)", h, half)
		}
		if len(seen) >= 4 {
			endAll(l) // room for the next inputs
		}
	})
}

// The listener's cheap check derives the same keys as InitialKeys: the
// RFC 9001 Appendix A.2 client Initial opens, a changed one does not, and
// Initials under random IDs open exactly when they were sealed for them.
func TestInitialCheck(t *testing.T) {
	ic := newInitialCheck()
	a2 := hextest.Read(t, "rfc9001_a2_packet.hex")
	h, n, err := ParseHeader(a2, connIDLen)
	if err != nil {
		t.Fatal(err)
	}
	before := append([]byte(nil), a2...)
	if !ic.opens(a2[:n], h) {
		t.Fatal("the RFC's client Initial does not open")
	}
	if !bytes.Equal(a2, before) {
		t.Fatal("the check changed the packet")
	}
	for _, i := range []int{0, h.PNOffset, h.PNOffset + 30, n - 1} {
		bad := append([]byte(nil), a2...)
		bad[i] ^= 0x01
		if hb, nb, err := ParseHeader(bad, connIDLen); err == nil && ic.opens(bad[:nb], hb) {
			t.Errorf("opens with byte %d changed", i)
		}
	}
	payload := PingFrame{}.Append(nil)
	for i := range 200 {
		dcid := randomID(8 + i%13)
		pkt := sealInitial(t, dcid, randomID(8), nil, payload, uint64(i))
		h, n, err := ParseHeader(pkt, connIDLen)
		if err != nil || !ic.opens(pkt[:n], h) {
			t.Fatalf("Initial %d to %x: %v", i, dcid, err)
		}
		copy(pkt[6:], randomID(8)) // another DCID: other keys
		h, n, _ = ParseHeader(pkt, connIDLen)
		if ic.opens(pkt[:n], h) {
			t.Fatalf("Initial %d opens under another DCID's keys", i)
		}
	}
}
