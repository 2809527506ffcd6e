package emu

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"
)

// tcpPacket is an IPv4 TCP segment with a 32-byte header (options) and
// payload bytes of data.
func tcpPacket(payload int) []byte {
	p := make([]byte, 20+32+payload)
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	p[8], p[9] = 64, 6
	copy(p[12:], cliAddr.AsSlice())
	copy(p[16:], srvAddr.AsSlice())
	p[20+12] = 8 << 4
	return p
}

func TestPayloadLen(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    []byte
		want int
	}{
		{"tcp data", tcpPacket(1000), 1000},
		{"pure ack", tcpPacket(0), 0},
		{"udp4", udpPacket(cliAddr, srvAddr, 100, 1), 100 - 28 + 1},
		{"udp6", udpPacket(netip.MustParseAddr("fd00:1::2"), netip.MustParseAddr("fd00:200::1"), 100, 1), 100 - 48 + 1},
		{"truncated", tcpPacket(1000)[:30], 0},
		{"empty", nil, 0},
	} {
		if got := payloadLen(tc.p); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func FuzzPayloadLen(f *testing.F) {
	f.Add(tcpPacket(10))
	f.Add(udpPacket(cliAddr, srvAddr, 60, 1))
	f.Add([]byte{0x60})
	f.Fuzz(func(t *testing.T, p []byte) {
		if n := payloadLen(p); n < 0 || n > len(p) {
			t.Fatalf("payload %d of a %d-byte packet", n, len(p))
		}
	})
}

// TestActivity: data arrivals, pure ACKs and deliveries are dated, drops
// on a down link still count as sent.
func TestActivity(t *testing.T) {
	tl := startLink(t, 3)
	t0 := time.Now()
	tl.cli.send(tcpPacket(0))
	waitFor(t, "ack", time.Second, func() bool { return tl.Stats().Up.Delivered == 1 })
	a := tl.Stats().Up.Activity
	if !a.FirstDataIn.IsZero() || !a.LastDataOut.IsZero() || a.LastIn.Before(t0) || a.LastOut.Before(a.LastIn) {
		t.Fatalf("after a pure ack: %+v", a)
	}
	time.Sleep(20 * time.Millisecond)
	t1 := time.Now()
	tl.cli.send(tcpPacket(500))
	time.Sleep(20 * time.Millisecond)
	tl.SetDown(true)
	t2 := time.Now()
	tl.cli.send(tcpPacket(500))
	waitFor(t, "drop", time.Second, func() bool { return tl.Stats().Up.DropDown == 1 })
	a = tl.Stats().Up.Activity
	if a.FirstDataIn.Before(t1) || a.FirstDataIn.After(t2) || a.LastDataIn.Before(t2) || a.LastOut.After(t2) ||
		a.LastDataOut.Before(a.FirstDataIn) || a.LastDataOut.After(t2) {
		t.Fatalf("t1 %v t2 %v: %+v", t1, t2, a)
	}
	tl.ResetActivity()
	if a := tl.Stats().Up.Activity; a != (Activity{}) {
		t.Fatalf("after reset: %+v", a)
	}
}
