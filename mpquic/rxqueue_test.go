package mpquic

import (
	"context"
	"testing"
	"time"
)

// The server's input queue keeps order, refuses past its limit and works
// again once drained.
func TestRxQueue(t *testing.T) {
	r := newRxQueue(3)
	for i := 0; i < 4; i++ {
		if ok := r.push(datagram{b: []byte{byte(i)}}); ok != (i < 3) {
			t.Fatalf("push %d: %v", i, ok)
		}
	}
	select {
	case <-r.ready:
	default:
		t.Fatal("not ready after a push")
	}
	for i := 0; i < 3; i++ {
		d, ok := r.pop()
		if !ok || d.b[0] != byte(i) {
			t.Fatalf("pop %d: %v %v", i, d.b, ok)
		}
	}
	if _, ok := r.pop(); ok {
		t.Fatal("pop from an empty queue")
	}
	if !r.push(datagram{b: []byte{9}}) {
		t.Fatal("drained queue refused a datagram")
	}
	if d, _ := r.pop(); d.b[0] != 9 {
		t.Fatalf("got %v", d.b)
	}
}

// A server connection whose input queue is full drops what arrives and
// says so in Stats; the client declares those packets lost and the
// transfer still completes once the queue has room again.
func TestServerQueueDropsCounted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mp := newMPPair(t, ctx, udpLoopback(t), nil, nil)
	exchange(t, ctx, mp.open, testData(64<<10, 1))
	srv := mp.server(t)
	srv.rx.mu.Lock()
	srv.rx.limit = 0 // refuse everything for a while
	srv.rx.mu.Unlock()
	time.AfterFunc(200*time.Millisecond, func() {
		srv.rx.mu.Lock()
		srv.rx.limit = inQueueLen(srv.conf)
		srv.rx.mu.Unlock()
	})
	exchange(t, ctx, mp.open, testData(1<<20, 2))
	dropped, lost := srv.Stats().DatagramsDropped, mp.c.Stats().PacketsLost
	t.Logf("server dropped %d datagrams, client declared %d packets lost", dropped, lost)
	if dropped == 0 || lost == 0 {
		t.Errorf("server dropped %d datagrams, client declared %d lost; want both > 0", dropped, lost)
	}
	// Against what was planted: on loopback the refused datagrams are the
	// only loss, so the client declares no more than the server counted
	// (ACK-only datagrams among them are never declared; 10 spare for a
	// spurious declaration under a loaded CI).
	if lost > dropped+10 {
		t.Errorf("client declared %d packets lost, more than the %d datagrams the server's queue refused", lost, dropped)
	}
}
