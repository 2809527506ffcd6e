package mpquic

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

func TestStatelessResetPacket(t *testing.T) {
	k, other := NewStatelessResetKey(), NewStatelessResetKey()
	cid := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	// Two calls with the same inputs: the token is deterministic.
	first, again := k.token(cid), k.token(cid)
	if first != again || first == other.token(cid) || first == k.token(cid[:7]) {
		t.Fatal("a token must be a function of the key and the connection ID only")
	}
	tok := k.token(cid)
	for _, c := range []struct{ trigger, want int }{{21, 0}, {22, 21}, {43, 42}, {44, 43}, {1200, 43}} {
		b := appendStatelessReset(nil, c.trigger, tok)
		if len(b) != c.want {
			t.Errorf("reset for a %d-byte trigger: %d bytes, want %d", c.trigger, len(b), c.want)
			continue
		}
		if len(b) > 0 && (b[0]&0xc0 != 0x40 || !bytes.Equal(b[len(b)-16:], tok[:])) {
			t.Errorf("reset %x: not a short header ending in the token", b)
		}
	}
}

func TestResetLimiter(t *testing.T) {
	var r resetLimiter
	now := time.Now()
	n := 0
	for range 1000 {
		if r.allow(now) {
			n++
		}
	}
	if n != resetBurst {
		t.Fatalf("%d resets allowed at once, want the burst %d", n, resetBurst)
	}
	n = 0
	for range 1000 {
		if r.allow(now.Add(500 * time.Millisecond)) {
			n++
		}
	}
	if n != min(resetBurst, resetRate/2) {
		t.Fatalf("%d resets allowed after 500 ms, want %d", n, min(resetBurst, resetRate/2))
	}
	if r.sent != uint64(resetBurst+min(resetBurst, resetRate/2)) {
		t.Fatalf("sent %d", r.sent)
	}
}

// restartedServer serves echo on a socket of its own, "crashes" (the
// socket closes with no CONNECTION_CLOSE sent) and comes back on the same
// address with key; it returns the client connection and the new
// listener.
func restartedServer(t *testing.T, ctx context.Context, key, newKey *StatelessResetKey) (*Conn, *Listener) {
	t.Helper()
	stls, ctls := testTLS(t)
	pc1, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l1, err := Listen(pc1, stls, &Config{StatelessResetKey: key})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	go echoServe(sctx, l1)
	c, open := dialTest(t, ctx, pc1.LocalAddr().String(), ctls)
	exchange(t, ctx, open, []byte("before the crash"))
	stop()
	pc1.Close()
	pc2, err := net.ListenPacket("udp", pc1.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	l2, err := Listen(pc2, stls, &Config{StatelessResetKey: newKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l2.Close(); pc2.Close() })
	return c, l2
}

// A server restarted with the same key resets its old connections: the
// client's next packet draws a reset and the connection ends at once with
// ErrStatelessReset, its streams too, instead of after the idle timeout.
func TestStatelessResetRestartedServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := NewStatelessResetKey()
	c, l2 := restartedServer(t, ctx, key, key)
	s, err := c.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.Write([]byte("after the restart"))
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("connection alive 5 s after its packets reached the restarted server (%d resets sent)", l2.StatelessResetsSent())
	}
	if !errors.Is(c.Err(), ErrStatelessReset) {
		t.Fatalf("connection ended with %v, want ErrStatelessReset", c.Err())
	}
	if _, err := s.Read(make([]byte, 10)); !errors.Is(err, ErrStatelessReset) {
		t.Fatalf("stream read: %v, want ErrStatelessReset", err)
	}
	if n := l2.StatelessResetsSent(); n < 1 || n > resetBurst {
		t.Fatalf("%d resets sent", n)
	}
	t.Logf("reset %v after the first write; %d resets sent", time.Since(start).Round(time.Millisecond), l2.StatelessResetsSent())
}

