package pcapanalysis

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Option encoders for the tests: the RFC 8684 layouts written out byte by
// byte, independently of the decoder.
func mpOpt(sub, low uint8, body ...byte) []byte {
	b := append([]byte{tcpOptMPTCP, 0, sub<<4 | low&0x0f}, body...)
	b[1] = byte(len(b))
	return b
}
func be64(v uint64) []byte { b := make([]byte, 8); binary.BigEndian.PutUint64(b, v); return b }
func be32(v uint32) []byte { b := make([]byte, 4); binary.BigEndian.PutUint32(b, v); return b }
func be16(v uint16) []byte { b := make([]byte, 2); binary.BigEndian.PutUint16(b, v); return b }
func cat(bs ...[]byte) []byte {
	var o []byte
	for _, b := range bs {
		o = append(o, b...)
	}
	return o
}

func capSYN() []byte            { return mpOpt(SubCapable, 1, 0x81) }
func capSYNACK(k uint64) []byte { return mpOpt(SubCapable, 1, cat([]byte{0x81}, be64(k))...) }
func capACK(ks, kr uint64) []byte {
	return mpOpt(SubCapable, 1, cat([]byte{0x81}, be64(ks), be64(kr))...)
}
func joinSYN(tok uint32, backup bool) []byte {
	var l uint8
	if backup {
		l = 1
	}
	return mpOpt(SubJoin, l, cat([]byte{2}, be32(tok), be32(0x11223344))...)
}
func joinSYNACK() []byte { return mpOpt(SubJoin, 0, cat([]byte{0}, be64(0xabcdef), be32(7))...) }
func joinACK() []byte    { return mpOpt(SubJoin, 0, cat([]byte{0}, make([]byte, 20))...) }

// dss with a 4-byte data ACK and an 8-byte DSN mapping.
func dss8(ack uint32, dsn uint64, ssn uint32, n uint16) []byte {
	return mpOpt(SubDSS, 0, cat([]byte{0x01 | 0x04 | 0x08}, be32(ack), be64(dsn), be32(ssn), be16(n))...)
}

// dss4 with a 32-bit DSN and a checksum.
func dss4(dsn uint32, ssn uint32, n uint16) []byte {
	return mpOpt(SubDSS, 0, cat([]byte{0x04}, be32(dsn), be32(ssn), be16(n), be16(0xbeef))...)
}

type synth struct {
	t   time.Time
	buf bytes.Buffer
	w   *pcapgo.Writer
	tb  testing.TB
	seq map[string]uint32
}

func newSynth(tb testing.TB) *synth {
	s := &synth{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC), tb: tb, seq: map[string]uint32{}}
	s.w = pcapgo.NewWriter(&s.buf)
	if err := s.w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		tb.Fatal(err)
	}
	return s
}

func (s *synth) after(d time.Duration) *synth { s.t = s.t.Add(d); return s }

type seg struct {
	src, dst      string // ip:port
	syn, ack, fin bool
	seq, ackn     uint32
	payload       int
	opts          [][]byte
	tsval, tsecr  uint32
	noTS          bool
}

func splitHP(tb testing.TB, hp string) (net.IP, uint16) {
	h, p, err := net.SplitHostPort(hp)
	if err != nil {
		tb.Fatal(err)
	}
	var port int
	for _, c := range p {
		port = port*10 + int(c-'0')
	}
	return net.ParseIP(h), uint16(port)
}

func (s *synth) tcp(g seg) {
	sip, sp := splitHP(s.tb, g.src)
	dip, dp := splitHP(s.tb, g.dst)
	tcp := &layers.TCP{SrcPort: layers.TCPPort(sp), DstPort: layers.TCPPort(dp), Seq: g.seq, Ack: g.ackn,
		SYN: g.syn, ACK: g.ack, FIN: g.fin, Window: 65535}
	if !g.noTS {
		tcp.Options = append(tcp.Options, layers.TCPOption{OptionType: 8, OptionLength: 10, OptionData: cat(be32(g.tsval), be32(g.tsecr))})
	}
	for _, o := range g.opts {
		tcp.Options = append(tcp.Options, layers.TCPOption{OptionType: layers.TCPOptionKind(o[0]), OptionLength: o[1], OptionData: o[2:]})
	}
	s.write(sip, dip, tcp, make([]byte, g.payload))
}

func (s *synth) udp(src, dst string, payload []byte) {
	sip, sp := splitHP(s.tb, src)
	dip, dp := splitHP(s.tb, dst)
	s.write(sip, dip, &layers.UDP{SrcPort: layers.UDPPort(sp), DstPort: layers.UDPPort(dp)}, payload)
}

func (s *synth) write(sip, dip net.IP, l4 gopacket.SerializableLayer, payload []byte) {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}}
	var nl gopacket.SerializableLayer
	var nlNet gopacket.NetworkLayer
	proto := layers.IPProtocolTCP
	if _, ok := l4.(*layers.UDP); ok {
		proto = layers.IPProtocolUDP
	}
	if v4 := sip.To4(); v4 != nil {
		eth.EthernetType = layers.EthernetTypeIPv4
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: proto, SrcIP: v4, DstIP: dip.To4()}
		nl, nlNet = ip, ip
	} else {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: proto, SrcIP: sip, DstIP: dip}
		nl, nlNet = ip, ip
	}
	switch x := l4.(type) {
	case *layers.TCP:
		x.SetNetworkLayerForChecksum(nlNet)
	case *layers.UDP:
		x.SetNetworkLayerForChecksum(nlNet)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, nl, l4, gopacket.Payload(payload)); err != nil {
		s.tb.Fatal(err)
	}
	b := buf.Bytes()
	if err := s.w.WritePacket(gopacket.CaptureInfo{Timestamp: s.t, CaptureLength: len(b), Length: len(b)}, b); err != nil {
		s.tb.Fatal(err)
	}
}
