package mpquic

import (
	"bytes"
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
	sink := &qlogSink{traces: map[bool]*bytes.Buffer{}, closed: map[bool]bool{}}
	conf := &Config{Qlog: sink.open}
	mp := newMPPair(t, ctx, udpLoopback(t), conf, conf)
	exchange(t, ctx, mp.open, testData(64<<10, 1))
	srv := mp.server(t)
	srv.rx.mu.Lock()
	srv.rx.limit = 0 // refuse everything until refuseN datagrams came
	srv.rx.mu.Unlock()
	// A count, not a time: on a starved host the client may send only an
	// ACK or two in a fixed window, and ACK-only packets are never
	// declared lost.
	const refuseN = 20
	reopened := make(chan struct{})
	go func() {
		defer close(reopened)
		for srv.rxDropped.Load() < refuseN && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		srv.rx.mu.Lock()
		srv.rx.limit = inQueueLen(srv.conf)
		srv.rx.mu.Unlock()
	}()
	exchange(t, ctx, mp.open, testData(1<<20, 2))
	<-reopened
	dropped, lost := srv.Stats().DatagramsDropped, mp.c.Stats().PacketsLost
	t.Logf("server dropped %d datagrams, client declared %d packets lost", dropped, lost)
	if dropped < refuseN || lost == 0 {
		t.Errorf("server dropped %d datagrams, client declared %d lost; want at least %d and some", dropped, lost, refuseN)
	}
	// Against what was planted: on loopback the refused datagrams are the
	// only loss the test causes; the kernel's drops at the listener's
	// socket (its reader starved on a loaded host) are the only other. A
	// packet the client declared lost that never reached the server's
	// connection is one of these (ACK-only datagrams among them are never
	// declared), and none it declared lost reached it.
	st := pathStat(t, mp.c, 0)
	kernel, ok := socketDrops(t, mp.l.pconn)
	evs := closedTraces(t, sink, mp.c, srv)
	if !ok {
		t.Log("no socket drop counter here")
		kernel = 0
	}
	checkCleanPathTruth(t, "client", st, lossesOnPath(evs[true], evs[false], 0), dropped+kernel)
}
