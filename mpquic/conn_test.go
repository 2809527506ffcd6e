package mpquic

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
	"io"
	"math/big"
	"slices"
	"testing"
	"time"
)

const testALPN = "mptester-test"

func testTLS(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{testALPN}}
	client = &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{testALPN}}
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

func listenLoopback(t testing.TB, tlsConf *tls.Config, conf *Config) *Listener {
	t.Helper()
	l, err := ListenAddr("127.0.0.1:0", tlsConf, conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// serveEach runs handle on every stream of every connection accept
// returns: the accept loops of the tests' servers, mpquic's and quic-go's.
func serveEach[C, S any](ctx context.Context, accept func(context.Context) (C, error), streams func(C, context.Context) (S, error), handle func(S)) {
	for {
		c, err := accept(ctx)
		if err != nil {
			return
		}
		go func() {
			for {
				s, err := streams(c, ctx)
				if err != nil {
					return
				}
				go handle(s)
			}
		}()
	}
}

// echoServe answers each accepted stream with what it reads.
func echoServe(ctx context.Context, l *Listener) {
	serveEach(ctx, l.Accept, (*Conn).AcceptStream, func(s *Stream) {
		io.Copy(s, s)
		s.Close()
	})
}

// exchange writes data on a new stream, closes it and checks the echo.
func exchange(t *testing.T, ctx context.Context, open func(context.Context) (io.ReadWriteCloser, error), data []byte) {
	t.Helper()
	echo(t, ctx, open, data, 0, nil)
}

// echo is exchange that calls mid (if set) once readBefore bytes came back.
func echo(t *testing.T, ctx context.Context, open func(context.Context) (io.ReadWriteCloser, error), data []byte, readBefore int, mid func()) {
	t.Helper()
	s, err := open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := s.Write(data)
		if err == nil {
			err = s.Close()
		}
		errc <- err
	}()
	if d, ok := s.(interface{ SetReadDeadline(time.Time) error }); ok {
		d.SetReadDeadline(time.Now().Add(30 * time.Second))
	}
	got := make([]byte, 0, len(data))
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		got = append(got, buf[:n]...)
		if mid != nil && len(got) >= readBefore {
			mid()
			mid = nil
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read after %d of %d bytes: %v", len(got), len(data), err)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("echo of %d bytes came back as %d bytes, equal prefix %d", len(data), len(got), commonPrefix(got, data))
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func TestEchoMPQUIC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	l := listenLoopback(t, stls, nil)
	go echoServe(ctx, l)
	_, open := dialTest(t, ctx, l.Addr().String(), ctls)
	exchange(t, ctx, open, []byte("hello"))
	exchange(t, ctx, open, testData(3<<20, 1))
}

// dialTest dials addr, checks the ALPN and returns the connection (closed
// when the test ends) and a stream opener for exchange.
func dialTest(t *testing.T, ctx context.Context, addr string, ctls *tls.Config) (*Conn, func(context.Context) (io.ReadWriteCloser, error)) {
	t.Helper()
	c, err := DialAddr(ctx, addr, ctls, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseWithError(0, "") })
	if p := c.ConnectionState().NegotiatedProtocol; p != testALPN {
		t.Fatalf("ALPN %q", p)
	}
	return c, func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStream(ctx) }
}

// RFC 9000 §13.2.1: a packet is acknowledged at once when it arrived out
// of order or opened a new gap, not every packet after a loss whose gap
// stays in the ranges (fails with any gap in the ranges counted).
func TestAckAtOnceOnlyForReorderOrNewGap(t *testing.T) {
	receive := func(pns ...int64) (*pnSpace, []bool) {
		sp := &pnSpace{largestRecv: -1}
		var now []bool
		for _, pn := range pns {
			sp.recvd.add(uint64(pn), uint64(pn))
			now = append(now, reorderedOrGap(sp, pn))
			sp.largestRecv = max(sp.largestRecv, pn)
		}
		return sp, now
	}
	// 3 is lost: 4 opens the gap (at once), 5 and 6 follow in order.
	_, got := receive(0, 1, 2, 4, 5, 6, 3)
	want := []bool{false, false, false, true, false, false, true}
	if !slices.Equal(got, want) {
		t.Errorf("at once for 0,1,2,4,5,6,3: %v, want %v", got, want)
	}
}
