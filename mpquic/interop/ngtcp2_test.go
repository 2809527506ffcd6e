package interop

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/linkstats"
	"github.com/mptester/mptester/internal/nstest"
	"github.com/mptester/mptester/mpquic/h3"
)

// ngtcp2 is Debian's ngtcp2 examples (packages ngtcp2-client and
// ngtcp2-server: gtlsclient and gtlsserver, ngtcp2 0.12 in C over GnuTLS,
// HTTP/3 through nghttp3): a QUIC stack and a TLS stack nobody here wrote.
// They speak HTTP/3 only, so the cases run over mpquic/h3.
type ngtcp2 struct{}

func (ngtcp2) name() string { return "ngtcp2" }

func (ngtcp2) version() string {
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "ngtcp2-client").Output()
	if err != nil {
		return "unknown"
	}
	return string(out)
}

func (ngtcp2) alpn() string { return h3.ALPN }

// keyUpdated: ngtcp2 0.12's qlog has no key update event; its examples'
// debug log says when they start one and when they install new keys.
func (ngtcp2) keyUpdated(ev *evidence, initiated bool) (bool, string) {
	if initiated {
		return strings.Contains(ev.qlogText(), "Initiate key update"), `"Initiate key update" in gtlsclient's log`
	}
	return strings.Contains(ev.qlogText(), "con rotate keys"), `"con rotate keys" in gtlsserver's log`
}

func (ngtcp2) amplificationSlack() (int, string) { return 0, "" }

func (ngtcp2) unsupported(c string, r role) string {
	if c == "v2-direct" {
		return `ngtcp2 0.12 knows QUIC v2 only as its draft: gtlsclient --help offers the versions "v1" and "v2draft" (0x709a50c4 on the wire), not RFC 9369's 0x6b3343cf`
	}
	return ""
}

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

const chachaCiphers = "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+CHACHA20-POLY1305"

// pemFiles writes tc's certificate and key where gtlsserver reads them.
func pemFiles(t *testing.T, tc *tls.Config) (keyFile, certFile string) {
	t.Helper()
	dir := t.TempDir()
	cert := tc.Certificates[0]
	kd, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	keyFile, certFile = filepath.Join(dir, "key.pem"), filepath.Join(dir, "cert.pem")
	var chain []byte
	for _, der := range cert.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	if err := os.WriteFile(certFile, chain, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		t.Fatal(err)
	}
	return keyFile, certFile
}

// ngProc is a running ngtcp2 example with its output.
type ngProc struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	mu   sync.Mutex
	done chan error
}

func (p *ngProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *ngProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.out.Bytes()
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func startNg(t *testing.T, ctx context.Context, bin string, args ...string) *ngProc {
	t.Helper()
	p := &ngProc{done: make(chan error, 1)}
	p.cmd = exec.CommandContext(ctx, bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		p.done <- nil
	})
	return p
}

func freeUDPPort(t *testing.T) int {
	t.Helper()
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return pc.LocalAddr().(*net.UDPAddr).Port
}

