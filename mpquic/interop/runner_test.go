package interop

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mptester/mptester/mpquic"
	"github.com/mptester/mptester/mpquic/h3"
)

// The runner's cases, each in both roles. A subtest's name is
// <case>/<role>; scripts/interop-matrix reads them from `go test -json`.
// A case a peer cannot run is skipped with a message starting
// "unsupported:" and the peer's reason.

type role string

const (
	mpquicClient role = "mpquic-client" // mpquic's client, the peer's server
	mpquicServer role = "mpquic-server" // the peer's client, mpquic's server
)

const hqALPN = "hq-interop"

// handshakeTimeout is both sides' in every case: at the runner's 30 %
// loss or corruption each way a handshake of six datagrams completes
// all in one round one time in eight, and PTOs back off.
const handshakeTimeout = 40 * time.Second

// opts is what a case asks of both sides.
type opts struct {
	alpn      string
	files     map[string][]byte
	perConn   bool // each file on a connection of its own (the handshake cases)
	resume    bool // ... one after the other, resuming the first's TLS session
	zeroRTT   bool // ... the second sending its request in 0-RTT (zerortt_test.go)
	v2        bool // both sides speak QUIC version 2 (RFC 9369) from the first Initial
	cvn       bool // the client starts in v1 offering v2; the server moves it (RFC 9368)
	retry     bool // the server requires a Retry
	keyUpdate bool // the client updates its keys
	bigCert   bool // a server certificate chain far above 3x a client Initial
	migrate   bool // the client moves to a new address mid-transfer
	chacha    bool // TLS_CHACHA20_POLY1305_SHA256 only, where the peer can say so
	ecn       bool // the relay carries ECN codepoints (else it bleaches them)
}

// idle is every side's idle timeout: 20 s, 60 s in the handshake loss
// cases, where PTOs backed off four times in a row (30 % loss each way,
// a probe and its answer) reach 16 s between packets: a peer giving up
// there (ngtcp2's client did, once in about 50 runs) is the loss's
// doing, not a defect of either side.
func (o *opts) idle() time.Duration {
	if o.perConn && !o.resume {
		return 60 * time.Second
	}
	return 20 * time.Second
}

func (o *opts) total() int {
	n := 0
	for _, b := range o.files {
		n += len(b)
	}
	return n
}

