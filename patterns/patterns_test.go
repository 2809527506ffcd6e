package patterns

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/patterns/wire"
	"github.com/mptester/mptester/probe"
)

// The transports these tests plant expectations for.
const (
	tcpName   = "tcp"
	mptcpName = "mptcp"
	quicName  = "quic"
)

type testServer struct {
	*Server
	pin      string
	tcpPort  uint16
	quicPort uint16
}

// port of the listener serving transport name.
func (s *testServer) port(name string) uint16 {
	a := s.Addrs(name)
	if len(a) == 0 {
		return 0
	}
	ap, _ := netip.ParseAddrPort(a[0].String())
	return ap.Port()
}

// newTestServer wraps a started server.
func newTestServer(srv *Server, pin string) *testServer {
	ts := &testServer{Server: srv, pin: pin}
	ts.tcpPort, ts.quicPort = ts.port(tcpName), ts.port(quicName)
	return ts
}

func startServer(t *testing.T, lim Limits) *testServer {
	t.Helper()
	cert, pin, err := certs.SelfSigned(nil)
	if err != nil {
		t.Fatal(err)
	}
	if lim == (Limits{}) {
		lim = DefaultLimits()
		lim.ReadTimeout = 3 * time.Second
		lim.IdleTimeout = 5 * time.Second
	}
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, err := NewServer(ServerConfig{Certificate: cert, Listen: listenAll(":0"), Limits: lim, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return newTestServer(srv, pin)
}

// listenAll gives every listening transport the address addr.
func listenAll(addr string) map[string][]string {
	m := map[string][]string{}
	for _, d := range transport.Listeners() {
		m[d.Name] = []string{addr}
	}
	return m
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func loopback(t testing.TB) probe.Path {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("loopback path binding is tested on Linux")
	}
	paths, err := probe.Discover(context.Background(), probe.DiscoverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if p.Kind == probe.KindLoopback {
			return p
		}
	}
	t.Fatal("no loopback path")
	return probe.Path{}
}

func serverAddr(f probe.Family, port uint16) netip.AddrPort {
	if f == probe.Family6 {
		return netip.AddrPortFrom(netip.IPv6Loopback(), port)
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port)
}

// carries: the transport carries the pattern (MPHTTP only the HTTP ones).
func carries(trName, pattern string) bool {
	d, err1 := transport.Get(trName)
	p, err2 := Get(pattern)
	return err1 == nil && err2 == nil && d.Carries(p.Family())
}

func newTestTransport(t *testing.T, name string, p probe.Path, f probe.Family, pin string) transport.Transport {
	t.Helper()
	tlsCfg, err := certs.ClientTLS("localhost", pin, false)
	if err != nil {
		t.Fatal(err)
	}
	o := transport.Single(p, f, tlsCfg)
	o.IdleTimeout = 3 * time.Second
	tr, err := transport.New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func (s *testServer) config(pattern, tr string, f probe.Family, params Params) TestConfig {
	return TestConfig{Pattern: pattern, Transport: tr, Path: "lo", Family: int(f), Server: serverAddr(f, s.port(tr)), Params: params, Timeout: 20 * time.Second}
}

// smallParams keep the whole matrix a few seconds long.
var smallParams = Params{PingGap: 50 * time.Millisecond, Size: 1 << 20, Duration: 500 * time.Millisecond, Interval: 50 * time.Millisecond}

// TestMatrixLoopback runs every pattern over every transport and both
// families against a real server on loopback, and checks each result
// against what the test planted (sizes, counts, bytes the peer counted).
func TestMatrixLoopback(t *testing.T) {
	lo := loopback(t)
	srv := startServer(t, Limits{})
	for _, f := range []probe.Family{probe.Family4, probe.Family6} {
		for _, trName := range transport.Names() {
			for _, pat := range Names() {
				t.Run(fmt.Sprintf("v%d/%s/%s", f, trName, pat), func(t *testing.T) {
					if !carries(trName, pat) {
						t.Skipf("%s does not carry %s", trName, pat)
					}
					tr := newTestTransport(t, trName, lo, f, srv.pin)
					rec := RunTest(context.Background(), tr, srv.config(pat, trName, f, smallParams), []string{"lo"}, nil)
					if rec.Status != StatusSuccess {
						t.Fatalf("status %s: %s", rec.Status, rec.Error)
					}
					checkResult(t, rec)
				})
			}
		}
	}
}

// network is the socket network of the transport named name.
func network(name string) string {
	d, _ := transport.Get(name)
	return d.Network
}

func checkResult(t *testing.T, rec Record) {
	t.Helper()
	p := rec.Config.Params
	if len(rec.Connections) == 0 {
		t.Fatal("no connection recorded")
	}
	for _, c := range rec.Connections {
		if len(c.Samples) == 0 {
			t.Errorf("connection %s->%s has no protocol-state sample (%s)", c.Local, c.Remote, c.SampleError)
			continue
		}
		s := c.Samples[0]
		switch rec.Config.Transport {
		case tcpName:
			if ti, ok := s.Data.(*transport.TCPInfo); !ok || ti.RTT == 0 {
				t.Errorf("tcp sample without tcp_info rtt: %+v", s.State)
			}
		case mptcpName:
			if m, ok := s.Data.(*transport.MPTCPState); !ok || m.NumSubflow < 1 || len(m.Subflows) < 1 {
				t.Errorf("mptcp sample without subflows: %+v", s.State)
			} else if sf := m.Subflows[0]; sf.Local.String() != c.Local || sf.Remote.String() != c.Remote {
				t.Errorf("subflow %s->%s, connection %s->%s", sf.Local, sf.Remote, c.Local, c.Remote)
			}
		case quicName:
			if q, ok := s.Data.(*transport.QUICStats); !ok || q.SmoothedRTT == 0 {
				t.Errorf("quic sample without RTT: %+v", s.State)
			}
		case "mpquic":
			if q, ok := s.Data.(*transport.MPQUICState); !ok || q.SmoothedRTT == 0 || len(q.Paths) != 1 || q.Paths[0].Path != "lo" || q.Paths[0].SRTT == 0 {
				t.Errorf("mpquic sample without RTT or its one path: %+v", s.State)
			}
		}
	}
	if rec.Config.Transport == mptcpName {
		if m, ok := rec.Summary.(*transport.MPTCPSummary); !ok || m.Negotiated == nil || !*m.Negotiated || m.Subflows < 1 {
			t.Errorf("mptcp summary %+v: want negotiated with >= 1 subflow", rec.Summary)
		}
	}
	if d, _ := transport.Get(rec.Config.Transport); d.Multipath {
		// The one path's share, from the transport's own samples, is at
		// least the payload the pattern moved.
		if len(rec.PathShares) != 1 || rec.PathShares[0].Path != "lo" || len(rec.PathShares[0].Samples) == 0 {
			t.Errorf("path shares %+v: want lo", rec.PathShares)
		} else if b, ok := rec.Result.(*BulkResult); ok && rec.PathShares[0].Received < uint64(b.Bytes) {
			t.Errorf("lo share received %d bytes, bulk moved %d", rec.PathShares[0].Received, b.Bytes)
		}
	}
	if len(rec.PathBytes) != 1 || rec.PathBytes[0].Sent == 0 {
		t.Errorf("path bytes %+v: want lo counted", rec.PathBytes)
	}
	switch r := rec.Result.(type) {
	case *PingResult:
		if r.Sent != p.PingCount || r.Answered != p.PingCount || len(r.Delays) != p.PingCount-1 {
			t.Errorf("ping %+v: want %d answered", r, p.PingCount)
		}
		if r.Median <= 0 || r.FirstRequest < r.Setup || r.Setup <= 0 || r.AppMedian < r.Median || len(r.AppDelays) != len(r.Delays) {
			t.Errorf("ping times %+v", r)
		}
		// The wire delay is part of the application's delay.
		for i := range r.Delays {
			if r.Delays[i] <= 0 || r.Delays[i] > r.AppDelays[i] {
				t.Errorf("ping %d: delay %v, application delay %v", i+2, r.Delays[i], r.AppDelays[i])
			}
		}
		// HTTP/2 over TLS/TCP, HTTP/3 over quic-go (quic, quic-handover)
		// and over mpquic (mpquic/h3).
		want := map[string]string{"tcp": "HTTP/2.0", "udp": "HTTP/3.0"}[network(rec.Config.Transport)]
		if r.Proto != want {
			t.Errorf("proto %s, want %s", r.Proto, want)
		}
		// A request on loopback takes well under the gap between requests.
		if r.Median > p.PingGap {
			t.Errorf("median %v above %v on loopback", r.Median, p.PingGap)
		}
	case *BulkResult:
		if r.Bytes != p.Size || r.TTFB <= 0 || r.Completion < r.TTFB || r.GoodputBps <= 0 {
			t.Errorf("bulk %+v", r)
		}
		// Goodput is bytes over completion time, exactly.
		if want := float64(r.Bytes) * 8 / r.Completion.Seconds(); r.GoodputBps != want {
			t.Errorf("goodput %v, want %v", r.GoodputBps, want)
		}
	case *IperfResult:
		for name, d := range map[string]*IperfDirection{"upload": r.Upload, "download": r.Download} {
			if d == nil || d.Bytes == 0 || d.GoodputBps <= 0 || len(d.Intervals) == 0 || len(d.PeerIntervals) == 0 {
				t.Fatalf("%s %+v", name, d)
			}
			var mine, peer uint64
			for _, iv := range d.Intervals {
				mine += iv.Bytes
			}
			for _, iv := range d.PeerIntervals {
				peer += iv.Bytes
			}
			// Everything sent before Done is received before it: both
			// sides count the same bytes.
			if mine != peer || d.Bytes != mine {
				t.Errorf("%s: client counted %d, server %d, total %d", name, mine, peer, d.Bytes)
			}
			if d.Duration < p.Duration*8/10 || d.Duration > p.Duration+time.Second {
				t.Errorf("%s duration %v, asked %v", name, d.Duration, p.Duration)
			}
		}
		if r.Upload.Retransmissions == nil {
			t.Errorf("upload without retransmission count")
		}
		// The sender's intervals carry retransmissions: the client's for
		// an upload, the server's (PeerIntervals) for a download, whose
		// total is their sum.
		checkSenderRetransmissions(t, "upload", r.Upload.Intervals, nil)
		checkSenderRetransmissions(t, "download", r.Download.PeerIntervals, r.Download.Retransmissions)
	case *InteractiveResult:
		want := int(p.Duration / p.Interval)
		for name, d := range map[string]*InteractiveDirection{"upload": r.Upload, "download": r.Download} {
			if d == nil {
				t.Fatalf("no %s", name)
			}
			if d.Sent != want || d.Acked != d.Sent || len(d.Lost) != 0 {
				t.Errorf("%s: sent %d acked %d lost %v, want %d all acked", name, d.Sent, d.Acked, d.Lost, want)
			}
			if d.Max <= 0 || d.Max > 200*time.Millisecond || d.Median > d.Max {
				t.Errorf("%s delays median %v max %v", name, d.Median, d.Max)
			}
		}
		wantStreams := "two-connections"
		if network(rec.Config.Transport) == "udp" {
			wantStreams = "one-connection-two-streams" // QUIC streams: quic, quic-handover, mpquic
		}
		if r.Streams != wantStreams || (wantStreams == "two-connections") != (len(rec.Connections) == 2) {
			t.Errorf("streams %s over %d connections", r.Streams, len(rec.Connections))
		}
	default:
		t.Fatalf("result type %T", rec.Result)
	}
}

// rawStream opens a TLS connection with a stream ALPN, bypassing the client.
func rawStream(t *testing.T, port uint16, alpn string) *tls.Conn {
	t.Helper()
	c, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{alpn}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func readError(t *testing.T, c net.Conn) *wire.ErrorFrame {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	r := wire.NewReader(c, 0)
	for {
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("want an error frame, got %v", err)
		}
		if f.Type == wire.TypeError {
			e, err := wire.DecodeError(f.Body)
			if err != nil {
				t.Fatal(err)
			}
			// Then the server closes the session.
			if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, io.EOF) {
				t.Logf("after error: %v", err)
			}
			return e
		}
	}
}

// TestBadRequestsRefusedWithoutHarm sends malformed and oversized requests
// while an interactive test runs on the same server: each bad session gets
// an error and is closed, and the good one is unaffected.
func TestBadRequestsRefusedWithoutHarm(t *testing.T) {
	lo := loopback(t)
	lim := DefaultLimits()
	lim.ReadTimeout, lim.MaxDuration, lim.MaxBulk = 3*time.Second, 5*time.Second, 1<<20
	srv := startServer(t, lim)

	good := make(chan Record, 2)
	for _, trName := range []string{tcpName, quicName} {
		go func() {
			tr := newTestTransport(t, trName, lo, probe.Family4, srv.pin)
			good <- RunTest(context.Background(), tr, srv.config("interactive", trName, probe.Family4,
				Params{Duration: 1500 * time.Millisecond, Interval: 50 * time.Millisecond}), nil, nil)
		}()
	}
	time.Sleep(200 * time.Millisecond)

	t.Run("garbage frame", func(t *testing.T) {
		c := rawStream(t, srv.tcpPort, ALPNIperf)
		_, _ = c.Write([]byte{0xee, 0, 0, 0, 1, 0})
		if e := readError(t, c); e.Code != wire.CodeMalformed {
			t.Errorf("error %v, want malformed", e)
		}
	})
	t.Run("oversized frame", func(t *testing.T) {
		c := rawStream(t, srv.tcpPort, ALPNInteractive)
		_, _ = c.Write([]byte{byte(wire.TypeHello), 0x7f, 0xff, 0xff, 0xff})
		if e := readError(t, c); e.Code != wire.CodeMalformed || !strings.Contains(e.Reason, "exceeds limit") {
			t.Errorf("error %v, want malformed (exceeds limit)", e)
		}
	})
	t.Run("kind on the wrong ALPN", func(t *testing.T) {
		c := rawStream(t, srv.tcpPort, ALPNIperf)
		h := wire.Hello{Version: wire.Version, Kind: wire.KindInteractiveUpload, Duration: time.Second, ChunkSize: 100, Interval: 100 * time.Millisecond}
		_ = wire.WriteFrame(c, wire.TypeHello, h.Encode())
		if e := readError(t, c); e.Code != wire.CodeMalformed {
			t.Errorf("error %v, want malformed", e)
		}
	})
	t.Run("duration above limit", func(t *testing.T) {
		tr := newTestTransport(t, quicName, lo, probe.Family4, srv.pin)
		rec := RunTest(context.Background(), tr, srv.config("iperf", quicName, probe.Family4, Params{Duration: time.Minute}), nil, nil)
		if rec.Status != StatusServerRefused {
			t.Errorf("status %s (%s), want server-refused", rec.Status, rec.Error)
		}
	})
	t.Run("bulk above limit", func(t *testing.T) {
		tr := newTestTransport(t, tcpName, lo, probe.Family4, srv.pin)
		rec := RunTest(context.Background(), tr, srv.config("bulk", tcpName, probe.Family4, Params{Size: 2 << 20}), nil, nil)
		if rec.Status != StatusServerRefused || !strings.Contains(rec.Error, "above limit") {
			t.Errorf("status %s (%s), want server-refused", rec.Status, rec.Error)
		}
	})
	t.Run("silent client", func(t *testing.T) {
		c := rawStream(t, srv.tcpPort, ALPNIperf)
		start := time.Now()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("server sent data to a silent client")
		}
		if el := time.Since(start); el < 2*time.Second || el > 6*time.Second {
			t.Errorf("silent session closed after %v, want the 3s read timeout", el)
		}
	})
	for range 2 {
		rec := <-good
		if rec.Status != StatusSuccess {
			t.Errorf("concurrent %s session failed: %s %s", rec.Config.Transport, rec.Status, rec.Error)
		}
	}
}

// TestServerKilledMidTest: a server that disappears during an iperf test
// yields a classified error quickly, never a hang.
func TestServerKilledMidTest(t *testing.T) {
	lo := loopback(t)
	for _, trName := range transport.Names() {
		t.Run(trName, func(t *testing.T) {
			if !carries(trName, "iperf") {
				t.Skipf("%s does not carry iperf", trName)
			}
			srv := startServer(t, Limits{})
			tr := newTestTransport(t, trName, lo, probe.Family4, srv.pin)
			time.AfterFunc(300*time.Millisecond, srv.Close)
			start := time.Now()
			cfg := srv.config("iperf", trName, probe.Family4, Params{Duration: 3 * time.Second})
			cfg.Timeout = 30 * time.Second
			rec := RunTest(context.Background(), tr, cfg, nil, nil)
			el := time.Since(start)
			t.Logf("%s after %v: %s", rec.Status, el, rec.Error)
			switch rec.Status {
			case StatusConnectionReset, StatusConnectionClosed, StatusTimeout:
			default:
				t.Errorf("status %s (%s), want a connection error", rec.Status, rec.Error)
			}
			// Reading while uploading sees the close at once; without it a
			// closing MPTCP server was noticed only by the 5 s write stall.
			if el > 4*time.Second {
				t.Errorf("took %v to notice the dead server", el)
			}
		})
	}
}

// TestLimitsAndPin: per-client session cap and certificate pinning.
func TestLimitsAndPin(t *testing.T) {
	lo := loopback(t)
	lim := DefaultLimits()
	lim.MaxPerClient, lim.ReadTimeout = 1, 3*time.Second
	srv := startServer(t, lim)
	tr := newTestTransport(t, tcpName, lo, probe.Family4, srv.pin)
	if rec := RunTest(context.Background(), tr, srv.config("ping", tcpName, probe.Family4, smallParams), nil, nil); rec.Status != StatusSuccess {
		t.Fatalf("one session: %s %s", rec.Status, rec.Error)
	}
	// Interactive over TCP needs two sessions at once: the second is refused.
	rec := RunTest(context.Background(), tr, srv.config("interactive", tcpName, probe.Family4, smallParams), nil, nil)
	if rec.Status == StatusSuccess {
		t.Fatalf("second concurrent session accepted with a cap of 1")
	}
	// The refused test's first session ends when its client gives up.
	deadline := time.Now().Add(5 * time.Second)
	for srv.lim.inUse() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	qtr := newTestTransport(t, quicName, lo, probe.Family4, srv.pin)
	// Over QUIC one connection carries both streams, and the second
	// stream running at once takes a slot as TCP's second connection does
	// (a per-stream session): refused too, with the reason.
	rec = RunTest(context.Background(), qtr, srv.config("interactive", quicName, probe.Family4, smallParams), nil, nil)
	if rec.Status != StatusServerRefused || !strings.Contains(rec.Error, "at its limit of 1 sessions") {
		t.Fatalf("quic interactive with a cap of 1: %s %s, want server-refused", rec.Status, rec.Error)
	}

	// Pinning, on a server without the cap (the sessions above may still
	// be releasing).
	srv = startServer(t, Limits{})
	bad := strings.Repeat("00:", 31) + "00"
	for _, trName := range []string{tcpName, quicName} {
		rec := RunTest(context.Background(), newTestTransport(t, trName, lo, probe.Family4, bad), srv.config("ping", trName, probe.Family4, smallParams), nil, nil)
		if rec.Status != StatusPinMismatch {
			t.Errorf("%s with wrong pin: %s (%s), want pin-mismatch", trName, rec.Status, rec.Error)
		}
	}
}

func TestMain(m *testing.M) {
	os.Exit(m.Run())
}

// TestGracefulShutdown: Shutdown lets running tests finish, refuses new
// sessions meanwhile, and returns once they are done.
func TestGracefulShutdown(t *testing.T) {
	lo := loopback(t)
	srv := startServer(t, Limits{})
	recs := make(chan Record, 2)
	for _, trName := range []string{tcpName, quicName} {
		go func() {
			tr := newTestTransport(t, trName, lo, probe.Family4, srv.pin)
			recs <- RunTest(context.Background(), tr, srv.config("interactive", trName, probe.Family4,
				Params{Duration: 1500 * time.Millisecond, Interval: 50 * time.Millisecond}), nil, nil)
		}()
	}
	time.Sleep(300 * time.Millisecond)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- srv.Shutdown(ctx)
	}()
	time.Sleep(100 * time.Millisecond)
	tr := newTestTransport(t, tcpName, lo, probe.Family4, srv.pin)
	if rec := RunTest(context.Background(), tr, srv.config("ping", tcpName, probe.Family4, smallParams), nil, nil); rec.Status != StatusConnectionRefused {
		t.Errorf("new session during shutdown: %s (%s), want connection-refused", rec.Status, rec.Error)
	}
	for range 2 {
		if rec := <-recs; rec.Status != StatusSuccess {
			t.Errorf("%s test cut by a graceful shutdown: %s %s", rec.Config.Transport, rec.Status, rec.Error)
		}
	}
	if err := <-done; err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if el := time.Since(start); el < time.Second || el > 6*time.Second {
		t.Errorf("shutdown returned after %v, want once the ~1.2 s of running tests ended", el)
	}
}

