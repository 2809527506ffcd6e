package mpquic

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
	"time"
)

// The batch reader returns every datagram once, in order, with its sender:
// a GSO train (which loopback hands to a GRO socket as one buffer) is cut
// back into its datagrams, the short last one included, and datagrams of
// two senders are told apart.
func TestBatchReaderSplitsGRO(t *testing.T) {
	recv := udpLoopback(t).(*net.UDPConn)
	br := newBatchReader(recv)
	if br == nil {
		t.Fatal("no batch reader for a UDP socket")
	}
	a, b := udpLoopback(t), udpLoopback(t)
	var want [][]byte
	var wantFrom []string
	train := func(pc net.PacketConn, seg, n, last int, seed byte) {
		var buf []byte
		for i := range n {
			size := seg
			if i == n-1 {
				size = last
			}
			d := testData(size, seed+byte(i))
			want, wantFrom = append(want, d), append(wantFrom, pc.LocalAddr().String())
			buf = append(buf, d...)
		}
		var oob []byte
		if n > 1 {
			if err := writeGSO(pc, buf, seg, recv.LocalAddr(), netip.Addr{}, ecnNotECT, &oob); err != nil {
				t.Skipf("no UDP GSO here: %v", err)
			}
			return
		}
		if _, err := pc.WriteTo(buf, recv.LocalAddr()); err != nil {
			t.Fatal(err)
		}
	}
	train(a, 1200, 10, 700, 1)
	train(b, 1452, 1, 1452, 40)
	train(a, 1000, 3, 1000, 60)
	for i := range 40 {
		train(b, 100+i, 1, 100+i, byte(80+i))
	}
	recv.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i := range want {
		d, from, _, _, err := br.nextDatagram()
		if err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		if !bytes.Equal(d, want[i]) || from.String() != wantFrom[i] {
			t.Fatalf("datagram %d: %d bytes from %v, want %d from %s", i, len(d), from, len(want[i]), wantFrom[i])
		}
	}
	t.Logf("%d datagrams; GRO %v", len(want), br.gro)
}
