package pcapanalysis

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Link types this package reads (tcpdump.org link-layer header types).
const (
	linkNull     = 0
	linkEthernet = 1
	linkRaw      = 101
	linkRawBSD   = 12
	linkLoop     = 108
	linkSLL      = 113
	linkIPv4     = 228
	linkIPv6     = 229
	linkSLL2     = 276
)

// SupportedLink says whether packets of this link type can be decoded.
func SupportedLink(lt int) bool {
	switch lt {
	case linkNull, linkEthernet, linkRaw, linkRawBSD, linkLoop, linkSLL, linkIPv4, linkIPv6, linkSLL2:
		return true
	}
	return false
}

// errMalformed marks a packet whose headers contradict themselves (as
// opposed to one cut short by the snapshot length, which is skipped).
var errMalformed = errors.New("malformed packet")

// Addr is an IPv4 (in the first 4 bytes, V6 false) or IPv6 address, a
// comparable value so endpoints key maps without allocating.
type Addr struct {
	B  [16]byte
	V6 bool
}

func (a Addr) String() string {
	if !a.V6 {
		return fmt.Sprintf("%d.%d.%d.%d", a.B[0], a.B[1], a.B[2], a.B[3])
	}
	return ipv6String(a.B[:])
}

// Endpoint is an address and port.
type Endpoint struct {
	Addr Addr
	Port uint16
}

func (e Endpoint) String() string {
	if e.Addr.V6 {
		return fmt.Sprintf("[%s]:%d", e.Addr, e.Port)
	}
	return fmt.Sprintf("%s:%d", e.Addr, e.Port)
}

// packet is one decoded packet; the analyser reuses one value per capture.
type packet struct {
	Src, Dst  Endpoint
	Proto     uint8 // 6 TCP, 17 UDP
	IfIndex   int   // SLL2's interface index or pcapng's interface, -1 unknown
	TCPFlags  uint8
	Seq, Ack  uint32
	Payload   int    // bytes after the transport header, from the IP length
	IPLen     int    // the IP packet's length (headers included)
	Data      []byte // captured payload bytes (UDP: for QUIC)
	HasTS     bool
	TSval     uint32
	TSecr     uint32
	MPTCP     [8][]byte // raw MPTCP options of this segment, each starting at kind
	NMPTCP    int
	snapShort bool // cut by the snapshot length before the transport header ended
}

const (
	flagFIN = 0x01
	flagSYN = 0x02
	flagRST = 0x04
	flagACK = 0x10
)

// decodeLink strips the link-layer header and returns the network protocol
// (4, 6, or 0 for anything else) and the network-layer bytes.
func decodeLink(lt int, b []byte, p *packet) (int, []byte, error) {
	var etype uint16
	switch lt {
	case linkEthernet:
		if len(b) < 14 {
			return 0, nil, fmt.Errorf("%w: Ethernet header needs 14 bytes, have %d", errMalformed, len(b))
		}
		etype, b = binary.BigEndian.Uint16(b[12:]), b[14:]
		for (etype == 0x8100 || etype == 0x88a8) && len(b) >= 4 {
			etype, b = binary.BigEndian.Uint16(b[2:]), b[4:]
		}
	case linkSLL:
		if len(b) < 16 {
			return 0, nil, fmt.Errorf("%w: Linux SLL header needs 16 bytes, have %d", errMalformed, len(b))
		}
		etype, b = binary.BigEndian.Uint16(b[14:]), b[16:]
	case linkSLL2:
		if len(b) < 20 {
			return 0, nil, fmt.Errorf("%w: Linux SLL2 header needs 20 bytes, have %d", errMalformed, len(b))
		}
		etype = binary.BigEndian.Uint16(b[0:])
		p.IfIndex = int(binary.BigEndian.Uint32(b[4:]))
		b = b[20:]
	case linkNull, linkLoop:
		if len(b) < 4 {
			return 0, nil, fmt.Errorf("%w: loopback header needs 4 bytes", errMalformed)
		}
		// The family is in the writer's byte order: 2 is AF_INET everywhere,
		// AF_INET6 is 10, 24, 28 or 30 depending on the OS.
		fam := binary.LittleEndian.Uint32(b)
		if fam > 0xffff {
			fam = binary.BigEndian.Uint32(b)
		}
		b = b[4:]
		switch fam {
		case 2:
			return 4, b, nil
		case 10, 24, 28, 30:
			return 6, b, nil
		}
		return 0, nil, nil
	case linkRaw, linkRawBSD, linkIPv4, linkIPv6:
		if len(b) == 0 {
			return 0, nil, fmt.Errorf("%w: empty raw IP packet", errMalformed)
		}
		return int(b[0] >> 4), b, nil
	default:
		return 0, nil, fmt.Errorf("link type %d not supported", lt)
	}
	switch etype {
	case 0x0800:
		return 4, b, nil
	case 0x86dd:
		return 6, b, nil
	}
	return 0, nil, nil
}

