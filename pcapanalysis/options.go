package pcapanalysis

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MPTCP option subtypes (RFC 8684 §7, IANA "MPTCP Option Subtypes").
const (
	SubCapable   = 0x0
	SubJoin      = 0x1
	SubDSS       = 0x2
	SubAddAddr   = 0x3
	SubRemove    = 0x4
	SubPrio      = 0x5
	SubFail      = 0x6
	SubFastclose = 0x7
	SubTCPRST    = 0x8
)

// tcpOptMPTCP is the TCP option kind of every MPTCP option (RFC 8684 §3).
const tcpOptMPTCP = 30

// ErrOption is wrapped by every option decoding error.
var ErrOption = errors.New("malformed MPTCP option")

// Capable is MP_CAPABLE (RFC 8684 §3.1). Which keys are present depends on the
// length: 4 (v1 SYN, no key), 12 (SYN-ACK, or a v0 SYN: the sender's key),
// 20 (third ACK: both keys), 22/24 (first data: both keys, data-level length
// and, with 24, the DSS checksum).
type Capable struct {
	Version       uint8
	Flags         uint8 // A B C D E F G H; A = checksum required, H = HMAC-SHA256
	SenderKey     uint64
	ReceiverKey   uint64
	HasSenderKey  bool
	HasReceiverKy bool
	DataLen       uint16 // with 22/24 bytes
	HasDataLen    bool
	Checksum      uint16
	HasChecksum   bool
}

// Join is MP_JOIN (RFC 8684 §3.2) in its three forms: SYN (12 bytes: token,
// random), SYN-ACK (16: truncated HMAC, random), ACK (24: full HMAC).
type Join struct {
	Form      uint8 // JoinSYN, JoinSYNACK, JoinACK
	Backup    bool
	AddrID    uint8
	Token     uint32 // SYN: the receiver's token
	Random    uint32 // SYN, SYN-ACK
	TruncHMAC uint64 // SYN-ACK
	HMAC      [20]byte
}

// MP_JOIN forms.
const (
	JoinSYN    = 1
	JoinSYNACK = 2
	JoinACK    = 3
)

// DSS is the Data Sequence Signal (RFC 8684 §3.3): an optional data ACK (4 or
// 8 bytes), an optional mapping (DSN 4 or 8 bytes, subflow sequence number
// relative to the subflow's ISN, data-level length, optional checksum), and
// DATA_FIN.
type DSS struct {
	HasAck      bool
	Ack64       bool
	DataAck     uint64
	HasMap      bool
	DSN64       bool
	DSN         uint64
	SSN         uint32
	DataLen     uint16
	HasChecksum bool
	Checksum    uint16
	DataFin     bool
}

// AddAddr is ADD_ADDR (RFC 8684 §3.4.1); the address family and the presence
// of port and HMAC follow from the length (8/10/16/18 for IPv4, 20/22/28/30
// for IPv6).
type AddAddr struct {
	Echo    bool
	AddrID  uint8
	Addr    []byte // 4 or 16 bytes
	Port    uint16
	HasPort bool
	HMAC    uint64
	HasHMAC bool
}

// Option is one decoded MPTCP option; exactly one pointer field is set, or
// Subtype is unknown and Raw holds the bytes.
type Option struct {
	Subtype   uint8
	Capable   *Capable
	Join      *Join
	DSS       *DSS
	AddAddr   *AddAddr
	RemoveIDs []byte // REMOVE_ADDR (§3.4.2)
	Backup    bool   // MP_PRIO (§3.3.8)
	PrioAddr  int    // MP_PRIO v0 address ID, -1 if absent
	FailDSN   uint64 // MP_FAIL (§3.7)
	Key       uint64 // MP_FASTCLOSE receiver's key (§3.5)
	RSTFlags  uint8  // MP_TCPRST U V W T (§3.6)
	RSTReason uint8
}

func optErr(sub uint8, n int, why string) error {
	return fmt.Errorf("%w: subtype %d, length %d: %s", ErrOption, sub, n, why)
}

// dssNumber reads the DSS number at b[p:], 8 octets when long, else 4
// (RFC 8684 §3.3: the Data ACK and the DSN each have both sizes), and
// returns it with the offset after it.
func dssNumber(b []byte, p int, long bool) (uint64, int) {
	if long {
		return binary.BigEndian.Uint64(b[p:]), p + 8
	}
	return uint64(binary.BigEndian.Uint32(b[p:])), p + 4
}

