package mpquic

import (
	"context"
	"io"
	"testing"
	"time"
)

// waitPeerCIDs waits until the peer issued a second connection ID.
func waitPeerCIDs(t *testing.T, c *Conn) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		c.mu.Lock()
		n := len(c.cids[0].peer)
		c.mu.Unlock()
		if n > 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the peer issued no NEW_CONNECTION_ID")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The client moves to another connection ID of the server (NEW_CONNECTION_ID)
// and retires the first (RETIRE_CONNECTION_ID): the connection carries on,
// against our server (which routes the new ID and replaces the retired
// one) and against quic-go.
func TestSwitchConnectionID(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	l := listenLoopback(t, stls, nil)
	go echoServe(ctx, l)
	check := func(t *testing.T, c *Conn, open func(context.Context) (io.ReadWriteCloser, error)) {
		exchange(t, ctx, open, []byte("before"))
		waitPeerCIDs(t, c)
		c.mu.Lock()
		old := string(c.p0().dcid)
		if !c.switchDCID(c.p0()) {
			c.mu.Unlock()
			t.Fatal("no other connection ID to move to")
		}
		moved := string(c.p0().dcid) != old
		c.mu.Unlock()
		if !moved {
			t.Fatal("the destination connection ID did not change")
		}
		exchange(t, ctx, open, testData(1<<20, 11))
	}
	t.Run("mpquic", func(t *testing.T) {
		c, open := dialTest(t, ctx, l.Addr().String(), ctls)
		first := func() []byte { c.mu.Lock(); defer c.mu.Unlock(); return append([]byte(nil), c.p0().dcid...) }()
		check(t, c, open)
		// The server dropped the retired ID from its routing and issued
		// another in its place.
		time.Sleep(100 * time.Millisecond)
		l.mu.Lock()
		_, routed := l.conns[string(first)]
		l.mu.Unlock()
		if routed {
			t.Error("the retired connection ID still routes to the connection")
		}
		c.mu.Lock()
		n := len(c.cids[0].peer)
		c.mu.Unlock()
		if n < 2 {
			t.Errorf("%d connection IDs of the server left, want a replacement", n)
		}
	})
	t.Run("quic-go", func(t *testing.T) {
		addr := quicgoEchoServer(t, ctx, stls)
		c, open := dialTest(t, ctx, addr.String(), ctls)
		check(t, c, open)
	})
}
