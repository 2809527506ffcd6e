package h3

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
	"io"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/mptester/mptester/mpquic"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

func testTLS(t testing.TB) (server, client *tls.Config, certPEM, keyDER []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	kd, _ := x509.MarshalPKCS8PrivateKey(key)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{ALPN}}
	client = &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{ALPN}}
	return server, client, der, kd
}

func testData(n int, seed byte) []byte {
	b := make([]byte, 0, n+32)
	h := sha256.Sum256([]byte{seed})
	for len(b) < n {
		b = append(b, h[:]...)
		h = sha256.Sum256(h[:])
	}
	return b[:n]
}

// testHandler serves /bulk (n bytes, ?n=), echoes POST /echo and answers
// /status with the status ?code= and a header.
func testHandler(bulk []byte) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/bulk", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(bulk)))
		w.Write(bulk)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Method", r.Method)
		w.Header().Set("X-Proto", r.Proto)
		w.Header().Set("X-Req-Header", r.Header.Get("X-Test"))
		w.Write(b)
	})
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		w.Header().Set("X-Status", strconv.Itoa(code))
		w.WriteHeader(code)
	})
	return mux
}

func mpquicH3Server(t *testing.T, ctx context.Context, stls *tls.Config, h http.Handler) *mpquic.Listener {
	t.Helper()
	ln, err := mpquic.ListenAddr("127.0.0.1:0", stls, &mpquic.Config{MaxIncomingUniStreams: 8, DisableMultipath: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	srv := &Server{Handler: h}
	go func() {
		for {
			c, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			go srv.ServeConn(ctx, c)
		}
	}()
	return ln
}

// exercise runs the same requests through rt against a server of
// testHandler: a bulk object byte-exact, a POST echoed with its header,
// and statuses.
func exercise(t *testing.T, ctx context.Context, rt http.RoundTripper, base string, bulk []byte) {
	t.Helper()
	get := func(path string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s body: %v", path, err)
		}
		return resp, b
	}
	resp, b := get("/bulk")
	if resp.StatusCode != 200 || !bytes.Equal(b, bulk) {
		t.Fatalf("GET /bulk: %d, %d bytes (want %d), equal: %v", resp.StatusCode, len(b), len(bulk), bytes.Equal(b, bulk))
	}
	if resp.ProtoMajor != 3 {
		t.Errorf("proto %s", resp.Proto)
	}
	body := testData(100<<10, 9)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/echo", bytes.NewReader(body))
	req.Header.Set("X-Test", "hello h3")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, body) || resp.Header.Get("X-Method") != "POST" || resp.Header.Get("X-Req-Header") != "hello h3" || resp.Header.Get("X-Proto") != "HTTP/3.0" {
		t.Fatalf("POST echo: %v, %d bytes, headers %v", err, len(got), resp.Header)
	}
	for _, code := range []int{204, 404, 503, 299} {
		resp, _ := get("/status?code=" + strconv.Itoa(code))
		if resp.StatusCode != code || resp.Header.Get("X-Status") != strconv.Itoa(code) {
			t.Errorf("status %d: got %d, %v", code, resp.StatusCode, resp.Header)
		}
	}
	// Many at once: each on its own stream.
	errc := make(chan error, 20)
	for range 20 {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/status?code=200", nil)
			resp, err := rt.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			errc <- err
		}()
	}
	for range 20 {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
}

func TestQuicGoClientToServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls, _, _ := testTLS(t)
	bulk := testData(4<<20, 1)
	ln := mpquicH3Server(t, ctx, stls, testHandler(bulk))
	tr := &http3.Transport{TLSClientConfig: ctls}
	defer tr.Close()
	exercise(t, ctx, tr, "https://"+ln.Addr().String(), bulk)
}

func TestClientToQuicGoServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls, _, _ := testTLS(t)
	bulk := testData(4<<20, 2)
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http3.Server{Handler: testHandler(bulk), TLSConfig: http3.ConfigureTLSConfig(stls), QUICConfig: &quic.Config{}}
	go srv.Serve(pc)
	defer srv.Close()
	c, err := mpquic.Dial(ctx, udpSocket(t), pc.LocalAddr(), ctls, &mpquic.Config{MaxIncomingUniStreams: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	cc, err := NewClientConn(c)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	exercise(t, ctx, cc, "https://"+pc.LocalAddr().String(), bulk)
}

func udpSocket(t *testing.T) *net.UDPConn {
	t.Helper()
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}

func newGet(ctx context.Context, url string) (*http.Request, error) {
	return http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
}

func readAll(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// A request stream whose HEADERS never complete is reset with
// H3_REQUEST_INCOMPLETE once ReadHeaderTimeout passes; a request in time
// is answered.
func TestServerReadHeaderTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls, _, _ := testTLS(t)
	ln, err := mpquic.ListenAddr("127.0.0.1:0", stls, &mpquic.Config{MaxIncomingUniStreams: 8, DisableMultipath: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv := &Server{Handler: testHandler(testData(1000, 5)), ReadHeaderTimeout: 300 * time.Millisecond}
	go func() {
		for {
			c, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			go srv.ServeConn(ctx, c)
		}
	}()
	c, err := quic.DialAddr(ctx, ln.Addr().String(), ctls, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Write([]byte{frameHeaders, 50, 0, 0, 0xd1}) // 3 of 50 bytes, then nothing
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.ReadAll(s)
	var se *quic.StreamError
	if !errors.As(err, &se) || se.ErrorCode != ErrCodeRequestIncomplete {
		t.Fatalf("a stalled request: %v, want a reset with H3_REQUEST_INCOMPLETE", err)
	}
	tr := &http3.Transport{TLSClientConfig: ctls}
	defer tr.Close()
	req, _ := newGet(ctx, "https://"+ln.Addr().String()+"/bulk")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := readAll(resp); err != nil || len(b) != 1000 {
		t.Fatalf("a request in time: %d bytes, %v", len(b), err)
	}
}
