package interop

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// relay is a loopback UDP relay between a client and a server, a NAT of
// the tests' own: each client address gets its own socket toward the
// server, so a client that moves is seen moving; rebind moves the one
// client to a new socket (port) or address without telling anyone. Its
// fault is asked about every datagram, and it logs what it forwarded.
type relay struct {
	t      *testing.T
	front  *net.UDPConn
	server *net.UDPAddr

	mu     sync.Mutex
	backs  map[string]*back // client address -> its socket toward the server
	fault  func(d dir, b []byte, now time.Time) verdict
	log    []seen
	closed bool
	// forwardECN makes the relay carry each datagram's ECN codepoint
	// (the ecn case); otherwise it sends every datagram Not-ECT, a
	// bleaching path, as plain sockets do.
	forwardECN atomic.Bool
	// link, when set, carries the datagrams both ways (the goodput
	// cases' bottleneck), after the fault.
	link atomic.Pointer[link]
}

type back struct {
	conn   *net.UDPConn
	client net.Addr
	live   bool // a rebound socket is no longer the client's mapping
	// next is the socket that replaced this one, and used says a client
	// datagram went out through a socket. The old mapping still delivers
	// the server's datagrams until the new one has carried the client's
	// first: a NAT forgets a binding after an idle time, not at once. Cut
	// at once, a client that had just acknowledged everything had nothing
	// to send, and the server's datagrams (and probes) to the dead mapping
	// never reached it: both ends waited for the idle timeout (seen in
	// about 1 in 30 runs of rebind-port with mpquic's client and ngtcp2).
	next *back
	used bool
}

type dir int

const (
	toServer dir = iota
	toClient
)

func (d dir) String() string { return [...]string{"client->server", "server->client"}[d] }

type verdict int

const (
	pass verdict = iota
	drop
	corrupt
)

// seen is one datagram through the relay.
type seen struct {
	dir     dir
	at      time.Time
	size    int
	first   byte   // the first byte (long header: form and type are not protected)
	head    []byte // the first 32 bytes: the header's connection IDs (migrate_test.go)
	version uint32 // long header's version, 0 for a short header
	back    string // the server-side socket's address
	ecn     byte   // the ECN codepoint it arrived with
	zeroRTT int    // 0-RTT packets in it, coalesced ones too (zerortt_test.go)
	longs   []long // its long-header packets, coalesced ones too (version_test.go)
	verdict verdict
}

// longType is the long header's packet type for QUIC v1 (RFC 9000 §17.2)
// and v2 (RFC 9369 §3.2), as named in v1.
func (s seen) longType() string {
	if s.first&0x80 == 0 || s.version == 0 {
		return ""
	}
	t := (s.first >> 4) & 3
	if s.version == 0x6b3343cf { // v2 rotates the types
		t = (t + 3) & 3
	}
	return [...]string{"initial", "0rtt", "handshake", "retry"}[t]
}

func newRelay(t *testing.T, server net.Addr) *relay {
	t.Helper()
	front, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	enableTOS(front)
	r := &relay{t: t, front: front, server: server.(*net.UDPAddr), backs: map[string]*back{}}
	t.Cleanup(r.close)
	go r.fromClients()
	return r
}

func (r *relay) Addr() *net.UDPAddr { return r.front.LocalAddr().(*net.UDPAddr) }

func (r *relay) close() {
	r.mu.Lock()
	r.closed = true
	bs := r.backs
	r.mu.Unlock()
	r.front.Close()
	for _, b := range bs {
		b.conn.Close()
	}
}

func (r *relay) setFault(f func(d dir, b []byte, now time.Time) verdict) {
	r.mu.Lock()
	r.fault = f
	r.mu.Unlock()
}

