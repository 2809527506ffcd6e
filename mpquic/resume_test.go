package mpquic

import (
	"context"
	"crypto/tls"
	"io"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// Session resumption (RFC 9001 §4.6, RFC 8446 §2.2): a second connection
// with the first one's ticket resumes, mpquic's client and server against
// each other and against quic-go both ways.
func TestResumption(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	mpq := listenLoopback(t, stls, nil)
	go echoServe(ctx, mpq)
	qg := quicgoEchoServer(t, ctx, stls)

	dialMPQUIC := func(addr string, tc *tls.Config) bool {
		t.Helper()
		c, err := DialAddr(ctx, addr, tc, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseWithError(0, "")
		// The ticket comes after the handshake: an exchange waits for it.
		exchange(t, ctx, func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStream(ctx) }, []byte("x"))
		return c.ConnectionState().DidResume
	}
	dialQuicGo := func(addr string, tc *tls.Config) bool {
		t.Helper()
		c, err := quic.DialAddr(ctx, addr, tc, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseWithError(0, "")
		exchange(t, ctx, func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStreamSync(ctx) }, []byte("x"))
		return c.ConnectionState().TLS.DidResume
	}
	for _, tc := range []struct {
		name string
		dial func(string, *tls.Config) bool
		addr string
	}{
		{"mpquic-to-mpquic", dialMPQUIC, mpq.Addr().String()},
		{"mpquic-to-quic-go", dialMPQUIC, qg.String()},
		{"quic-go-to-mpquic", dialQuicGo, mpq.Addr().String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ctls.Clone()
			c.ClientSessionCache = tls.NewLRUClientSessionCache(4)
			if tc.dial(tc.addr, c) {
				t.Fatal("the first connection resumed")
			}
			if !tc.dial(tc.addr, c) {
				t.Fatal("the second connection did not resume")
			}
		})
	}
}