func (o *opts) paths() []string {
	ps := make([]string, 0, len(o.files))
	for p := range o.files {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// evidence is what a peer's side recorded: its qlog (all connections) and
// its view of the TLS handshake.
type evidence struct {
	mu      sync.Mutex
	qlog    bytes.Buffer
	cipher  uint16
	version uint32
	alpn    string
	resumed int // connections the peer says resumed a session
	early   int // connections the peer says used 0-RTT (a peer in this process)
	// onCheck, when set, gathers what the peer wrote (its qlog files)
	// before the checks.
	onCheck func()
}

func (e *evidence) Write(b []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.qlog.Write(b)
}

// tls is what the peer's TLS said: the cipher suite of its last
// connection (0: the peer is in another process and did not say) and
// how many connections resumed.
func (e *evidence) tls() (cipher uint16, resumed int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cipher, e.resumed
}

func (e *evidence) qlogText() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.qlog.String()
}

// peer is a QUIC implementation we did not write.
type peer interface {
	name() string
	version() string
	// alpn is the application protocol the peer speaks in the cases:
	// hq-interop, or h3 for a peer without it (mpquic/h3 on our side).
	alpn() string
	// unsupported says why the peer cannot run case c in role r ("" when it can).
	unsupported(c string, r role) string
	// serve starts the peer's server for o's files and returns its address.
	serve(t *testing.T, ctx context.Context, o *opts, tc *tls.Config) (net.Addr, *evidence)
	// fetch runs the peer's client against addr and returns the bodies.
	fetch(t *testing.T, ctx context.Context, o *opts, addr net.Addr, tc *tls.Config) (map[string][]byte, *evidence, error)
	// amplificationSlack is how far past three times what it received the
	// peer's server is known to go before validating an address, and why
	// (0 and "": not at all).
	amplificationSlack() (int, string)
	// keyUpdated says whether the peer's own record shows a 1-RTT key
	// update it initiated (or followed), and what was looked for.
	keyUpdated(ev *evidence, initiated bool) (bool, string)
}

// run is one case in one role, for its checks.
type run struct {
	o       *opts
	role    role
	peer    peer
	relay   *relay
	peerEv  *evidence
	conns   []*mpquic.Conn   // mpquic's side
	ln      *mpquic.Listener // mpquic's server
	rebound chan []string    // the relay's new server-side sockets, once rebound
}

type tcase struct {
	name  string
	setup func(o *opts)
	fault func(r *run) func(dir, []byte, time.Time) verdict
	check func(t *testing.T, r *run)
}

func files(sizes ...int) map[string][]byte {
	m := map[string][]byte{}
	for i, n := range sizes {
		m[fmt.Sprintf("/f%d", i)] = testData(n, byte(i+1))
	}
	return m
}

var cases = []tcase{
	{name: "handshake", setup: func(o *opts) { o.files = files(1 << 10) },
		check: func(t *testing.T, r *run) { checkVersion(t, r, 1); checkConnections(t, r, 1) }},
	{name: "transfer", setup: func(o *opts) { o.files = files(1<<20, 2<<20, 3<<20) },
		check: func(t *testing.T, r *run) { checkConnections(t, r, 1) }},
	{name: "multiplexing", setup: func(o *opts) { o.files = files(manySizes(400)...) },
		check: func(t *testing.T, r *run) { checkConnections(t, r, 1) }},
	{name: "retry", setup: func(o *opts) { o.files = files(64 << 10); o.retry = true }, check: checkRetry},
	{name: "resumption", setup: func(o *opts) { o.files = files(1<<10, 2<<10); o.perConn, o.resume = true, true }, check: checkResumed},
	{name: "zerortt", setup: setupZeroRTT, check: checkZeroRTT},
	// The runner's v2: the client starts in v1 with v2 in its
	// version_information, the server moves it to v2 (compatible version
	// negotiation, RFC 9368; versionneg_test.go).
	{name: "v2", setup: func(o *opts) { o.files = files(1 << 10); o.cvn = true }, check: checkCVN},
	// QUIC v2 from the client's first Initial, no negotiation: RFC 9369's
	// keys, labels and type bits against a peer that cannot negotiate.
	{name: "v2-direct", setup: func(o *opts) { o.files = files(1 << 20); o.v2 = true }, check: checkV2},
	{name: "keyupdate", setup: func(o *opts) { o.files = files(2 << 20); o.keyUpdate = true }, check: checkKeyUpdate},
	{name: "chacha20", setup: func(o *opts) { o.files = files(1 << 20); o.chacha = true }, check: checkChaCha},
	{name: "rebind-port", setup: func(o *opts) { o.files = files(3 << 20) },
		fault: rebindAt("127.0.0.1"), check: checkRebound},
	{name: "rebind-addr", setup: func(o *opts) { o.files = files(3 << 20) },
		fault: rebindAt("127.0.0.2"), check: checkRebound},
	// 16 MiB, and quic-go's client stops reading at a third until it has
	// switched: with 3 MiB the server had sent the rest into the client's
	// autotuned window before the switch in 2-7 runs of 100, with nothing
	// left to send to the new address (the test's race, not a defect).
	{name: "connectionmigration", setup: func(o *opts) { o.files = files(16 << 20); o.migrate = true }, check: checkMigrated},
	{name: "amplificationlimit", setup: func(o *opts) { o.files = files(8 << 10); o.bigCert = true },
		fault: holdClient, check: checkAmplification},
	{name: "handshakeloss", setup: func(o *opts) { o.files = files(1<<10, 1<<10, 1<<10, 1<<10, 1<<10); o.perConn = true },
		fault: func(*run) func(dir, []byte, time.Time) verdict { return lossy(0.30, drop, 1) }, check: checkFaults(drop)},
	{name: "transferloss", setup: func(o *opts) { o.files = files(2 << 20) },
		fault: func(*run) func(dir, []byte, time.Time) verdict { return lossy(0.02, drop, 2) }, check: checkFaults(drop)},
	{name: "handshakecorruption", setup: func(o *opts) { o.files = files(1<<10, 1<<10, 1<<10, 1<<10, 1<<10); o.perConn = true },
		fault: func(*run) func(dir, []byte, time.Time) verdict { return lossy(0.30, corrupt, 3) }, check: checkFaults(corrupt)},
	{name: "transfercorruption", setup: func(o *opts) { o.files = files(2 << 20) },
		fault: func(*run) func(dir, []byte, time.Time) verdict { return lossy(0.02, corrupt, 4) }, check: checkFaults(corrupt)},
	{name: "ecn", setup: func(o *opts) { o.files = files(2 << 20); o.ecn = true }, check: checkECN},
	{name: "blackhole", setup: func(o *opts) { o.files = files(3 << 20) }, fault: blackholeAt, check: checkFaults(drop)},
}

// manySizes is n small files of varied sizes (the runner's multiplexing
// case asks for more files than a peer's initial stream limit).
func manySizes(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = 32 + (i*97)%2048
	}
	return s
}

