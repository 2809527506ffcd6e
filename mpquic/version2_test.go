package mpquic

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// QUIC version 2 (RFC 9369) end to end: mpquic's client and server with
// each other, and with quic-go (its own v2) both ways; every long header
// a v2 connection sends carries version 2, and a Retry works in v2 too.
func TestVersion2(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	mpq := listenLoopback(t, stls, nil)
	go echoServe(ctx, mpq)
	retry := listenLoopback(t, stls, &Config{RequireRetry: true})
	go echoServe(ctx, retry)
	qconf := &quic.Config{Versions: []quic.Version{quic.Version2}, MaxIdleTimeout: 10 * time.Second}
	ql, err := quic.ListenAddr("127.0.0.1:0", stls, qconf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ql.Close() })
	go serveEach(ctx, ql.Accept, (*quic.Conn).AcceptStream, func(s *quic.Stream) { io.Copy(s, s); s.Close() })
	// quic-go's server with a Retry first: its v2 integrity tag is
	// RFC 9369's key and nonce, which ours must verify.
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	tr := &quic.Transport{Conn: pc, VerifySourceAddress: func(net.Addr) bool { return true }}
	qr, err := tr.Listen(stls, qconf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qr.Close(); tr.Close(); pc.Close() })
	go serveEach(ctx, qr.Accept, (*quic.Conn).AcceptStream, func(s *quic.Stream) { io.Copy(s, s); s.Close() })

	for _, addr := range []string{mpq.Addr().String(), retry.Addr().String(), ql.Addr().String(), pc.LocalAddr().String()} {
		c, err := DialAddr(ctx, addr, ctls, &Config{Version: Version2})
		if err != nil {
			t.Fatalf("mpquic v2 client to %s: %v", addr, err)
		}
		exchange(t, ctx, func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStream(ctx) }, testData(64<<10, 2))
		if c.version != Version2 {
			t.Errorf("%s: version 0x%x", addr, c.version)
		}
		c.CloseWithError(0, "")
	}
	for _, l := range []*Listener{mpq, retry} {
		qc, err := quic.DialAddr(ctx, l.Addr().String(), ctls, qconf)
		if err != nil {
			t.Fatalf("quic-go v2 client: %v", err)
		}
		exchange(t, ctx, func(ctx context.Context) (io.ReadWriteCloser, error) { return qc.OpenStreamSync(ctx) }, testData(64<<10, 3))
		if v := qc.ConnectionState().Version; v != quic.Version2 {
			t.Errorf("quic-go says version %v", v)
		}
		qc.CloseWithError(0, "")
	}
	if n := retry.Stats().RetriesSent; n == 0 {
		t.Error("the Retry listener sent no Retry")
	}

	if _, err := (&Config{Version: 0xff00001d}).withDefaults(); err == nil {
		t.Error("a version we do not speak was accepted in the Config")
	}
}