// waitBound waits until a UDP socket is bound to port (Linux's
// /proc/net/udp), so that a client's first Initial is not lost.
func waitBound(t *testing.T, port int, p *ngProc) {
	t.Helper()
	hex := fmt.Sprintf(":%04X ", port)
	for i := 0; i < 500; i++ {
		b, _ := os.ReadFile(linkstats.ProcNet("udp"))
		if bytes.Contains(b, []byte(hex)) {
			return
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("gtlsserver exited: %v\n%s", err, p.output())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("gtlsserver did not bind port %d\n%s", port, p.output())
}

// qlogs reads every qlog file in dir.
func qlogs(dir string, ev *evidence) {
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		ev.Write(b)
	}
}

func (ngtcp2) serve(t *testing.T, ctx context.Context, o *opts, tc *tls.Config) (net.Addr, *evidence) {
	t.Helper()
	bin := ngtcp2Bin(t, "gtlsserver")
	www := t.TempDir()
	for p, b := range o.files {
		if err := os.WriteFile(filepath.Join(www, strings.TrimPrefix(p, "/")), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	keyFile, certFile := pemFiles(t, tc)
	qdir := t.TempDir()
	port := freeUDPPort(t)
	args := []string{"-d", www, "--qlog-dir", qdir, "--handshake-timeout", handshakeTimeout.String(), "--timeout", fmt.Sprintf("%ds", int(o.idle().Seconds()))}
	if o.keyUpdate {
		// Its debug log is the evidence ("con rotate keys").
		args = append(args, "--no-quic-dump", "--no-http-dump")
	} else {
		args = append(args, "-q")
	}
	if o.retry {
		args = append(args, "--validate-addr")
	}
	if o.chacha {
		args = append(args, "--ciphers", chachaCiphers)
	}
	args = append(args, "127.0.0.1", strconv.Itoa(port), keyFile, certFile)
	p := startNg(t, ctx, bin, args...)
	waitBound(t, port, p)
	ev := &evidence{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gtlsserver:\n%s", p.output())
		}
	})
	ev.onCheck = func() {
		qlogs(qdir, ev)
		p.mu.Lock()
		ev.Write(p.out.Bytes())
		p.mu.Unlock()
	}
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}, ev
}

func (ngtcp2) fetch(t *testing.T, ctx context.Context, o *opts, addr net.Addr, tc *tls.Config) (map[string][]byte, *evidence, error) {
	t.Helper()
	bin := ngtcp2Bin(t, "gtlsclient")
	port := strconv.Itoa(addr.(*net.UDPAddr).Port)
	ev := &evidence{}
	qdir := t.TempDir()
	args := []string{"--exit-on-all-streams-close", "--qlog-dir", qdir, "--handshake-timeout", handshakeTimeout.String(), "--timeout", fmt.Sprintf("%ds", int(o.idle().Seconds()))}
	if o.keyUpdate {
		// Its debug log is the evidence ("Initiate key update").
		args = append(args, "--no-quic-dump", "--no-http-dump", "--key-update", "5ms")
	} else {
		args = append(args, "-q")
	}
	if o.chacha {
		args = append(args, "--ciphers", chachaCiphers)
	}
	if o.migrate {
		args = append(args, "--change-local-addr", "5ms")
	}
	got := map[string][]byte{}
	var mu sync.Mutex
	var first error
	run := func(paths []string) {
		dir := t.TempDir()
		a := append(append([]string(nil), args...), "--download", dir, "127.0.0.1", port)
		for _, p := range paths {
			a = append(a, "https://localhost:"+port+p)
		}
		p := startNg(t, ctx, bin, a...)
		err := <-p.done
		p.done <- err
		ev.Write(p.out.Bytes())
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			first = cmpErr(first, fmt.Errorf("gtlsclient: %v\n%s", err, p.output()))
			return
		}
		for _, path := range paths {
			b, err := os.ReadFile(filepath.Join(dir, strings.TrimPrefix(path, "/")))
			if err != nil {
				// It exits 0 when its idle timeout ends a connection.
				first = cmpErr(first, fmt.Errorf("gtlsclient exited without %s: %v\n%s", path, err, p.output()))
			}
			got[path] = b
		}
	}
	if o.resume {
		// gtlsclient writes the session (its ticket) to the file and
		// resumes from it; with the server's transport parameters
		// remembered too, it sends its requests in 0-RTT.
		args = append(args, "--session-file", filepath.Join(t.TempDir(), "session"))
		if o.zeroRTT {
			args = append(args, "--tp-file", filepath.Join(t.TempDir(), "tp"))
		}
	}
	if o.perConn {
		var wg sync.WaitGroup
		for _, p := range o.paths() {
			goOrNot(&wg, o.resume, func() { run([]string{p}) })
		}
		wg.Wait()
	} else {
		run(o.paths())
	}
	qlogs(qdir, ev)
	return got, ev, first
}

func TestInteropNgtcp2(t *testing.T) {
	ngtcp2Bin(t, "gtlsclient")
	ngtcp2Bin(t, "gtlsserver")
	runSuite(t, ngtcp2{})
}
