package mpquic

import (
	"context"
	"testing"
	"time"
)

// A client that holds none of the server's IDs for the next path ID (its
// PATH_NEW_CONNECTION_ID frames lost without either side noticing) says so
// with PATH_CIDS_BLOCKED; the server announces them again and the path
// opens. Without the answer AddPath would wait until its context ends.
func TestPathCIDsBlocked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mp := newMPPair(t, ctx, udpLoopback(t), nil, nil)
	exchange(t, ctx, mp.open, []byte("confirmed"))
	c := mp.c
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		n := len(c.cidSet(1).peer)
		if n > 0 {
			c.cidSet(1).peer = nil // lost, as far as the client knows
		}
		c.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server issued no IDs for path 1")
		}
		time.Sleep(10 * time.Millisecond)
	}
	actx, acancel := context.WithTimeout(ctx, 5*time.Second)
	defer acancel()
	if _, err := c.AddPath(actx, udpLoopback(t), mp.l.Addr()); err != nil {
		t.Fatalf("AddPath: %v", err)
	}
	exchange(t, ctx, mp.open, testData(256<<10, 4))
	cs, ss := c.Stats(), mp.server(t).Stats()
	if cs.PathCIDsBlockedSent < 1 || ss.PathCIDsBlockedReceived < 1 || ss.PathCIDsBlockedReceived > cs.PathCIDsBlockedSent {
		t.Fatalf("PATH_CIDS_BLOCKED sent %d, received %d", cs.PathCIDsBlockedSent, ss.PathCIDsBlockedReceived)
	}
	t.Logf("PATH_CIDS_BLOCKED sent %d, received %d", cs.PathCIDsBlockedSent, ss.PathCIDsBlockedReceived)
}
