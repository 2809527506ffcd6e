package mpquic

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

func keyStats(c *Conn) keyPhaseState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kp
}

// updateKeys calls UpdateKeys until RFC 9001 §6.1 allows it (a packet of
// the current phase acknowledged), within a second.
func updateKeys(t *testing.T, c *Conn) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		err := c.UpdateKeys()
		if err == nil {
			return
		}
		if !errors.Is(err, ErrKeyUpdateNotAllowed) || time.Now().After(deadline) {
			t.Fatalf("UpdateKeys: %v", err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A bulk echo over two paths (each shaped to 40 Mbit/s, so both carry
// data) while the client updates its keys every 200 packets, then updates
// the server initiates: every byte intact, and both sides go through the
// same key phases.
func TestKeyUpdatesBothSidesTwoPaths(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	shaped := []*shapedConn{newShapedConn(t, 40e6, 100), newShapedConn(t, 40e6, 100)}
	mp := newMPPair(t, ctx, shaped[0], &Config{KeyUpdateInterval: -1}, &Config{KeyUpdateInterval: 200})
	if _, err := mp.c.AddPath(ctx, shaped[1], mp.l.Addr()); err != nil {
		t.Fatal(err)
	}
	exchange(t, ctx, mp.open, testData(4<<20, 21))
	srv := mp.server(t)
	time.Sleep(50 * time.Millisecond) // the last acknowledgments
	cs, ss := mp.c.Stats(), srv.Stats()
	if cs.KeyUpdatesInitiated < 5 || ss.KeyUpdatesInitiated != 0 || ss.KeyUpdatesFollowed != cs.KeyUpdatesInitiated {
		t.Fatalf("client initiated %d updates (want several), the server followed %d", cs.KeyUpdatesInitiated, ss.KeyUpdatesFollowed)
	}
	for i := range 3 {
		updateKeys(t, srv)
		exchange(t, ctx, mp.open, testData(64<<10, byte(40+i)))
	}
	time.Sleep(50 * time.Millisecond)
	cs, ss = mp.c.Stats(), srv.Stats()
	t.Logf("client initiated %d, followed %d; server initiated %d, followed %d", cs.KeyUpdatesInitiated, cs.KeyUpdatesFollowed,
		ss.KeyUpdatesInitiated, ss.KeyUpdatesFollowed)
	if ss.KeyUpdatesInitiated != 3 || cs.KeyUpdatesFollowed < 1 {
		t.Errorf("the server initiated %d updates, the client followed %d", ss.KeyUpdatesInitiated, cs.KeyUpdatesFollowed)
	}
	// An update both begin at once counts as initiated on both sides.
	if a, b := cs.KeyUpdatesInitiated+cs.KeyUpdatesFollowed, ss.KeyUpdatesInitiated+ss.KeyUpdatesFollowed; a != b {
		t.Errorf("the client went through %d key phases, the server %d", a, b)
	}
	for _, ps := range mp.c.PathStats() {
		if ps.PacketsSent < 100 {
			t.Errorf("path %d carried only %d packets: the updates were not spread over both paths", ps.ID, ps.PacketsSent)
		}
	}
}

// A key update whose first packet arrives on path 1 (path 0 a backup, so
// all traffic is on path 1) after an earlier update: recognised as the
// next phase there, not taken for a late packet of the previous one.
func TestKeyUpdateOnSecondPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	never := &Config{KeyUpdateInterval: -1}
	mp := newMPPair(t, ctx, udpLoopback(t), never, never)
	if _, err := mp.c.AddPath(ctx, udpLoopback(t), mp.l.Addr()); err != nil {
		t.Fatal(err)
	}
	if err := mp.c.Paths()[0].SetStatus(PathBackup); err != nil {
		t.Fatal(err)
	}
	srv := mp.server(t)
	deadline := time.Now().Add(5 * time.Second)
	for pathStat(t, srv, 0).Status != PathBackup {
		if time.Now().After(deadline) {
			t.Fatal("the server never saw path 0 as backup")
		}
		time.Sleep(5 * time.Millisecond)
	}
	exchange(t, ctx, mp.open, testData(256<<10, 22))
	p0 := pathStat(t, srv, 0).PacketsSent + pathStat(t, mp.c, 0).PacketsSent
	for i := range 3 {
		updateKeys(t, mp.c)
		exchange(t, ctx, mp.open, testData(256<<10, byte(23+i)))
	}
	if n := keyStats(srv).updatesByPeer; n != 3 {
		t.Fatalf("the server followed %d of 3 updates", n)
	}
	if d := pathStat(t, srv, 0).PacketsSent + pathStat(t, mp.c, 0).PacketsSent - p0; d > 10 {
		t.Fatalf("path 0 carried %d packets during the updates: they did not start on path 1", d)
	}
}

// RFC 9001 §6.1: no update before the handshake is confirmed or while the
// current phase has no acknowledged packet; §6.5: the previous read keys
// go three PTOs after the new phase's first packet.
func TestUpdateKeysRules(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stls, ctls := testTLS(t)
	l := listenLoopback(t, stls, &Config{KeyUpdateInterval: -1})
	go echoServe(ctx, l)
	c, err := DialAddr(ctx, l.Addr().String(), ctls, &Config{KeyUpdateInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	open := func(ctx context.Context) (io.ReadWriteCloser, error) { return c.OpenStream(ctx) }
	exchange(t, ctx, open, []byte("confirm"))
	updateKeys(t, c)
	if err := c.UpdateKeys(); !errors.Is(err, ErrKeyUpdateNotAllowed) {
		t.Fatalf("a second update before any packet of the first was acknowledged: %v", err)
	}
	exchange(t, ctx, open, testData(64<<10, 30))
	updateKeys(t, c)
	exchange(t, ctx, open, testData(64<<10, 31))
	c.mu.Lock()
	wait := 3*c.ptoDuration() + 50*time.Millisecond
	c.mu.Unlock()
	time.Sleep(wait)
	exchange(t, ctx, open, []byte("after"))
	if kp := keyStats(c); kp.updatesByUs != 2 || kp.prevKeysDropped < 1 {
		t.Fatalf("client: %d updates, previous keys dropped %d times", kp.updatesByUs, kp.prevKeysDropped)
	}
	c.mu.Lock()
	prev := c.prevOpen
	c.mu.Unlock()
	if prev != nil {
		t.Fatalf("previous read keys still kept %v after the new phase began", wait)
	}
}

// An endpoint that followed its peer's update and has sent only ACKs
// since (an idle connection) has nothing of its phase acknowledged, so
// RFC 9001 §6.1 forbids its own update; UpdateKeys then sends a PING, and
// a retry is allowed once it is acknowledged (the retries of updateKeys
// waited in vain before: a CI run failed there).
func TestUpdateKeysOnIdleConnectionAsksForAck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	never := &Config{KeyUpdateInterval: -1}
	mp := newMPPair(t, ctx, udpLoopback(t), never, never)
	exchange(t, ctx, mp.open, testData(64<<10, 31))
	srv := mp.server(t)
	time.Sleep(100 * time.Millisecond) // idle: the last acknowledgments are in
	srv.mu.Lock()
	srv.kp.firstSent, srv.kp.acked = map[uint32]uint64{}, false // as right after a switch of phase
	srv.mu.Unlock()
	updateKeys(t, srv)
	if n := srv.Stats().KeyUpdatesInitiated; n != 1 {
		t.Fatalf("the server initiated %d updates", n)
	}
	exchange(t, ctx, mp.open, testData(64<<10, 32))
}
