package patterns

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/certs"
)

// BenchmarkLoopbackTLSCost measures what TLS itself costs on loopback, in
// the same run: one TCP connection streaming 64 KB writes to a reader that
// discards them, plain and inside TLS 1.3 (AES-128-GCM, as iperf's TLS
// connections negotiate). The ratio tls/plain is the ceiling of mptester's
// iperf (which runs inside TLS) against iperf3's plain TCP on this machine.
func BenchmarkLoopbackTLSCost(b *testing.B) {
	cert, _, err := certs.SelfSigned(nil)
	if err != nil {
		b.Fatal(err)
	}
	const total = 1 << 30
	run := func(b *testing.B, wrap func(c net.Conn, server bool) net.Conn) {
		var bytes int64
		var took time.Duration
		for range b.N {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan int64, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					done <- 0
					return
				}
				n, _ := io.Copy(io.Discard, wrap(c, true))
				done <- n
			}()
			raw, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			c := wrap(raw, false)
			buf := make([]byte, 64<<10)
			start := time.Now()
			for sent := 0; sent < total; sent += len(buf) {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			c.Close()
			bytes += <-done
			took += time.Since(start)
			ln.Close()
		}
		b.ReportMetric(float64(bytes)*8/took.Seconds()/1e6, "Mbit/s")
	}
	b.Run("plain", func(b *testing.B) { run(b, func(c net.Conn, _ bool) net.Conn { return c }) })
	b.Run("tls", func(b *testing.B) {
		run(b, func(c net.Conn, server bool) net.Conn {
			if server {
				return tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
			}
			return tls.Client(c, &tls.Config{InsecureSkipVerify: true})
		})
	})
}
