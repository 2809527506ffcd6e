package rawprobe

import (
	"encoding/binary"
	"net/netip"
)

// Probe packets are built and read by hand (RFC 793 §3.1, RFC 792,
// RFC 4443 §4.1-4.2): a fixed 24-byte SYN and a 24-byte echo request need
// no serialization library, and building them allocates nothing (gopacket
// serialization was the survey's largest source of garbage).

// synLen is a SYN with one MSS option.
const synLen = 24

// TCP flags (byte 13 of the header).
const (
	tcpFIN = 1 << iota
	tcpSYN
	tcpRST
	tcpPSH
	tcpACK
)

// appendSYN appends a TCP SYN with an MSS option of 1460 and its checksum
// over the IPv4 or IPv6 pseudo-header (the kernel fills the IP header of a
// raw TCP socket but not the TCP checksum).
func appendSYN(b []byte, src, dst netip.Addr, sport, dport uint16, seq uint32) []byte {
	at := len(b)
	b = binary.BigEndian.AppendUint16(b, sport)
	b = binary.BigEndian.AppendUint16(b, dport)
	b = binary.BigEndian.AppendUint32(b, seq)
	b = binary.BigEndian.AppendUint32(b, 0)     // ack
	b = append(b, synLen/4<<4, tcpSYN)          // data offset, flags
	b = binary.BigEndian.AppendUint16(b, 64240) // window
	b = append(b, 0, 0, 0, 0)                   // checksum, urgent pointer
	b = append(b, 2, 4, 1460>>8, 1460&0xff)     // MSS
	sum := pseudoHeaderSum(src, dst, 6, synLen) + sum16(b[at:])
	binary.BigEndian.PutUint16(b[at+16:], ^fold(sum))
	return b
}

// tcpHeader is what the SYN prober needs of a reply.
type tcpHeader struct {
	sport, dport uint16
	ack          uint32
	flags        uint8
}

// parseTCP reads a TCP header; false when pkt is too short for one.
func parseTCP(pkt []byte) (tcpHeader, bool) {
	if len(pkt) < 20 || int(pkt[12]>>4)*4 < 20 {
		return tcpHeader{}, false
	}
	return tcpHeader{sport: binary.BigEndian.Uint16(pkt[0:]), dport: binary.BigEndian.Uint16(pkt[2:]),
		ack: binary.BigEndian.Uint32(pkt[8:]), flags: pkt[13]}, true
}

// ICMP echo types.
const (
	icmp4EchoReply   = 0
	icmp4Echo        = 8
	icmp6EchoRequest = 128
	icmp6EchoReply   = 129
	echoDataLen      = 16
)

// appendEcho appends an echo request with 16 bytes of data, token first
// and zeros. ICMPv4 carries its checksum; for ICMPv6 the kernel computes it
// (RFC 3542 §3.1).
func appendEcho(b []byte, v6 bool, id, seq uint16, token uint32) []byte {
	at := len(b)
	typ := byte(icmp4Echo)
	if v6 {
		typ = icmp6EchoRequest
	}
	b = append(b, typ, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, id)
	b = binary.BigEndian.AppendUint16(b, seq)
	b = binary.BigEndian.AppendUint32(b, token)
	b = append(b, make([]byte, echoDataLen-4)...)
	if !v6 {
		binary.BigEndian.PutUint16(b[at+2:], ^fold(sum16(b[at:])))
	}
	return b
}

// parseEchoReply reads an echo reply's identifier, sequence number and
// token (the first 4 bytes of data); false for anything else.
func parseEchoReply(pkt []byte, v6 bool) (id, seq uint16, token uint32, ok bool) {
	want := byte(icmp4EchoReply)
	if v6 {
		want = icmp6EchoReply
	}
	if len(pkt) < 12 || pkt[0] != want || pkt[1] != 0 {
		return 0, 0, 0, false
	}
	return binary.BigEndian.Uint16(pkt[4:]), binary.BigEndian.Uint16(pkt[6:]), binary.BigEndian.Uint32(pkt[8:]), true
}

// sum16 is the one's-complement sum of b as big-endian 16-bit words,
// unfolded (RFC 1071).
func sum16(b []byte) uint32 {
	var s uint32
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// pseudoHeaderSum sums the IPv4 (RFC 793) or IPv6 (RFC 8200 §8.1)
// pseudo-header of a transport segment.
func pseudoHeaderSum(src, dst netip.Addr, proto uint8, length int) uint32 {
	var s uint32
	if src.Is4() {
		a, b := src.As4(), dst.As4()
		s = sum16(a[:]) + sum16(b[:])
	} else {
		a, b := src.As16(), dst.As16()
		s = sum16(a[:]) + sum16(b[:])
	}
	return s + uint32(proto) + uint32(length)&0xffff + uint32(length)>>16
}
