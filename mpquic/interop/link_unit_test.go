package interop

import (
	"testing"
	"time"
)

// TestLinkRateAndQueue: the emulated link spaces datagrams by their
// serialization time at its rate, delays them by its one-way delay and
// drops what finds its queue full. A burst of 8 datagrams of 1000 bytes
// (1028 on the wire) at 102.8 kbit/s (80 ms each) into a queue of 5: 5 cross,
// 80 ms apart, the first 80 ms + 10 ms after the burst, 3 are dropped.
func TestLinkRateAndQueue(t *testing.T) {
	l := newLink(102.8e3, 10*time.Millisecond, 5)
	defer l.close()
	got := make(chan []byte, 8)
	start := time.Now()
	for i := range 8 {
		b := make([]byte, 1000)
		b[0] = byte(i) // a short header
		l.send(toClient, nil, b, func(b []byte) { got <- b })
	}
	for i := range 5 {
		select {
		case b := <-got:
			if b[0] != byte(i) {
				t.Fatalf("datagram %d crossed as number %d", b[0], i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of 5 datagrams crossed", i)
		}
	}
	if d := l.dropped(toClient); d != 3 {
		t.Errorf("%d dropped, want 3", d)
	}
	ds := l.deliveries(toClient)
	if len(ds) != 5 {
		t.Fatalf("%d deliveries logged, want 5", len(ds))
	}
	for i, d := range ds {
		// Computed times: exact whatever the scheduler did.
		want := 80*time.Millisecond*time.Duration(i+1) + 10*time.Millisecond
		if off := d.at.Sub(start) - want; off < 0 || off > 40*time.Millisecond {
			t.Errorf("datagram %d crossed at %v, want %v after the burst", i, d.at.Sub(start), want)
		}
		if !d.short || d.size != 1000 {
			t.Errorf("delivery %d logged as %+v", i, d)
		}
	}
	// 5 datagrams of 1000 bytes from the first's arrival to the last's:
	// the goodput measure over 4 serialization times.
	if kbps, _, _ := l.goodput(nil, 4*1000); kbps < 99 || kbps > 101 {
		t.Errorf("goodput %.1f kbit/s, want 100", kbps)
	}
}
