package mpquic

import "testing"

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