// apply logs b and says what to do with it; a corrupted datagram has one
// byte flipped past its first (the runner's corruption flips bits
// anywhere; the first byte's flip would mostly make it unparseable).
func (r *relay) apply(d dir, b []byte, backAddr string, ecn byte) verdict {
	now := time.Now()
	s := seen{dir: d, at: now, size: len(b), back: backAddr, ecn: ecn}
	if len(b) > 0 {
		s.first = b[0]
		s.head = append([]byte(nil), b[:min(len(b), 32)]...)
		if b[0]&0x80 != 0 && len(b) >= 5 {
			s.version = binary.BigEndian.Uint32(b[1:5])
			s.zeroRTT = zeroRTTPackets(b)
			s.longs = longPackets(b)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fault != nil {
		s.verdict = r.fault(d, b, now)
	}
	r.log = append(r.log, s)
	return s.verdict
}

func (r *relay) fromClients() {
	buf, oob := make([]byte, 65536), make([]byte, 128)
	for {
		n, oobn, _, from, err := r.front.ReadMsgUDP(buf, oob)
		if err != nil {
			return
		}
		b, err := r.backFor(from)
		if err != nil {
			return
		}
		ecn := ecnOf(oob[:oobn])
		v := r.apply(toServer, buf[:n], b.conn.LocalAddr().String(), ecn)
		if v == drop {
			continue
		}
		if v == corrupt {
			flip(buf[:n])
		}
		r.forward(toServer, b.conn, buf[:n], r.server, ecn)
	}
}

// forward writes b on, across the link when there is one.
func (r *relay) forward(d dir, c *net.UDPConn, b []byte, to *net.UDPAddr, ecn byte) {
	if l := r.link.Load(); l != nil {
		l.send(d, r, b, func(b []byte) { r.write(c, b, to, ecn) })
		return
	}
	r.write(c, b, to, ecn)
}

// write sends b to, with its ECN codepoint when the relay carries them.
func (r *relay) write(c *net.UDPConn, b []byte, to *net.UDPAddr, ecn byte) {
	if r.forwardECN.Load() && ecn != 0 {
		c.WriteMsgUDP(b, ecnMsg(ecn), to)
		return
	}
	c.WriteToUDP(b, to)
}

func (r *relay) backFor(from *net.UDPAddr) (*back, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, ok := r.backs[from.String()]; ok {
		b.used = true
		return b, nil
	}
	if r.closed {
		return nil, errors.New("closed")
	}
	return r.newBackLocked(from, "127.0.0.1")
}

func (r *relay) newBackLocked(client net.Addr, ip string) (*back, error) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		return nil, err
	}
	enableTOS(c)
	b := &back{conn: c, client: client, live: true, used: true}
	r.backs[client.String()] = b
	go r.fromServer(b)
	return b, nil
}

func (r *relay) fromServer(b *back) {
	buf, oob := make([]byte, 65536), make([]byte, 128)
	for {
		n, oobn, _, _, err := b.conn.ReadMsgUDP(buf, oob)
		if err != nil {
			return
		}
		ecn := ecnOf(oob[:oobn])
		r.mu.Lock()
		live := b.live || (b.next != nil && !b.next.used)
		r.mu.Unlock()
		v := r.apply(toClient, buf[:n], b.conn.LocalAddr().String(), ecn)
		if !live || v == drop {
			continue
		}
		if v == corrupt {
			flip(buf[:n])
		}
		r.forward(toClient, r.front, buf[:n], b.client.(*net.UDPAddr), ecn)
	}
}

// rebind gives every client a new socket toward the server, on ip: a NAT
// rebinding (same ip: a new port; another: a new address). The old socket
// keeps reading, so that what the server still sends there is logged; it
// forwards it only until the new socket has carried a client datagram
// (see back.next). It returns the new sockets' addresses.
func (r *relay) rebind(ip string) []string {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var addrs []string
	for _, old := range r.backs {
		if !old.live {
			continue
		}
		old.live = false
		nb, err := r.newBackLocked(old.client, ip)
		if err != nil {
			r.t.Errorf("rebind to %s: %v", ip, err)
			continue
		}
		nb.used = false
		old.next = nb
		addrs = append(addrs, nb.conn.LocalAddr().String())
	}
	return addrs
}

// seenLog is a copy of the log so far.
func (r *relay) seenLog() []seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]seen(nil), r.log...)
}

// count counts the logged datagrams that match.
func (r *relay) count(match func(seen) bool) (n, bytes int) {
	for _, s := range r.seenLog() {
		if match(s) {
			n++
			bytes += s.size
		}
	}
	return n, bytes
}

func flip(b []byte) {
	if len(b) < 2 {
		return
	}
	i := 1 + rand.IntN(len(b)-1)
	b[i] ^= byte(1 << rand.IntN(8))
}

// lossy drops (or corrupts) each datagram in either direction with
// probability rate, from a seeded generator: the runner's drop-rate and
// corrupt-rate.
func lossy(rate float64, v verdict, seed uint64) func(dir, []byte, time.Time) verdict {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	return func(dir, []byte, time.Time) verdict {
		if rng.Float64() < rate {
			return v
		}
		return pass
	}
}
