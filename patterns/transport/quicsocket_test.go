package transport

import (
	"net"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
)

// The socket counter sums exactly the datagrams read through it, batched
// (as quic-go reads on Linux and macOS) or one by one.
func TestCountedUDPCounts(t *testing.T) {
	lc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	c := newCountedUDP(lc)
	snd, err := net.DialUDP("udp4", nil, lc.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	sizes := []int{1252, 37, 1400, 1}
	for _, n := range sizes {
		if _, err := snd.Write(make([]byte, n)); err != nil {
			t.Fatal(err)
		}
	}
	_ = lc.SetReadDeadline(time.Now().Add(5 * time.Second))
	ms := make([]ipv4.Message, 2)
	for i := range ms {
		ms[i].Buffers = [][]byte{make([]byte, 1500)}
	}
	var got int
	for got < len(sizes)-1 {
		n, err := c.ReadBatch(ms[:min(2, len(sizes)-1-got)], 0)
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	if _, _, err := c.ReadFrom(make([]byte, 1500)); err != nil {
		t.Fatal(err)
	}
	if d, b := c.datagrams.Load(), c.bytes.Load(); d != 4 || b != 1252+37+1400+1 {
		t.Errorf("counted %d datagrams, %d bytes; want 4, %d", d, b, 1252+37+1400+1)
	}
}