// ParseOption decodes the body of one TCP option of kind 30: b starts at the
// kind byte and is exactly the option's length long. syn says whether the
// segment carries SYN, ack whether it carries ACK (MP_JOIN's form depends on
// them as well as on the length).
func ParseOption(b []byte, syn, ack bool) (Option, error) {
	var o Option
	n := len(b)
	if n < 3 {
		return o, optErr(0, n, "shorter than 3 bytes")
	}
	if b[0] != tcpOptMPTCP || int(b[1]) != n {
		return o, optErr(0, n, "kind or length byte does not match")
	}
	o.Subtype = b[2] >> 4
	low := b[2] & 0x0f
	switch o.Subtype {
	case SubCapable:
		if n < 4 {
			return o, optErr(o.Subtype, n, "want 4, 12, 20, 22 or 24 bytes")
		}
		c := &Capable{Version: low, Flags: b[3]}
		switch n {
		case 4:
		case 12:
			c.SenderKey, c.HasSenderKey = binary.BigEndian.Uint64(b[4:]), true
		case 20, 22, 24:
			c.SenderKey, c.HasSenderKey = binary.BigEndian.Uint64(b[4:]), true
			c.ReceiverKey, c.HasReceiverKy = binary.BigEndian.Uint64(b[12:]), true
			if n >= 22 {
				c.DataLen, c.HasDataLen = binary.BigEndian.Uint16(b[20:]), true
			}
			if n == 24 {
				c.Checksum, c.HasChecksum = binary.BigEndian.Uint16(b[22:]), true
			}
		default:
			return o, optErr(o.Subtype, n, "want 4, 12, 20, 22 or 24 bytes")
		}
		o.Capable = c
	case SubJoin:
		j := &Join{Backup: low&1 != 0}
		switch {
		case n == 12 && syn && !ack:
			j.Form, j.AddrID = JoinSYN, b[3]
			j.Token = binary.BigEndian.Uint32(b[4:])
			j.Random = binary.BigEndian.Uint32(b[8:])
		case n == 16 && syn && ack:
			j.Form, j.AddrID = JoinSYNACK, b[3]
			j.TruncHMAC = binary.BigEndian.Uint64(b[4:])
			j.Random = binary.BigEndian.Uint32(b[12:])
		case n == 24 && !syn:
			j.Form = JoinACK
			copy(j.HMAC[:], b[4:24])
		default:
			return o, optErr(o.Subtype, n, fmt.Sprintf("no MP_JOIN form of this length with syn=%v ack=%v", syn, ack))
		}
		o.Join = j
	case SubDSS:
		if n < 4 {
			return o, optErr(o.Subtype, n, "no flags byte")
		}
		f := b[3]
		d := &DSS{HasAck: f&0x01 != 0, Ack64: f&0x02 != 0, HasMap: f&0x04 != 0, DSN64: f&0x08 != 0, DataFin: f&0x10 != 0}
		want := 4
		if d.HasAck {
			want += 4
			if d.Ack64 {
				want += 4
			}
		}
		if d.HasMap {
			want += 4 + 4 + 2
			if d.DSN64 {
				want += 4
			}
		}
		switch {
		case n == want:
		case d.HasMap && n == want+2:
			d.HasChecksum = true
		default:
			return o, optErr(o.Subtype, n, fmt.Sprintf("flags 0x%02x want %d bytes", f, want))
		}
		p := 4
		if d.HasAck {
			d.DataAck, p = dssNumber(b, p, d.Ack64)
		}
		if d.HasMap {
			d.DSN, p = dssNumber(b, p, d.DSN64)
			d.SSN = binary.BigEndian.Uint32(b[p:])
			d.DataLen = binary.BigEndian.Uint16(b[p+4:])
			p += 6
			if d.HasChecksum {
				d.Checksum = binary.BigEndian.Uint16(b[p:])
			}
		}
		o.DSS = d
	case SubAddAddr:
		if n < 4 {
			return o, optErr(o.Subtype, n, "no address ID")
		}
		a := &AddAddr{Echo: low&1 != 0, AddrID: b[3]}
		var alen int
		switch n {
		case 8, 10, 16, 18:
			alen = 4
		case 20, 22, 28, 30:
			alen = 16
		default:
			return o, optErr(o.Subtype, n, "want 8/10/16/18 (IPv4) or 20/22/28/30 (IPv6) bytes")
		}
		a.Addr = append([]byte(nil), b[4:4+alen]...)
		rest := n - 4 - alen
		p := 4 + alen
		if rest == 2 || rest == 10 {
			a.Port, a.HasPort = binary.BigEndian.Uint16(b[p:]), true
			p += 2
			rest -= 2
		}
		if rest == 8 {
			a.HMAC, a.HasHMAC = binary.BigEndian.Uint64(b[p:]), true
		}
		o.AddAddr = a
	case SubRemove:
		if n < 4 {
			return o, optErr(o.Subtype, n, "no address ID")
		}
		o.RemoveIDs = append([]byte(nil), b[3:]...)
	case SubPrio:
		o.Backup, o.PrioAddr = low&1 != 0, -1
		switch n {
		case 3:
		case 4:
			o.PrioAddr = int(b[3])
		default:
			return o, optErr(o.Subtype, n, "want 3 or 4 bytes")
		}
	case SubFail:
		if n != 12 {
			return o, optErr(o.Subtype, n, "want 12 bytes")
		}
		o.FailDSN = binary.BigEndian.Uint64(b[4:])
	case SubFastclose:
		if n != 12 {
			return o, optErr(o.Subtype, n, "want 12 bytes")
		}
		o.Key = binary.BigEndian.Uint64(b[4:])
	case SubTCPRST:
		if n != 4 {
			return o, optErr(o.Subtype, n, "want 4 bytes")
		}
		o.RSTFlags, o.RSTReason = low, b[3]
	}
	return o, nil
}