// runSuite runs every case against p in both roles.
func runSuite(t *testing.T, p peer) {
	t.Logf("peer %s %s", p.name(), p.version())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, ro := range []role{mpquicClient, mpquicServer} {
				t.Run(string(ro), func(t *testing.T) {
					if why := p.unsupported(c.name, ro); why != "" {
						t.Skipf("unsupported: %s", why)
					}
					if c.name == "rebind-addr" && runtime.GOOS != "linux" {
						t.Skip("127.0.0.2 is a loopback address on Linux only")
					}
					if c.name == "chacha20" && p.name() == "quic-go" && os.Getenv(chachaChild) == "" {
						runChaChaChild(t)
						return
					}
					runCase(t, p, c, ro)
				})
			}
		})
	}
}

func runCase(t *testing.T, p peer, c tcase, ro role) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	o := &opts{alpn: p.alpn()}
	c.setup(o)
	stls, ctls := testTLS(t, o.alpn, o.bigCert)
	r := &run{o: o, role: ro, peer: p}
	var got map[string][]byte
	switch ro {
	case mpquicClient:
		addr, ev := p.serve(t, ctx, o, stls)
		r.peerEv = ev
		r.relay = newRelay(t, addr)
		r.relay.forwardECN.Store(o.ecn)
		if c.fault != nil {
			r.relay.setFault(c.fault(r))
		}
		var err error
		got, r.conns, err = mpquicFetch(ctx, o, r.relay.Addr(), ctls, t.Logf)
		if err != nil {
			t.Fatalf("mpquic client: %v", err)
		}
	case mpquicServer:
		ln, accepted := mpquicServe(t, ctx, o, stls)
		r.ln = ln
		r.relay = newRelay(t, ln.Addr())
		r.relay.forwardECN.Store(o.ecn)
		if c.fault != nil {
			r.relay.setFault(c.fault(r))
		}
		var err error
		got, r.peerEv, err = p.fetch(t, ctx, o, r.relay.Addr(), ctls)
		if err != nil {
			t.Fatalf("%s client: %v", p.name(), err)
		}
		r.conns = accepted()
	}
	for _, path := range o.paths() {
		if want := o.files[path]; !bytes.Equal(got[path], want) {
			t.Errorf("%s: %d bytes, want %d (equal prefix %d)", path, len(got[path]), len(want), commonPrefix(got[path], want))
		}
	}
	if r.peerEv != nil && r.peerEv.onCheck != nil {
		r.peerEv.onCheck()
	}
	if c.check != nil && !t.Failed() {
		c.check(t, r)
	}
	for _, mc := range r.conns {
		mc.CloseWithError(0, "")
	}
}

