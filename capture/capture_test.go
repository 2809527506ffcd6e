package capture

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

var (
	client = netip.MustParseAddr("198.18.1.2")
	server = netip.MustParseAddrPort("198.18.200.1:443")
	srv6   = netip.MustParseAddrPort("[fd00:200::1]:443")
)

// tcp4 builds an IPv4 TCP packet with payload bytes of data.
func tcp4(src, dst netip.AddrPort, payload int) []byte {
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: net.IP(src.Addr().AsSlice()), DstIP: net.IP(dst.Addr().AsSlice())}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(src.Port()), DstPort: layers.TCPPort(dst.Port()), ACK: true, Window: 100}
	_ = tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ip, tcp, gopacket.Payload(make([]byte, payload))); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func udp6(src, dst netip.AddrPort, payload int) []byte {
	ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: net.IP(src.Addr().AsSlice()), DstIP: net.IP(dst.Addr().AsSlice())}
	udp := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
	_ = udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ip, udp, gopacket.Payload(make([]byte, payload))); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// TestAccount: data and pure ACKs each way, per interface and flow; other
// ports and protocols are not counted.
func TestAccount(t *testing.T) {
	tf, uf := Flow{Proto: "tcp", Server: server}, Flow{Proto: "udp", Server: srv6}
	a := newAccounter([]Flow{tf, uf})
	me := netip.AddrPortFrom(client, 40000)
	me6 := netip.MustParseAddrPort("[fd00:1::2]:40000")
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	steps := []struct {
		iface string
		pkt   []byte
		ms    int
		match bool
	}{
		{"wlan0", tcp4(me, server, 0), 0, true},     // SYN-ish, no data
		{"wlan0", tcp4(me, server, 1000), 10, true}, // first data out
		{"wlan0", tcp4(server, me, 0), 30, true},    // ack in
		{"wlan0", tcp4(me, server, 500), 50, true},  // last data out
		{"wlan0", tcp4(me, server, 0), 60, true},    // last (ack) out
		{"wlan0", tcp4(server, me, 200), 70, true},  // data in
		{"wwan0", tcp4(me, server, 300), 80, true},  // data on the other interface
		{"wlan0", tcp4(me, netip.AddrPortFrom(server.Addr(), 80), 100), 90, false},
		{"wwan0", udp6(me6, srv6, 1200), 100, true},
		{"wwan0", udp6(me6, netip.AddrPortFrom(srv6.Addr(), 53), 40), 110, false},
		{"wwan0", []byte{0x45, 1, 2}, 120, false},
	}
	for i, s := range steps {
		if got := a.account(s.iface, s.pkt, len(s.pkt), at(s.ms)); got != s.match {
			t.Fatalf("step %d: matched %v", i, got)
		}
	}
	r := Result{Flows: a.result()}
	w := r.Of("wlan0", tf)
	if w.FirstDataOut != at(10) || w.LastDataOut != at(50) || w.LastOut != at(60) || w.LastIn != at(70) || w.FirstDataIn != at(70) ||
		w.PacketsOut != 4 || w.PacketsIn != 2 || w.BytesOut != uint64(40+40+1000+40+500+40) || w.BytesIn != 40+240 {
		t.Errorf("wlan0 %+v", w)
	}
	if c := r.Of("wwan0", tf); c.FirstDataOut != at(80) || c.PacketsOut != 1 {
		t.Errorf("wwan0 tcp %+v", c)
	}
	if q := r.Of("wwan0", uf); q.FirstDataOut != at(100) || q.BytesOut != 40+8+1200 {
		t.Errorf("wwan0 udp %+v", q)
	}
	if len(r.Flows) != 3 {
		t.Errorf("%d flow activities", len(r.Flows))
	}
}

func FuzzAccount(f *testing.F) {
	me := netip.AddrPortFrom(client, 1)
	f.Add(tcp4(me, server, 10))
	f.Add(udp6(netip.MustParseAddrPort("[fd00:1::2]:1"), srv6, 10))
	f.Add([]byte{0x60, 0, 0})
	a := newAccounter([]Flow{{Proto: "tcp", Server: server}, {Proto: "udp", Server: srv6}})
	f.Fuzz(func(t *testing.T, pkt []byte) {
		a.account("x", pkt, len(pkt), time.Unix(1, 0))
	})
}
