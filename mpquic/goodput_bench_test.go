package mpquic

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// sink reads a stream to its end and answers with one byte, so the sender
// times delivery, not just buffering.
func sink(s io.ReadWriteCloser) {
	io.Copy(io.Discard, s)
	s.Write([]byte{1})
	s.Close()
}

func upload(b *testing.B, ctx context.Context, open func(context.Context) (io.ReadWriteCloser, error), data []byte) {
	s, err := open(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Write(data); err != nil {
		b.Fatal(err)
	}
	s.Close()
	if n, err := io.ReadFull(s, make([]byte, 1)); n != 1 {
		b.Fatal(err)
	}
}

// BenchmarkGoodput uploads 32 MiB per iteration over loopback on one stream:
// mptester's mpquic against itself and against quic-go, next to quic-go
// against itself, all in the same run (ns/op and MB/s comparable).
func BenchmarkGoodput(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	stls, ctls := testTLS(b)
	data := testData(32<<20, 9)
	conf := &Config{MaxDatagramSize: maxDatagramSize}
	qconf := &quic.Config{MaxIdleTimeout: 30 * time.Second}

	mpServer := func(b *testing.B) string {
		l := listenLoopback(b, stls, conf)
		go serveEach(ctx, l.Accept, (*Conn).AcceptStream, func(s *Stream) { sink(s) })
		return l.Addr().String()
	}
	qgServer := func(b *testing.B) string {
		l, err := quic.ListenAddr("127.0.0.1:0", stls, qconf)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		go serveEach(ctx, l.Accept, (*quic.Conn).AcceptStream, func(s *quic.Stream) { sink(s) })
		return l.Addr().String()
	}
	mpClient := func(b *testing.B, addr string) func(context.Context) (io.ReadWriteCloser, error) {
		c, err := DialAddr(ctx, addr, ctls, conf)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			st := c.Stats()
			b.Logf("mpquic client: %+v", st)
			c.CloseWithError(0, "")
		})
		return func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStream(ctx) }
	}
	qgClient := func(b *testing.B, addr string) func(context.Context) (io.ReadWriteCloser, error) {
		c, err := quic.DialAddr(ctx, addr, ctls, qconf)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.CloseWithError(0, "") })
		return func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStreamSync(ctx) }
	}
	cases := []struct {
		name   string
		server func(*testing.B) string
		client func(*testing.B, string) func(context.Context) (io.ReadWriteCloser, error)
	}{
		{"mpquic-mpquic", mpServer, mpClient},
		{"quicgo-quicgo", qgServer, qgClient},
		{"mpquic-quicgo", qgServer, mpClient},
		{"quicgo-mpquic", mpServer, qgClient},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			open := tc.client(b, tc.server(b))
			upload(b, ctx, open, data[:1<<20]) // warm up the window
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				upload(b, ctx, open, data)
			}
		})
	}
}
