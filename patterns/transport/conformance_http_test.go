package transport_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/probe"
)

// The HTTP conformance suite: every transport that carries the HTTP
// patterns, HTTP-only ones (mphttp) included, which the stream suite
// skips, fetches from one `serve` server (patterns.Server, every
// pattern's handlers) what tcp fetches from it, and must hold the same
// invariants: the status and the bytes of the bulk object at edge sizes
// (each checked against the object itself, and against tcp's copy), the
// ping body again and again on one connection, the server's error
// statuses passed through (413 above the bulk limit, 404), byte counters
// that count at least the body and at most the stated header overhead
// above it (a multipath transport's paths adding up to no more), and the
// connect errors' statuses.

// mphttpClosedTail: what reaches the client on mphttp's first path and
// is never read, once per download: its first response asks for the whole
// object and is closed where path 2's ranges begin (003 §4.2: "we reset
// the connection on Path 1"), when the lab path's queue (250 KB at 20
// Mbit/s), the bytes in flight and the socket's receive buffer still hold
// some of it. Measured 520-670 KB here; every later range is read to its
// end.
const mphttpClosedTail = 1 << 20

// httpSuiteMaxBulk: the server's bulk limit in the suite.
const httpSuiteMaxBulk = 8 << 20

type httpClient struct {
	d     *transport.Descriptor
	addr  netip.AddrPort
	pin   string
	paths []transport.PathRole
	fam   probe.Family
	// silent and closedPort as in the stream suite's env.
	silent, closedPort func(t *testing.T, network string) netip.AddrPort
	// wire, when set, counts the bytes each path carried down since the
	// last call (the lab's emulator).
	wire func() map[string]uint64
}

