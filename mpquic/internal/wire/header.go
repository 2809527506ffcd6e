package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Version1 is QUIC version 1 (RFC 9000 §15).
const Version1 uint32 = 0x00000001

// Version2 is QUIC version 2 (RFC 9369 §3.1): version 1 with other
// salts, labels and long-header type bits.
const Version2 uint32 = 0x6b3343cf

// longTypeBits maps a long header's type bits to the packet type:
// version 1's order (RFC 9000 §17.2), and version 2's, rotated by one
// (RFC 9369 §3.2: Initial 0b01, 0-RTT 0b10, Handshake 0b11, Retry 0b00).
func longTypeBits(version uint32, bits byte) PacketType {
	if version == Version2 {
		return PacketType((bits + 3) & 3)
	}
	return PacketType(bits)
}

func typeLongBits(version uint32, t PacketType) byte {
	if version == Version2 {
		return (byte(t) + 1) & 3
	}
	return byte(t)
}

// MaxConnIDLen is the longest connection ID version 1 allows (RFC 9000 §17.2).
const MaxConnIDLen = 20

// PacketType names the packet kinds of RFC 9000 §17.
type PacketType uint8

const (
	PacketInitial PacketType = iota
	Packet0RTT
	PacketHandshake
	PacketRetry
	Packet1RTT
	PacketVersionNegotiation
)

var packetTypeNames = [...]string{"Initial", "0-RTT", "Handshake", "Retry", "1-RTT", "VersionNegotiation"}

func (t PacketType) String() string {
	if int(t) < len(packetTypeNames) {
		return packetTypeNames[t]
	}
	return fmt.Sprintf("PacketType(%d)", uint8(t))
}

// ErrInvalidPacket marks a packet that must be dropped (RFC 9000 §5.2: an
// unparseable packet is discarded, not answered with an error).
var ErrInvalidPacket = errors.New("invalid QUIC packet")

// ErrUnsupportedVersion is returned with the header of a long-header packet
// of a version other than 1; a server answers it with Version Negotiation.
var ErrUnsupportedVersion = errors.New("unsupported QUIC version")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidPacket, fmt.Sprintf(format, args...))
}

// Header is a parsed packet header, still under header protection: the
// reserved bits, key phase and packet number are read by Unprotect. Slices
// alias the parsed buffer.
type Header struct {
	Type    PacketType
	Version uint32 // long headers only
	DCID    []byte
	SCID    []byte // long headers only
	Token   []byte // Initial: the token; Retry: the retry token
	// Length is the long header's Length field: packet number plus
	// protected payload (Initial, 0-RTT, Handshake).
	Length uint64
	// PNOffset is where the packet number starts (protected packets).
	PNOffset int
	// RetryIntegrityTag is a Retry packet's last 16 bytes.
	RetryIntegrityTag []byte
	// SupportedVersions is a Version Negotiation packet's list.
	SupportedVersions []uint32
}