// A reset with another key's token is not the peer's: the connection
// ignores it and stays up.
func TestStatelessResetWrongKeyIgnored(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, l2 := restartedServer(t, ctx, NewStatelessResetKey(), NewStatelessResetKey())
	s, err := c.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Write([]byte("after the restart"))
	deadline := time.Now().Add(5 * time.Second)
	for l2.StatelessResetsSent() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if l2.StatelessResetsSent() < 2 {
		t.Fatalf("the restarted server sent %d resets: the client sent nothing it could answer", l2.StatelessResetsSent())
	}
	time.Sleep(100 * time.Millisecond) // the resets' arrival
	if err := c.Err(); err != nil {
		t.Fatalf("a reset with a foreign token ended the connection: %v", err)
	}
}

// A listener answers a stray short-header packet with a reset one byte
// shorter (at most 43 bytes) carrying the token of its destination ID,
// never one of 21 bytes or less, and no more than its rate.
func TestListenerSendsStatelessResets(t *testing.T) {
	stls, _ := testTLS(t)
	key := NewStatelessResetKey()
	l := listenLoopback(t, stls, &Config{StatelessResetKey: key})
	u, err := net.Dial("udp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	cid := []byte{9, 8, 7, 6, 5, 4, 3, 2}
	read := func() []byte {
		u.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		b := make([]byte, 1500)
		n, err := u.Read(b)
		if err != nil {
			return nil
		}
		return b[:n]
	}
	stray := func(n int) []byte {
		b := make([]byte, n)
		b[0] = 0x41
		copy(b[1:], cid)
		return b
	}
	u.Write(stray(21))
	if b := read(); b != nil {
		t.Fatalf("a 21-byte trigger drew a %d-byte answer", len(b))
	}
	tok := key.token(cid)
	for _, c := range []struct{ trigger, want int }{{22, 21}, {30, 29}, {1200, 43}} {
		u.Write(stray(c.trigger))
		b := read()
		if len(b) != c.want || !bytes.Equal(b[len(b)-16:], tok[:]) || b[0]&0xc0 != 0x40 {
			t.Fatalf("a %d-byte trigger drew %x, want a %d-byte reset ending in %x", c.trigger, b, c.want, tok)
		}
	}
	// A flood: at most the burst left plus the rate.
	start := time.Now()
	for range 500 {
		u.Write(stray(100))
	}
	got := 0
	for read() != nil {
		got++
	}
	limit := resetBurst + int(time.Since(start).Seconds()*resetRate) + 1
	if got > limit || got < 1 {
		t.Fatalf("500 stray packets drew %d resets, limit %d", got, limit)
	}
	t.Logf("500 stray packets: %d resets (limit %d)", got, limit)
}

// Every connection ID the server issues, on every path (NEW_CONNECTION_ID
// and PATH_NEW_CONNECTION_ID, and the handshake's transport parameter),
// carries its key's token, so a restarted server can reset whichever path
// reaches it first; the client recognises a reset on any of them.
func TestStatelessResetTokensOnEveryPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := NewStatelessResetKey()
	mp := newMPPair(t, ctx, udpLoopback(t), &Config{StatelessResetKey: key}, nil)
	if _, err := mp.c.AddPath(ctx, udpLoopback(t), mp.l.Addr()); err != nil {
		t.Fatal(err)
	}
	exchange(t, ctx, mp.open, testData(64<<10, 3))
	c := mp.c
	c.mu.Lock()
	defer c.mu.Unlock()
	perPath := map[uint32]int{}
	for id, cs := range c.cids {
		for _, p := range cs.peer {
			if !p.hasToken || p.token != key.token(p.cid) {
				t.Errorf("path %d, ID %x (seq %d): token %x, want %x", id, p.cid, p.seq, p.token, key.token(p.cid))
				continue
			}
			perPath[id]++
			reset := appendStatelessReset(nil, 100, p.token)
			if !c.isStatelessReset(reset) {
				t.Errorf("path %d: a reset with ID %x's token not recognised", id, p.cid)
			}
		}
	}
	if perPath[0] < 2 || perPath[1] < 1 {
		t.Fatalf("tokens held per path %v: want path 0's handshake ID and more, and path 1's", perPath)
	}
	if c.isStatelessReset(appendStatelessReset(nil, 100, NewStatelessResetKey().token([]byte("x")))) {
		t.Fatal("a foreign token recognised")
	}
}
