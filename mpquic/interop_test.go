package mpquic

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// quic-go appears only in tests: the interop peer (internal/archtest
// checks the package itself does not import it).

func quicgoEchoServer(t *testing.T, ctx context.Context, tlsConf *tls.Config) net.Addr {
	t.Helper()
	l, err := quic.ListenAddr("127.0.0.1:0", tlsConf, &quic.Config{MaxIdleTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go serveEach(ctx, l.Accept, (*quic.Conn).AcceptStream, func(s *quic.Stream) {
		io.Copy(s, s)
		s.Close()
	})
	return l.Addr()
}

func TestInteropClientToQuicGo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	addr := quicgoEchoServer(t, ctx, stls)
	c, open := dialTest(t, ctx, addr.String(), ctls)
	exchange(t, ctx, open, []byte("hello"))
	exchange(t, ctx, open, testData(4<<20, 2))
	// quic-go updates its keys after its first 100 packets (to exercise
	// RFC 9001 §6), so following them is part of interoperating.
	c.mu.Lock()
	updates := c.kp.updatesByPeer
	c.mu.Unlock()
	if updates == 0 {
		t.Fatal("no key update from quic-go was seen")
	}
	t.Logf("%d key updates followed", updates)
}

func TestInteropQuicGoToServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	l := listenLoopback(t, stls, nil)
	go echoServe(ctx, l)
	c, err := quic.DialAddr(ctx, l.Addr().String(), ctls, &quic.Config{MaxIdleTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	if p := c.ConnectionState().TLS.NegotiatedProtocol; p != testALPN {
		t.Fatalf("ALPN %q", p)
	}
	open := func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStreamSync(ctx) }
	exchange(t, ctx, open, []byte("hello"))
	exchange(t, ctx, open, testData(4<<20, 3))
}