// decodeIP fills p from an IP packet. wire is the packet's length on the
// wire from this header on (captured bytes may be fewer). It returns false
// for packets the analysis ignores (other protocols, fragments).
func decodeIP(ver int, b []byte, wire int, p *packet) (bool, error) {
	var l4 []byte
	var l4wire int
	switch ver {
	case 4:
		if len(b) < 20 {
			p.snapShort = true
			return false, nil
		}
		if b[0]>>4 != 4 {
			return false, fmt.Errorf("%w: IPv4 version nibble is %d", errMalformed, b[0]>>4)
		}
		ihl := int(b[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(b[2:]))
		if total == 0 && wire >= ihl {
			total = wire // BIG TCP GSO packets on the sending host carry 0
		}
		if ihl < 20 || total < ihl {
			return false, fmt.Errorf("%w: IPv4 header length %d, total length %d", errMalformed, ihl, total)
		}
		if total > wire {
			return false, fmt.Errorf("%w: IPv4 total length %d exceeds the %d bytes on the wire", errMalformed, total, wire)
		}
		if frag := binary.BigEndian.Uint16(b[6:]); frag&0x3fff != 0 {
			return false, nil // fragments: not reassembled
		}
		p.Proto = b[9]
		p.Src.Addr = Addr{}
		p.Dst.Addr = Addr{}
		copy(p.Src.Addr.B[:4], b[12:16])
		copy(p.Dst.Addr.B[:4], b[16:20])
		if len(b) < ihl {
			p.snapShort = true
			return false, nil
		}
		l4, l4wire = b[ihl:min(len(b), total)], total-ihl
		p.IPLen = total
	case 6:
		if len(b) < 40 {
			p.snapShort = true
			return false, nil
		}
		plen := int(binary.BigEndian.Uint16(b[4:]))
		if 40+plen > wire {
			return false, fmt.Errorf("%w: IPv6 payload length %d exceeds the %d bytes on the wire", errMalformed, plen, wire-40)
		}
		p.Src.Addr = Addr{V6: true}
		p.Dst.Addr = Addr{V6: true}
		copy(p.Src.Addr.B[:], b[8:24])
		copy(p.Dst.Addr.B[:], b[24:40])
		nh := b[6]
		off := 40
		for {
			switch nh {
			case 0, 43, 60: // hop-by-hop, routing, destination options
				if len(b) < off+8 {
					p.snapShort = true
					return false, nil
				}
				nh, off = b[off], off+8+int(b[off+1])*8
				if off > 40+plen {
					return false, fmt.Errorf("%w: IPv6 extension headers run past the payload", errMalformed)
				}
				continue
			case 44:
				return false, nil // fragments: not reassembled
			}
			break
		}
		p.Proto = nh
		p.IPLen = 40 + plen
		l4, l4wire = b[min(off, len(b)):min(len(b), 40+plen)], 40+plen-off
	default:
		return false, fmt.Errorf("%w: IP version %d", errMalformed, ver)
	}
	switch p.Proto {
	case 6:
		return decodeTCP(l4, l4wire, p)
	case 17:
		if len(l4) < 8 {
			p.snapShort = true
			return false, nil
		}
		p.Src.Port = binary.BigEndian.Uint16(l4)
		p.Dst.Port = binary.BigEndian.Uint16(l4[2:])
		p.Payload = l4wire - 8
		p.Data = l4[8:]
		return true, nil
	}
	return false, nil
}

func decodeTCP(b []byte, wire int, p *packet) (bool, error) {
	if len(b) < 20 {
		p.snapShort = true
		return false, nil
	}
	p.Src.Port = binary.BigEndian.Uint16(b)
	p.Dst.Port = binary.BigEndian.Uint16(b[2:])
	p.Seq = binary.BigEndian.Uint32(b[4:])
	p.Ack = binary.BigEndian.Uint32(b[8:])
	off := int(b[12]>>4) * 4
	p.TCPFlags = b[13]
	if off < 20 || off > wire {
		return false, fmt.Errorf("%w: TCP data offset %d with %d bytes of segment", errMalformed, off, wire)
	}
	if len(b) < off {
		p.snapShort = true
		return false, nil
	}
	p.Payload = wire - off
	p.Data = nil
	opts := b[20:off]
	for len(opts) > 0 {
		kind := opts[0]
		if kind == 0 {
			break
		}
		if kind == 1 {
			opts = opts[1:]
			continue
		}
		if len(opts) < 2 || int(opts[1]) < 2 || int(opts[1]) > len(opts) {
			return false, fmt.Errorf("%w: TCP option kind %d runs past the header", errMalformed, kind)
		}
		o := opts[:opts[1]]
		switch kind {
		case 8:
			if len(o) == 10 {
				p.HasTS = true
				p.TSval = binary.BigEndian.Uint32(o[2:])
				p.TSecr = binary.BigEndian.Uint32(o[6:])
			}
		case tcpOptMPTCP:
			if p.NMPTCP < len(p.MPTCP) {
				p.MPTCP[p.NMPTCP] = o
				p.NMPTCP++
			}
		}
		opts = opts[len(o):]
	}
	return true, nil
}

func ipv6String(b []byte) string {
	// Longest run of zero groups becomes "::" (RFC 5952).
	var g [8]uint16
	for i := range g {
		g[i] = binary.BigEndian.Uint16(b[2*i:])
	}
	bs, bl := -1, 0
	for i := 0; i < 8; {
		if g[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && g[j] == 0 {
			j++
		}
		if j-i > bl && j-i > 1 {
			bs, bl = i, j-i
		}
		i = j
	}
	s := ""
	for i := 0; i < 8; i++ {
		if i == bs {
			s += "::"
			i += bl - 1
			continue
		}
		if s != "" && s[len(s)-1] != ':' {
			s += ":"
		}
		s += fmt.Sprintf("%x", g[i])
	}
	return s
}