// ParseHeader parses the packet at the front of b. A short header carries no
// connection ID length, so the caller says how long its own IDs are
// (shortDCIDLen). n is the length of this packet within b: for long headers
// with a Length field the rest of b may hold coalesced packets (RFC 9000 §12.2).
func ParseHeader(b []byte, shortDCIDLen int) (h Header, n int, err error) {
	if len(b) == 0 {
		return h, 0, invalid("empty datagram")
	}
	if b[0]&0x80 == 0 {
		return parseShort(b, shortDCIDLen)
	}
	if len(b) < 7 {
		return h, 0, invalid("long header of %d bytes", len(b))
	}
	h.Version = binary.BigEndian.Uint32(b[1:5])
	r := reader{b: b[5:]}
	// Connection ID lengths are checked against version 1's limit only for
	// version 1: the invariants (RFC 8999 §5.1) allow up to 255 bytes.
	dcidLen := r.byte()
	h.DCID = r.bytes(uint64(dcidLen))
	scidLen := r.byte()
	h.SCID = r.bytes(uint64(scidLen))
	if r.err != nil {
		return h, 0, invalid("long header connection IDs truncated")
	}
	if h.Version == 0 {
		h.Type = PacketVersionNegotiation
		if len(r.b) == 0 || len(r.b)%4 != 0 {
			return h, 0, invalid("version negotiation list of %d bytes", len(r.b))
		}
		for i := 0; i < len(r.b); i += 4 {
			h.SupportedVersions = append(h.SupportedVersions, binary.BigEndian.Uint32(r.b[i:]))
		}
		return h, len(b), nil
	}
	if h.Version != Version1 && h.Version != Version2 {
		return h, len(b), fmt.Errorf("%w: 0x%08x", ErrUnsupportedVersion, h.Version)
	}
	if b[0]&0x40 == 0 {
		return h, 0, invalid("fixed bit is 0")
	}
	if dcidLen > MaxConnIDLen || scidLen > MaxConnIDLen {
		return h, 0, invalid("connection ID longer than %d bytes", MaxConnIDLen)
	}
	h.Type = longTypeBits(h.Version, (b[0]>>4)&3)
	switch h.Type {
	case PacketRetry:
		if len(r.b) < 16 {
			return h, 0, invalid("retry packet without integrity tag")
		}
		h.Token = r.b[: len(r.b)-16 : len(r.b)-16]
		h.RetryIntegrityTag = r.b[len(r.b)-16:]
		return h, len(b), nil
	case PacketInitial:
		h.Token = r.bytes(r.varint())
	}
	h.Length = r.varint()
	if r.err != nil {
		return h, 0, invalid("%s header truncated", h.Type)
	}
	h.PNOffset = len(b) - len(r.b)
	if h.Length > uint64(len(r.b)) {
		return h, 0, invalid("%s length %d beyond the %d bytes left", h.Type, h.Length, len(r.b))
	}
	// The packet number (1-4 bytes) is inside Length, and header
	// protection samples 16 bytes from PNOffset+4 (RFC 9001 §5.4.2).
	if h.Length < 4+16 {
		return h, 0, invalid("%s length %d too short to protect", h.Type, h.Length)
	}
	return h, h.PNOffset + int(h.Length), nil
}

func parseShort(b []byte, dcidLen int) (h Header, n int, err error) {
	if b[0]&0x40 == 0 {
		return h, 0, invalid("fixed bit is 0")
	}
	if dcidLen < 0 || dcidLen > MaxConnIDLen {
		return h, 0, invalid("connection ID length %d", dcidLen)
	}
	if len(b) < 1+dcidLen+4+16 {
		return h, 0, invalid("short header packet of %d bytes", len(b))
	}
	h.Type = Packet1RTT
	h.DCID = b[1 : 1+dcidLen : 1+dcidLen]
	h.PNOffset = 1 + dcidLen
	return h, len(b), nil
}

// Packet is one packet of a datagram: its header and its bytes.
type Packet struct {
	Header Header
	Data   []byte
}

// SplitDatagram splits a UDP datagram into its coalesced packets (RFC 9000
// §12.2). A packet that fails to parse ends the split: the packets before it
// are returned with the error, which the caller logs and drops.
func SplitDatagram(b []byte, shortDCIDLen int) ([]Packet, error) {
	var out []Packet
	for len(b) > 0 {
		h, n, err := ParseHeader(b, shortDCIDLen)
		if err != nil {
			return out, err
		}
		if len(out) > 0 && (h.Type == PacketRetry || h.Type == PacketVersionNegotiation) {
			return out, invalid("%s coalesced after another packet", h.Type)
		}
		out = append(out, Packet{Header: h, Data: b[:n:n]})
		b = b[n:]
	}
	return out, nil
}

