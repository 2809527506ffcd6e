package mpquic

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// picoquicdemo's server sends a Retry (-r); mpquic's client follows it
// (tag, new DCID, token, retry_source_connection_id) and downloads a file
// over hq-interop, byte for byte. Without Retry support the dial failed
// with "Retry is not supported".
func TestRetryPicoquicServer(t *testing.T) {
	bin, certs := picoquicDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	www := t.TempDir()
	body := testData(300_000, 9)
	if err := os.WriteFile(filepath.Join(www, "f"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	port := freeUDPPort(t)
	var logb bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "-p", strconv.Itoa(port), "-c", filepath.Join(certs, "cert.pem"),
		"-k", filepath.Join(certs, "key.pem"), "-w", www, "-r", "-1")
	cmd.Dir, cmd.Stdout, cmd.Stderr = t.TempDir(), &logb, &logb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()

	ctls := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"hq-interop"}}
	var c *Conn
	var err error
	for range 50 { // until picoquicdemo listens
		dctx, dcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		c, err = DialAddr(dctx, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), ctls, &Config{HandshakeTimeout: 500 * time.Millisecond})
		dcancel()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("dial picoquicdemo -r: %v\n%s", err, logb.String())
	}
	defer c.CloseWithError(0, "")
	c.mu.Lock()
	retried := c.retrySCID != nil
	c.mu.Unlock()
	if !retried {
		t.Fatal("picoquicdemo -r sent no Retry that the client followed")
	}
	s, err := c.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("GET /f\r\n")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	got, err := io.ReadAll(s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("got %d bytes, want the file's %d", len(got), len(body))
	}
}

// picoquicdemo's client against an mpquic listener that requires Retry:
// it follows the Retry, checks the transport parameters (picoquic closes
// on a wrong original_destination_connection_id or
// retry_source_connection_id) and downloads a file over hq-interop.
func TestRetryPicoquicClient(t *testing.T) {
	bin, certs := picoquicDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cert, err := tls.LoadX509KeyPair(filepath.Join(certs, "cert.pem"), filepath.Join(certs, "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	l := listenLoopback(t, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"hq-interop"}}, &Config{RequireRetry: true})
	body := testData(300_000, 10)
	go serveEach(ctx, l.Accept, (*Conn).AcceptStream, func(s *Stream) {
		line, err := bufio.NewReader(s).ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "GET /f" {
			s.CancelWrite(1)
			return
		}
		s.Write(body)
		s.Close()
	})
	out := t.TempDir()
	port := strconv.Itoa(l.Addr().(*net.UDPAddr).Port)
	cmd := exec.CommandContext(ctx, bin, "-o", out, "-a", "hq-interop", "-n", "test.example.com", "127.0.0.1", port, "/f")
	cmd.Dir = t.TempDir()
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("picoquicdemo client: %v\n%s", err, log)
	}
	got, err := os.ReadFile(filepath.Join(out, "f"))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("picoquic got %d bytes, want %d\n%s", len(got), len(body), log)
	}
	if s := l.Stats(); s.RetriesSent < 1 || s.BadTokens != 0 {
		t.Fatalf("listener %+v: no Retry sent, or its token refused\n%s", s, log)
	}
}
