package h3

import (
	"bytes"
	"context"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/nstest"
	"github.com/mptester/mptester/mpquic"
)

// Debian's ngtcp2 examples (ngtcp2-client, ngtcp2-server: gtlsclient and
// gtlsserver, C over GnuTLS, HTTP/3 through nghttp3): a QUIC and HTTP/3
// stack nobody here wrote, with a TLS stack other than crypto/tls.

// ngtcp2Bin finds an ngtcp2 example; missing, the test skips, except under
// CI=true (CI installs the packages: .ci/run) where it fails.
func ngtcp2Bin(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		nstest.SkipUnless(t, name+" not found (apt-get install ngtcp2-client ngtcp2-server)")
	}
	return p
}

// gtlsclient fetches a bulk object from mpquic's HTTP/3 server and gets
// the exact bytes.
func TestNgtcp2ClientToServer(t *testing.T) {
	bin := ngtcp2Bin(t, "gtlsclient")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stls, _, _, _ := testTLS(t)
	bulk := testData(4<<20, 3)
	ln := mpquicH3Server(t, ctx, stls, testHandler(bulk))
	port := strconv.Itoa(ln.Addr().(*net.UDPAddr).Port)
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, "-q", "--exit-on-all-streams-close", "--download", dir,
		"127.0.0.1", port, "https://localhost:"+port+"/bulk")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gtlsclient: %v\n%s", err, tail(out))
	}
	got, err := os.ReadFile(filepath.Join(dir, "bulk"))
	if err != nil || !bytes.Equal(got, bulk) {
		t.Fatalf("gtlsclient downloaded %d bytes (want %d), equal %v: %v\n%s", len(got), len(bulk), bytes.Equal(got, bulk), err, tail(out))
	}
}

// mpquic's HTTP/3 client fetches from gtlsserver.
func TestClientToNgtcp2Server(t *testing.T) {
	bin := ngtcp2Bin(t, "gtlsserver")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, ctls, der, key := testTLS(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600)
	www := filepath.Join(dir, "www")
	os.Mkdir(www, 0o755)
	bulk := testData(4<<20, 4)
	os.WriteFile(filepath.Join(www, "bulk"), bulk, 0o644)
	port := freePort(t)
	srv := exec.CommandContext(ctx, bin, "-q", "-d", www, "127.0.0.1", strconv.Itoa(port), keyFile, certFile)
	var out bytes.Buffer
	srv.Stdout, srv.Stderr = &out, &out
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	addr := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}
	var c *mpquic.Conn
	var err error
	for i := 0; i < 50; i++ { // until gtlsserver is bound
		dctx, dcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		c, err = mpquic.Dial(dctx, udpSocket(t), addr, ctls, &mpquic.Config{MaxIncomingUniStreams: 8, HandshakeTimeout: 500 * time.Millisecond})
		dcancel()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("dial gtlsserver: %v\n%s", err, tail(out.Bytes()))
	}
	defer c.CloseWithError(0, "")
	cc, err := NewClientConn(c)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := newGet(ctx, "https://localhost:"+strconv.Itoa(port)+"/bulk")
	resp, err := cc.RoundTrip(req)
	if err != nil {
		t.Fatalf("GET: %v\n%s", err, tail(out.Bytes()))
	}
	got, err := readAll(resp)
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, bulk) {
		t.Fatalf("GET /bulk: %d, %d bytes (want %d), %v", resp.StatusCode, len(got), len(bulk), err)
	}
	req, _ = newGet(ctx, "https://localhost:"+strconv.Itoa(port)+"/missing")
	if resp, err = cc.RoundTrip(req); err != nil || resp.StatusCode != 404 {
		t.Fatalf("GET /missing: %v, %v", resp, err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return pc.LocalAddr().(*net.UDPAddr).Port
}

func tail(b []byte) []byte {
	if len(b) > 3000 {
		return b[len(b)-3000:]
	}
	return b
}