func (c httpClient) dial(t *testing.T, ctx context.Context, addr netip.AddrPort, pin string) (transport.Conn, error) {
	t.Helper()
	cfg, err := certs.ClientTLS("localhost", pin, pin == "")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transport.New(c.d.Name, transport.Options{Paths: c.paths, Family: c.fam, TLS: cfg, IdleTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Dial(ctx, addr, transport.FamilyHTTP)
}

func (c httpClient) conn(t *testing.T) transport.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := c.dial(t, ctx, c.addr, c.pin)
	if err != nil {
		t.Fatalf("dial %s: %v", c.addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// get fetches path on conn: status and body.
func httpGet(t *testing.T, conn transport.Conn, addr netip.AddrPort, path string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr.String()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := conn.RoundTripper().RoundTrip(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body after %d bytes: %v", path, len(body), err)
	}
	return resp.StatusCode, body
}

// bulkObject is the bulk pattern's object of n bytes.
func bulkObject(t *testing.T, n int64) []byte {
	b, err := io.ReadAll(patterns.NewBulkBody(n))
	if err != nil || int64(len(b)) != n {
		t.Fatalf("bulk object: %d bytes, %v", len(b), err)
	}
	return b
}

// perPather: a sample with counters per path (multipath transports).
type perPather interface {
	PerPath() []transport.PathCounters
}

// httpRef is what tcp got, the reference for the others.
type httpRef struct {
	ping   []byte
	bulk   map[int64][]byte
	status map[string]int
	// tcp reaches the same server over tcp: a subtest re-run alone (tcp's
	// own subtest filtered out) takes its reference bodies from there.
	tcp *httpClient
}

var httpSuiteSizes = []int64{0, 1, 100_003, 4 << 20}

func conformHTTP(t *testing.T, c httpClient, ref *httpRef) {
	t.Run("bulk", func(t *testing.T) {
		for _, n := range httpSuiteSizes {
			if c.wire != nil {
				c.wire()
			}
			conn := c.conn(t)
			code, body := httpGet(t, conn, c.addr, fmt.Sprintf("/bulk/%d/conformance", n))
			if code != http.StatusOK || !bytes.Equal(body, bulkObject(t, n)) {
				t.Fatalf("bulk %d: status %d, %d bytes, equal prefix %d", n, code, len(body), commonPrefixLen(body, bulkObject(t, n)))
			}
			if ref.bulk != nil && !bytes.Equal(body, ref.bulk[n]) {
				t.Fatalf("bulk %d: not tcp's bytes", n)
			}
			if i := conn.Info(); i.Transport != c.d.Name || i.Setup <= 0 {
				t.Errorf("info %+v", i)
			}
			// Counters: at least the body. Above it by what the wire
			// carried more (headers, and data sent again after a loss,
			// which loopback under load has too): held to the wire in
			// the lab below.
			s := conn.Sample()
			if s.Data == nil {
				t.Fatalf("sample: %s", s.Err)
			}
			_, recv := s.Data.Bytes()
			if recv < uint64(n) {
				t.Errorf("bulk %d: counter %d bytes received, fewer than the body", n, recv)
			}
			var per []transport.PathCounters
			if pp, ok := s.Data.(perPather); ok && c.d.Multipath {
				per = pp.PerPath()
				var sum uint64
				for _, p := range per {
					sum += p.Received
				}
				if sum > recv {
					t.Errorf("bulk %d: paths received %d bytes together, the connection %d", n, sum, recv)
				}
			}
			if c.wire == nil || n < 1<<20 {
				continue
			}
			// The emulator's count: the wire carries the counted bytes
			// plus at most the stated overhead, on each path a
			// multipath transport names, and in all.
			time.Sleep(200 * time.Millisecond) // last packets
			wire := c.wire()
			var all uint64
			for _, v := range wire {
				all += v
			}
			t.Logf("bulk %d: counter %d, wire %d %v, paths %+v", n, recv, all, wire, per)
			within := func(what string, counter, w uint64) {
				slack := 64 << 10
				if c.d.Name == "mphttp" && what != "wwan0" {
					slack += mphttpClosedTail
				}
				if float64(w) < float64(counter) || float64(w) > float64(counter)*(1+c.d.HeaderOverhead)+float64(slack) {
					t.Errorf("bulk %d: %s: counter %d bytes, wire %d: outside the stated %.0f%% header overhead", n, what, counter, w, 100*c.d.HeaderOverhead)
				}
			}
			within("connection", recv, all)
			// mphttp's per-path counters are body bytes of its own ranges:
			// each is held to its path's wire, and the lab's paths are
			// slow enough that the object must be split over them.
			for _, p := range per {
				if w, ok := wire[p.Path]; ok && c.d.Name == "mphttp" {
					within(p.Path, p.Received, w)
					if p.Received == 0 {
						t.Errorf("bulk %d: %s carried nothing: the object was not split", n, p.Path)
					}
				}
			}
		}
	})
	t.Run("ping", func(t *testing.T) {
		conn := c.conn(t)
		for i := range 5 {
			code, body := httpGet(t, conn, c.addr, fmt.Sprintf("/ping/conformance%d", i))
			if code != http.StatusOK || len(body) == 0 || (ref.ping != nil && !bytes.Equal(body, ref.ping)) {
				t.Fatalf("ping %d: status %d, body %q (tcp: %q)", i, code, body, ref.ping)
			}
			if ref.ping == nil {
				ref.ping = body
			}
		}
	})
	t.Run("status", func(t *testing.T) {
		for _, path := range []string{fmt.Sprintf("/bulk/%d/conformance", httpSuiteMaxBulk+1), "/bulk/x/conformance", "/nosuch"} {
			code, _ := httpGet(t, c.conn(t), c.addr, path)
			if code < 400 {
				t.Errorf("%s: status %d, want an error status", path, code)
			}
			if want, ok := ref.status[path]; ok && code != want {
				t.Errorf("%s: status %d, tcp got %d", path, code, want)
			}
			ref.status[path] = code
		}
	})
	t.Run("errors", func(t *testing.T) {
		quick := func(addr netip.AddrPort, pin string) error {
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			conn, err := c.dial(t, ctx, addr, pin)
			if err == nil {
				conn.Close()
			}
			return err
		}
		t.Run("refused port", func(t *testing.T) {
			err := quick(c.closedPort(t, c.d.Network), c.pin)
			if c.d.Network == "udp" {
				wantStatus(t, err, transport.StatusConnectionRefused, transport.StatusConnectionTimeout)
			} else {
				wantStatus(t, err, transport.StatusConnectionRefused)
			}
		})
		t.Run("wrong pin", func(t *testing.T) {
			_, other := selfSigned(t)
			wantStatus(t, quick(c.addr, other), transport.StatusPinMismatch)
		})
		t.Run("silent peer", func(t *testing.T) {
			wantStatus(t, quick(c.silent(t, c.d.Network), c.pin), transport.StatusConnectionTimeout)
		})
		t.Run("cancel", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := c.dial(t, ctx, c.addr, c.pin)
			wantStatus(t, err, transport.StatusCancelled)
		})
	})
}

// startHTTPServer starts a `serve` server with the suite's limits until
// the test ends.
func startHTTPServer(t *testing.T, cfg patterns.ServerConfig) *patterns.Server {
	t.Helper()
	cfg.Limits = patterns.DefaultLimits()
	cfg.Limits.MaxBulk, cfg.Limits.ReadTimeout, cfg.Limits.IdleTimeout = httpSuiteMaxBulk, 5*time.Second, 10*time.Second
	srv, err := patterns.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

func commonPrefixLen(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// TestHTTPConformanceLoopback runs the HTTP suite for every transport
// that carries HTTP against one server on loopback, tcp first as the
// reference; a multipath transport gets loopback twice, as a primary and
// an available path.
func TestHTTPConformanceLoopback(t *testing.T) {
	lo := loopbackPath(t)
	cert, pin := selfSigned(t)
	listen := map[string][]string{}
	for _, d := range transport.Listeners() {
		listen[d.Name] = []string{"127.0.0.1:0"}
	}
	srv := startHTTPServer(t, patterns.ServerConfig{Certificate: cert, Listen: listen})
	ref := &httpRef{status: map[string]int{}}
	client := func(t *testing.T, d *transport.Descriptor) httpClient {
		addrs := srv.Addrs(d.Name)
		if len(addrs) == 0 {
			t.Fatalf("the server does not serve %s", d.Name)
		}
		roles := []transport.PathRole{{Path: lo, Role: transport.RolePrimary}}
		if d.Multipath {
			roles = append(roles, transport.PathRole{Path: lo, Role: transport.RoleAvailable})
		}
		ip := netip.MustParseAddr("127.0.0.1")
		return httpClient{d: d, addr: netip.MustParseAddrPort(addrs[0].String()), pin: pin, paths: roles, fam: probe.Family4,
			silent: localSilent(ip), closedPort: localClosed(ip)}
	}
	ds := httpTransports(t)
	tcp := client(t, ds[0])
	ref.tcp = &tcp
	for _, d := range ds {
		t.Run(d.Name, func(t *testing.T) {
			if !d.Carries(transport.FamilyHTTP) {
				t.Skipf("%s does not carry HTTP", d.Name)
			}
			conformHTTPAgainst(t, client(t, d), ref)
		})
	}
}

// conformHTTPAgainst runs the suite for c: tcp fills ref, the others are
// held to it.
func conformHTTPAgainst(t *testing.T, c httpClient, ref *httpRef) {
	if c.d.Name != "tcp" {
		if ref.bulk == nil && ref.tcp != nil {
			fillHTTPRef(t, *ref.tcp, ref)
		}
		if ref.bulk == nil {
			t.Fatal("tcp's reference is missing (tcp failed)")
		}
		conformHTTP(t, c, ref)
		return
	}
	conformHTTP(t, c, &httpRef{status: ref.status})
	fillHTTPRef(t, c, ref)
}

// fillHTTPRef takes the reference bodies over tcp client c.
func fillHTTPRef(t *testing.T, c httpClient, ref *httpRef) {
	bulk := map[int64][]byte{}
	for _, n := range httpSuiteSizes {
		_, bulk[n] = httpGet(t, c.conn(t), c.addr, fmt.Sprintf("/bulk/%d/conformance", n))
	}
	_, ref.ping = httpGet(t, c.conn(t), c.addr, "/ping/conformance")
	ref.bulk = bulk
}

// httpTransports: tcp first (the reference), then every other one.
func httpTransports(t *testing.T) []*transport.Descriptor {
	tcp, err := transport.Get("tcp")
	if err != nil {
		t.Fatal(err)
	}
	ds := []*transport.Descriptor{tcp}
	for _, d := range transport.All() {
		if d.Name != "tcp" {
			ds = append(ds, d)
		}
	}
	return ds
}