// ParseVersionNegotiation returns the versions a Version Negotiation packet
// offers (RFC 9000 §17.2.1).
func ParseVersionNegotiation(b []byte) ([]uint32, error) {
	h, _, err := ParseHeader(b, 0)
	if err != nil {
		return nil, err
	}
	if h.Type != PacketVersionNegotiation {
		return nil, invalid("not a version negotiation packet")
	}
	return h.SupportedVersions, nil
}

// AppendVersionNegotiation builds a Version Negotiation packet answering a
// packet with the given connection IDs (swapped, RFC 9000 §17.2.1).
func AppendVersionNegotiation(b []byte, dcid, scid []byte, versions ...uint32) []byte {
	b = append(b, 0xc0, 0, 0, 0, 0, byte(len(dcid)))
	b = append(b, dcid...)
	b = append(b, byte(len(scid)))
	b = append(b, scid...)
	for _, v := range versions {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return b
}

// LongHeader is what a sender puts in an Initial, 0-RTT or Handshake header.
type LongHeader struct {
	Type       PacketType
	Version    uint32 // 0: Version1
	DCID, SCID []byte
	Token      []byte // Initial only
}

// AppendLongHeader appends an unprotected long header ending with the packet
// number, ready for Keys.Protect. payloadLen is the plaintext frames' length;
// the Length field also counts the packet number and the AEAD tag.
func AppendLongHeader(b []byte, h LongHeader, pn uint64, pnLen, payloadLen int) ([]byte, error) {
	if h.Type != PacketInitial && h.Type != Packet0RTT && h.Type != PacketHandshake {
		return b, fmt.Errorf("mpquic: cannot build a %s long header", h.Type)
	}
	if len(h.DCID) > MaxConnIDLen || len(h.SCID) > MaxConnIDLen {
		return b, fmt.Errorf("mpquic: connection ID longer than %d bytes", MaxConnIDLen)
	}
	if pnLen < 1 || pnLen > 4 {
		return b, fmt.Errorf("mpquic: packet number length %d", pnLen)
	}
	v := h.Version
	if v == 0 {
		v = Version1
	}
	b = append(b, 0xc0|typeLongBits(v, h.Type)<<4|byte(pnLen-1))
	b = binary.BigEndian.AppendUint32(b, v)
	b = append(b, byte(len(h.DCID)))
	b = append(b, h.DCID...)
	b = append(b, byte(len(h.SCID)))
	b = append(b, h.SCID...)
	if h.Type == PacketInitial {
		b = AppendVarint(b, uint64(len(h.Token)))
		b = append(b, h.Token...)
	}
	b = AppendVarint(b, uint64(pnLen+payloadLen+tagLen))
	return appendPacketNumber(b, pn, pnLen), nil
}

// ShortHeader is what a sender puts in a 1-RTT header.
type ShortHeader struct {
	DCID     []byte
	Spin     bool
	KeyPhase bool
}

// AppendShortHeader appends an unprotected 1-RTT header ending with the
// packet number (RFC 9000 §17.3.1).
func AppendShortHeader(b []byte, h ShortHeader, pn uint64, pnLen int) ([]byte, error) {
	if len(h.DCID) > MaxConnIDLen {
		return b, fmt.Errorf("mpquic: connection ID longer than %d bytes", MaxConnIDLen)
	}
	if pnLen < 1 || pnLen > 4 {
		return b, fmt.Errorf("mpquic: packet number length %d", pnLen)
	}
	first := 0x40 | byte(pnLen-1)
	if h.Spin {
		first |= 0x20
	}
	if h.KeyPhase {
		first |= 0x04
	}
	b = append(b, first)
	b = append(b, h.DCID...)
	return appendPacketNumber(b, pn, pnLen), nil
}

// tagLen is the AEAD tag every QUIC v1 packet carries (16 bytes for
// AES-128-GCM and ChaCha20-Poly1305, RFC 9001 §5.3), counted in the Length
// field.
const tagLen = 16

// Invalid is an ErrInvalidPacket naming what is wrong with the packet.
func Invalid(format string, args ...any) error { return invalid(format, args...) }