// mpquicFetch gets o's files from addr with mpquic's client: all on one
// connection, concurrently, or each on its own.
func mpquicFetch(ctx context.Context, o *opts, addr *net.UDPAddr, ctls *tls.Config, logf func(string, ...any)) (map[string][]byte, []*mpquic.Conn, error) {
	conf := &mpquic.Config{DisableMultipath: true, MaxIdleTimeout: o.idle(), HandshakeTimeout: handshakeTimeout, MaxIncomingUniStreams: 8}
	if o.v2 {
		conf.Version = mpquic.Version2
	}
	if o.cvn {
		conf.Versions = []uint32{mpquic.Version2, mpquic.Version1} // starts in Version, v1
	}
	var (
		mu    sync.Mutex
		got   = map[string][]byte{}
		conns []*mpquic.Conn
		first error
	)
	dialAddr := mpquic.DialAddr
	if o.zeroRTT {
		dialAddr = mpquic.DialAddrEarly // returns at once when 0-RTT is possible
	}
	dial := func() (*mpquic.Conn, error) {
		c, err := dialAddr(ctx, addr.String(), ctls, conf)
		var pe *mpquic.PeerCloseError
		if errors.As(err, &pe) && pe.Err.Code == mpquic.InvalidToken && !o.retry {
			// Our Initials carry no token here: the server read a token
			// length out of a corrupted Initial it had not authenticated
			// (RFC 9000 §8.1.3 closes only "otherwise valid" ones). The
			// peer's doing: once more.
			logf("peer-note: the server closed a connection with INVALID_TOKEN though the client sent no token (a corrupted Initial not authenticated first); dialed again")
			c, err = mpquic.DialAddr(ctx, addr.String(), ctls, conf)
		}
		if err != nil {
			return nil, err
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		return c, nil
	}
	var shared *mpquic.Conn
	if !o.perConn {
		var err error
		if shared, err = dial(); err != nil {
			return nil, nil, err
		}
	}
	moved := func() error { return nil }
	if o.keyUpdate && shared != nil {
		ctx = withKeyUpdate(ctx, o, shared)
	}
	if o.migrate && shared != nil {
		ctx, moved = withMigration(ctx, o, shared, logf)
	}
	if o.resume {
		ctls = ctls.Clone()
		ctls.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	}
	var wg sync.WaitGroup
	for _, path := range o.paths() {
		goOrNot(&wg, o.resume, func() {
			c := shared
			var err error
			if c == nil {
				if c, err = dial(); err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
					return
				}
			}
			get := hqGet
			if o.alpn == h3.ALPN {
				get = h3Get
			}
			body, err := get(ctx, c, path)
			if o.resume {
				waitTicket(ctls.ClientSessionCache)
			}
			mu.Lock()
			got[path] = body
			first = cmpErr(first, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	first = cmpErr(first, moved())
	return got, conns, first
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// withKeyUpdate arms one key update of c mid-transfer, as the runner's
// clients do: the body's reader waits at a third of the file until the
// update is made, so the rest crosses in the new phase. mpquic's client
// sends ACKs only, and after following the peer's own update (quic-go
// updates after 100 packets) nothing of the current phase is
// acknowledged: UpdateKeys then asks for an acknowledgment (RFC 9001
// §6.1) and is called again. Unheld, a loopback transfer once ended
// within those few milliseconds and no update was made (CI, session 19).
func withKeyUpdate(ctx context.Context, o *opts, c *mpquic.Conn) context.Context {
	return atAThird(ctx, o, func() {
		for c.UpdateKeys() != nil && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		// The peer sees the update in the first packet of the new phase
		// it opens, and one that has sent the whole file already gets
		// none: this call, refused until a packet of the new phase is
		// acknowledged, sends a PING in it (or, if one was, updates
		// again).
		c.UpdateKeys()
	})
}

// hqGet is one hq-interop request (HTTP/0.9 on a bidirectional stream).
func hqGet(ctx context.Context, c *mpquic.Conn, path string) ([]byte, error) {
	s, err := c.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := s.Write([]byte("GET " + path + "\r\n")); err != nil {
		return nil, err
	}
	s.Close()
	if dl, ok := ctx.Deadline(); ok {
		s.SetReadDeadline(dl)
	}
	return io.ReadAll(gated(ctx, s))
}

// waitTicket waits (up to 2 s) for a session ticket in cache: a server
// may send it after a small response, and the connection must not end
// before it arrives.
func waitTicket(cache tls.ClientSessionCache) {
	for i := 0; i < 200; i++ {
		if s, ok := cache.Get("localhost"); ok && s != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// goOrNot runs f in wg, or now when in order.
func goOrNot(wg *sync.WaitGroup, inOrder bool, f func()) {
	if inOrder {
		f()
		return
	}
	wg.Go(f)
}

// checkResumed: the second connection resumed the first's session
// (RFC 9001 §4.6), as TLS on mpquic's side says: the peer accepted the
// ticket it issued (or issued the ticket mpquic's server accepted).
func checkResumed(t *testing.T, r *run) {
	t.Helper()
	if len(r.conns) != 2 {
		t.Fatalf("%d connections, want 2", len(r.conns))
	}
	if r.conns[0].ConnectionState().DidResume {
		t.Error("the first connection resumed a session")
	}
	if !r.conns[1].ConnectionState().DidResume {
		t.Error("the second connection did not resume the first's session")
	}
	// A peer in this process says so too (its server's accept loop
	// may see the second connection a moment after our client).
	for i := 0; i < 200; i++ {
		if cipher, resumed := r.peerEv.tls(); cipher == 0 || resumed > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Error("the peer says no connection resumed")
}

// h3Get is one HTTP/3 GET (mpquic/h3) on c.
func h3Get(ctx context.Context, c *mpquic.Conn, path string) ([]byte, error) {
	cc, err := h3Client(c)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://localhost"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := cc.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return io.ReadAll(gated(ctx, resp.Body))
}

var (
	h3Mu      sync.Mutex
	h3Clients = map[*mpquic.Conn]*h3.ClientConn{}
)

// h3Client is c's one HTTP/3 client (one control stream a connection).
func h3Client(c *mpquic.Conn) (*h3.ClientConn, error) {
	h3Mu.Lock()
	defer h3Mu.Unlock()
	if cc, ok := h3Clients[c]; ok {
		return cc, nil
	}
	cc, err := h3.NewClientConn(c)
	if err != nil {
		return nil, err
	}
	h3Clients[c] = cc
	return cc, nil
}

// mpquicServe starts mpquic's hq-interop (or HTTP/3) server; accepted returns the
// connections it accepted so far.
func mpquicServe(t *testing.T, ctx context.Context, o *opts, stls *tls.Config) (*mpquic.Listener, func() []*mpquic.Conn) {
	t.Helper()
	conf := &mpquic.Config{DisableMultipath: true, RequireRetry: o.retry, Allow0RTT: o.zeroRTT, MaxIdleTimeout: o.idle(), HandshakeTimeout: handshakeTimeout, MaxIncomingUniStreams: 8}
	ln, err := mpquic.ListenAddr("127.0.0.1:0", stls, conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var (
		mu    sync.Mutex
		conns []*mpquic.Conn
	)
	go func() {
		for {
			c, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			if o.alpn == h3.ALPN {
				go (&h3.Server{Handler: filesHandler(o.files)}).ServeConn(ctx, c)
				continue
			}
			go func() {
				for {
					s, err := c.AcceptStream(ctx)
					if err != nil {
						return
					}
					go hqAnswer(s, s, o.files)
				}
			}()
		}
	}()
	return ln, func() []*mpquic.Conn {
		mu.Lock()
		defer mu.Unlock()
		return append([]*mpquic.Conn(nil), conns...)
	}
}

// filesHandler serves files over HTTP/3.
func filesHandler(files map[string][]byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	})
}

// hqAnswer reads one "GET /path" request from r and writes the file to w,
// closing it; an unknown path is answered by cancel.
func hqAnswer(r io.Reader, w interface {
	io.WriteCloser
	CancelWrite(uint64)
}, files map[string][]byte) {
	req, _ := io.ReadAll(io.LimitReader(r, 4096))
	path, ok := strings.CutPrefix(strings.TrimRight(string(req), "\r\n"), "GET ")
	body, found := files[path]
	if !ok || !found {
		w.CancelWrite(1)
		return
	}
	w.Write(body)
	w.Close()
}

// testTLS is a server certificate for "localhost" and a client trusting
// only it; bigCert makes the chain about 12 KB (many names), so the
// server's first flight is far above three times a client Initial.
func testTLS(t testing.TB, alpn string, bigCert bool) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"localhost"}
	if bigCert {
		for i := range 500 {
			names = append(names, fmt.Sprintf("name-%03d.interop.example", i))
		}
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: names, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{alpn}}
	client = &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{alpn}}
	return server, client
}

// testData is n deterministic pseudo-random bytes.
func testData(n int, seed byte) []byte {
	b := make([]byte, 0, n+32)
	h := sha256.Sum256([]byte{seed})
	for len(b) < n {
		b = append(b, h[:]...)
		h = sha256.Sum256(h[:])
	}
	return b[:n]
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// The checks: each looks at the property itself, in the relay's log, the
// peer's qlog or mpquic's counters.

// checkVersion: every long header on the wire carried version v.
func checkVersion(t *testing.T, r *run, v uint32) {
	t.Helper()
	n, _ := r.relay.count(func(s seen) bool { return s.version != 0 && s.version != v })
	all, _ := r.relay.count(func(s seen) bool { return s.version != 0 })
	if n > 0 || all == 0 {
		t.Errorf("%d of %d long-header datagrams carried a version other than 0x%x", n, all, v)
	}
}

// checkConnections: the client used n connections (one relay mapping
// each, and as many connections on mpquic's side).
func checkConnections(t *testing.T, r *run, n int) {
	t.Helper()
	if len(r.conns) != n {
		t.Errorf("%d mpquic connections, want %d", len(r.conns), n)
	}
	inits, _ := r.relay.count(func(s seen) bool { return s.dir == toServer && s.longType() == "initial" })
	if inits == 0 {
		t.Error("no client Initial seen")
	}
}

func checkRetry(t *testing.T, r *run) {
	t.Helper()
	n, _ := r.relay.count(func(s seen) bool { return s.dir == toClient && s.longType() == "retry" })
	// One Retry per Initial of the client's first flight (a ClientHello
	// with a post-quantum key share takes two); the client follows one.
	if n == 0 {
		t.Error("no Retry packet seen")
	}
	if r.ln != nil {
		if st := r.ln.Stats(); st.RetriesSent == 0 {
			t.Errorf("mpquic's listener sent no Retry")
		}
	}
	checkConnections(t, r, 1)
	t.Logf("%d Retry packets", n)
}

// checkKeyUpdate: the client updated its keys, the server followed, and
// the peer's qlog records the update.
func checkKeyUpdate(t *testing.T, r *run) {
	t.Helper()
	var s mpquic.Stats
	for _, c := range r.conns {
		s = c.Stats()
	}
	if r.role == mpquicClient && s.KeyUpdatesInitiated == 0 {
		t.Errorf("mpquic's client started no key update (stats %+v)", s)
	}
	if r.role == mpquicServer && s.KeyUpdatesFollowed == 0 {
		t.Errorf("mpquic's server followed no key update of the client's")
	}
	if ok, what := r.peer.keyUpdated(r.peerEv, r.role == mpquicServer); !ok {
		t.Errorf("the peer's record shows no key update: no %s", what)
	}
	t.Logf("mpquic: %d key updates started, %d followed", s.KeyUpdatesInitiated, s.KeyUpdatesFollowed)
}

// waitQlog waits (up to 2 s) for the peer's qlog to hold an event: the
// peer writes its trace from a goroutine of its own.
func waitQlog(e *evidence, event string) {
	for i := 0; i < 200 && e != nil && !strings.Contains(e.qlogText(), event); i++ {
		time.Sleep(10 * time.Millisecond)
	}
}

const chachaChild = "MPTESTER_INTEROP_CHACHA_CHILD"

// runChaChaChild runs the chacha20 case in a child process without AES
// instructions (GODEBUG=cpu.aes=off): crypto/tls, both mpquic's and the
// peer's, then prefers TLS_CHACHA20_POLY1305_SHA256 (TLS 1.3's suites are
// not configurable in crypto/tls), so ChaCha20-Poly1305 protects the
// packets and ChaCha20 their headers (RFC 9001 §5.4.4).
func runChaChaChild(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("unsupported: cpu.aes=off is amd64's")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+strings.Split(t.Name(), "/")[0]+"$/^chacha20$/^"+strings.Split(t.Name(), "/")[2]+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), chachaChild+"=1", "GODEBUG=cpu.aes=off")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS")) {
		t.Fatalf("chacha20 child: %v\n%s", err, out)
	}
	t.Logf("child: %s", bytes.TrimSpace(grepLines(out, "cipher")))
}

func grepLines(b []byte, s string) []byte {
	var out []byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if bytes.Contains(l, []byte(s)) {
			out = append(append(out, l...), '\n')
		}
	}
	return out
}

func checkChaCha(t *testing.T, r *run) {
	t.Helper()
	for _, c := range r.conns {
		if cs := c.ConnectionState().CipherSuite; cs != tls.TLS_CHACHA20_POLY1305_SHA256 {
			t.Errorf("mpquic negotiated %s", tls.CipherSuiteName(cs))
		}
	}
	// A peer in another process was told to allow ChaCha20-Poly1305
	// only (o.chacha); one in this process says what it negotiated.
	if cipher, _ := r.peerEv.tls(); cipher != 0 && cipher != tls.TLS_CHACHA20_POLY1305_SHA256 {
		t.Errorf("the peer negotiated %s", tls.CipherSuiteName(cipher))
	}
	t.Logf("cipher suite %s", tls.CipherSuiteName(r.conns[0].ConnectionState().CipherSuite))
}

// rebindAt moves the client's NAT mapping to a new socket on ip once a
// third of the files went to the client.
func rebindAt(ip string) func(r *run) func(dir, []byte, time.Time) verdict {
	return func(r *run) func(dir, []byte, time.Time) verdict {
		r.rebound = make(chan []string, 1)
		var sent int
		done := false
		return func(d dir, b []byte, _ time.Time) verdict {
			if d == toClient {
				sent += len(b)
			}
			if !done && sent > r.o.total()/3 {
				done = true
				go func() { r.rebound <- r.relay.rebind(ip) }()
			}
			return pass
		}
	}
}

// checkRebound: the server sent to the client's new address after the
// rebinding (and, for mpquic's server, ends up sending there).
func checkRebound(t *testing.T, r *run) {
	t.Helper()
	var rebound []string
	select {
	case rebound = <-r.rebound:
	case <-time.After(5 * time.Second):
	}
	if len(rebound) != 1 {
		t.Fatalf("rebound sockets %v", rebound)
	}
	n, _ := r.relay.count(func(s seen) bool { return s.dir == toClient && s.back == rebound[0] })
	if n == 0 {
		t.Errorf("the server sent nothing to the client's new address %s", rebound[0])
	}
	if r.role == mpquicServer {
		for _, c := range r.conns {
			if ra := c.PathStats()[0].RemoteAddr.String(); ra != rebound[0] {
				t.Errorf("mpquic's server sends to %s, not the client's new address %s", ra, rebound[0])
			}
		}
	}
	t.Logf("%d datagrams to the new address %s", n, rebound[0])
}

// checkMigrated: the client moved (a second relay mapping, the newest,
// carried the server's packets) and mpquic's server followed it.
func checkMigrated(t *testing.T, r *run) {
	t.Helper()
	backs := map[string]int{}
	var order []string
	for _, s := range r.relay.seenLog() {
		if _, ok := backs[s.back]; !ok {
			order = append(order, s.back)
		}
		if s.dir == toClient {
			backs[s.back]++
		}
	}
	if len(order) < 2 {
		t.Fatalf("the client used %d addresses, want 2: %v", len(order), backs)
	}
	moved := order[len(order)-1]
	if backs[moved] < 10 {
		t.Errorf("the server sent %d datagrams to the client's new address %s (%v)", backs[moved], moved, backs)
	}
	checkNewDCID(t, r)
	checkPathValidation(t, r)
	if r.role == mpquicServer {
		for _, c := range r.conns {
			if ra := c.PathStats()[0].RemoteAddr.String(); ra != moved {
				t.Errorf("mpquic's server sends to %s, not the client's new address %s", ra, moved)
			}
		}
	}
	t.Logf("server datagrams per client address: %v", backs)
}

// holdClient lets the client's first flight through (until the server
// starts answering with more than an acknowledgment) and then drops what
// the client sends for a second: meanwhile the server must stay within
// three times what it received (RFC 9000 §8.1).
func holdClient(r *run) func(dir, []byte, time.Time) verdict {
	var holdFrom time.Time
	return func(d dir, b []byte, now time.Time) verdict {
		if d == toClient && holdFrom.IsZero() && len(b) > 200 {
			holdFrom = now
		}
		if d != toServer || holdFrom.IsZero() || now.Sub(holdFrom) >= time.Second {
			return pass
		}
		return drop
	}
}

func checkAmplification(t *testing.T, r *run) {
	t.Helper()
	log := r.relay.seenLog()
	var received, dropped int
	var until time.Time
	for _, s := range log {
		if s.dir != toServer {
			continue
		}
		if s.verdict == drop {
			dropped++
			continue
		}
		if dropped > 0 {
			until = s.at // the first datagram after the hold
			break
		}
		received += s.size
	}
	var before, flight int
	for _, s := range log {
		if s.dir != toClient {
			continue
		}
		if s.at.Before(until) {
			before += s.size
		}
		if s.version != 0 {
			flight += s.size
		}
	}
	if dropped == 0 || until.IsZero() {
		t.Fatalf("the relay held nothing of the client's (%d dropped)", dropped)
	}
	slack, why := 0, ""
	if r.role == mpquicClient {
		slack, why = r.peer.amplificationSlack()
	}
	if before > 3*received+slack {
		t.Errorf("the server sent %d bytes on %d received before validating the address: over 3x", before, received)
	}
	if flight <= 3*received {
		t.Errorf("the server's handshake flight was %d bytes, within 3x of %d: the case tested nothing", flight, received)
	}
	if before > 3*received && why != "" {
		t.Logf("peer-note: %s: %d bytes sent on %d received", why, before, received)
	}
	t.Logf("server: %d bytes on the client's %d (limit %d) while %d client datagrams were held; its whole flight %d", before, received, 3*received, dropped, flight)
}

func checkFaults(v verdict) func(t *testing.T, r *run) {
	return func(t *testing.T, r *run) {
		t.Helper()
		n, _ := r.relay.count(func(s seen) bool { return s.verdict == v })
		all, _ := r.relay.count(func(seen) bool { return true })
		if n == 0 {
			t.Error("the relay dropped or corrupted nothing: the case tested nothing")
		}
		t.Logf("%d of %d datagrams hit", n, all)
	}
}

// blackholeAt drops everything both ways for 2 s once a third of the
// files went to the client (the runner's blackhole).
func blackholeAt(r *run) func(dir, []byte, time.Time) verdict {
	var sent int
	var start time.Time
	return func(d dir, b []byte, now time.Time) verdict {
		if d == toClient {
			sent += len(b)
		}
		if start.IsZero() && sent > r.o.total()/3 {
			start = now
		}
		if !start.IsZero() && now.Sub(start) < 2*time.Second {
			return drop
		}
		return pass
	}
}

// checkECN is the runner's ecn case (RFC 9000 §13.4): through a relay
// that carries codepoints, both ends mark their datagrams ECT, and each
// keeps marking to the end, which a sender does only while the other's
// ACK frames report the marks it sent (§13.4.2.1: a path whose counts do
// not add up stops marking after its test packets). On mpquic's side the
// path's validation says so itself; the peer's is read from the wire:
// more than half of its datagrams marked (its first 10 are marked in any
// case).
func checkECN(t *testing.T, r *run) {
	t.Helper()
	var marked, total [2]int
	for _, s := range r.relay.seenLog() {
		total[s.dir]++
		if s.ecn == 1 || s.ecn == 2 {
			marked[s.dir]++
		}
	}
	ours, theirs := toServer, toClient
	if r.role == mpquicServer {
		ours, theirs = toClient, toServer
	}
	t.Logf("ECT datagrams: mpquic %d of %d, %s %d of %d", marked[ours], total[ours], r.peer.name(), marked[theirs], total[theirs])
	if total[ours] == 0 || marked[ours]*10 < total[ours]*9 {
		t.Errorf("mpquic marked %d of its %d datagrams ECT", marked[ours], total[ours])
	}
	if total[theirs] == 0 || marked[theirs]*2 <= total[theirs] {
		t.Errorf("%s marked %d of its %d datagrams ECT: it stopped (its validation of mpquic's ACK_ECN counts failed) or never marked",
			r.peer.name(), marked[theirs], total[theirs])
	}
	for _, c := range r.conns {
		for _, ps := range c.PathStats() {
			if ps.ECN != mpquic.ECNValidated {
				t.Errorf("mpquic's path %d: ECN %v, want validated (the peer's ACK frames carry counts matching its marks)", ps.ID, ps.ECN)
			}
		}
	}
}