// TestHTTP1: the HTTP patterns over HTTP/1.1 when h2 is not offered.
func TestHTTP1(t *testing.T) {
	lo := loopback(t)
	srv := startServer(t, Limits{})
	tlsCfg, _ := certs.ClientTLS("localhost", srv.pin, false)
	for _, trName := range []string{tcpName, mptcpName} {
		o := transport.Single(lo, probe.Family4, tlsCfg)
		o.HTTP1 = true
		tr, err := transport.New(trName, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, pat := range []string{"ping", "bulk"} {
			rec := RunTest(context.Background(), tr, srv.config(pat, trName, probe.Family4, smallParams), nil, nil)
			if rec.Status != StatusSuccess {
				t.Fatalf("%s/%s: %s %s", pat, trName, rec.Status, rec.Error)
			}
			proto := ""
			switch r := rec.Result.(type) {
			case *PingResult:
				proto = r.Proto
			case *BulkResult:
				proto = r.Proto
			}
			if proto != "HTTP/1.1" || rec.Connections[0].ALPN != "http/1.1" {
				t.Errorf("%s/%s over %s (ALPN %s), want HTTP/1.1", pat, trName, proto, rec.Connections[0].ALPN)
			}
		}
	}
}

// TestHTTP3BothQUICs: the HTTP patterns over quic (quic-go) and mpquic
// (mpquic/h3) go through the same framing, HTTP/3, and record ALPN h3.
func TestHTTP3BothQUICs(t *testing.T) {
	lo := loopback(t)
	srv := startServer(t, Limits{})
	for _, trName := range []string{quicName, "mpquic"} {
		tr := newTestTransport(t, trName, lo, probe.Family4, srv.pin)
		for _, pat := range []string{"ping", "bulk"} {
			rec := RunTest(context.Background(), tr, srv.config(pat, trName, probe.Family4, smallParams), nil, nil)
			if rec.Status != StatusSuccess {
				t.Fatalf("%s/%s: %s %s", pat, trName, rec.Status, rec.Error)
			}
			proto := ""
			switch r := rec.Result.(type) {
			case *PingResult:
				proto = r.Proto
			case *BulkResult:
				proto = r.Proto
			}
			if proto != "HTTP/3.0" || len(rec.Connections) == 0 || rec.Connections[0].ALPN != "h3" {
				t.Errorf("%s/%s over %q (connections %+v), want HTTP/3.0 with ALPN h3", pat, trName, proto, rec.Connections)
			}
		}
	}
}

// TestInteractiveStop: closing Client.Stop ends a long interactive test
// cleanly over each transport: both senders stop, every chunk sent is
// acknowledged (none lost), and the download report still arrives.
func TestInteractiveStop(t *testing.T) {
	lo := loopback(t)
	srv := startServer(t, DefaultLimits())
	for _, name := range []string{tcpName, quicName} {
		t.Run(name, func(t *testing.T) {
			tr := newTestTransport(t, name, lo, probe.Family4, srv.pin)
			cfg := srv.config("interactive", name, probe.Family4, Params{Duration: 30 * time.Second, Interval: 50 * time.Millisecond})
			stop := make(chan struct{})
			cfg.Stop = stop
			time.AfterFunc(time.Second, func() { close(stop) })
			t0 := time.Now()
			rec := RunTest(context.Background(), tr, cfg, nil, nil)
			if rec.Status != StatusSuccess {
				t.Fatalf("%s %s", rec.Status, rec.Error)
			}
			if el := time.Since(t0); el > 5*time.Second {
				t.Fatalf("took %v after a stop at 1s of 30s", el)
			}
			r := rec.Result.(*InteractiveResult)
			for dir, d := range map[string]*InteractiveDirection{"upload": r.Upload, "download": r.Download} {
				if d == nil || d.Sent < 10 || d.Sent > 40 || len(d.Lost) != 0 || d.Acked != d.Sent {
					t.Errorf("%s: %+v", dir, d)
				}
			}
		})
	}
}
