package wire

import (
	"bytes"
	"errors"
	"testing"

	"github.com/mptester/mptester/mpquic/internal/hextest"
)

// RFC 9000 Appendix A.1 examples, plus the range edges.
func TestVarint(t *testing.T) {
	for _, c := range []struct {
		hex string
		v   uint64
		min bool // the minimal encoding, so AppendVarint reproduces it
	}{
		{"c2197c5eff14e88c", 151288809941952652, true},
		{"9d7f3e7d", 494878333, true},
		{"7bbd", 15293, true},
		{"25", 37, true},
		{"4025", 37, false},
		{"3f", 63, true}, {"4040", 64, true}, {"7fff", 16383, true}, {"80004000", 16384, true},
		{"bfffffff", 1<<30 - 1, true}, {"c000000040000000", 1 << 30, true},
		{"ffffffffffffffff", MaxVarint, true},
	} {
		b := hextest.Unhex(t, c.hex)
		v, n, err := ParseVarint(b)
		if err != nil || v != c.v || n != len(b) {
			t.Errorf("ParseVarint(%s) = %d, %d, %v; want %d", c.hex, v, n, err, c.v)
		}
		if c.min {
			if got := AppendVarint(nil, c.v); !bytes.Equal(got, b) || VarintLen(c.v) != len(b) {
				t.Errorf("AppendVarint(%d) = %x, want %s", c.v, got, c.hex)
			}
		}
		if _, _, err := ParseVarint(b[:len(b)-1]); err == nil {
			t.Errorf("ParseVarint(%s truncated) gave no error", c.hex)
		}
	}
}

// RFC 9000 Appendix A.2 and A.3 examples and the window edges.
func TestPacketNumbers(t *testing.T) {
	if n := PacketNumberLen(0xac5c02, 0xabe8b3); n != 2 {
		t.Errorf("A.2 first example: %d bytes, want 2", n)
	}
	if n := PacketNumberLen(0xace8fe, 0xabe8b3); n != 3 {
		t.Errorf("A.2 second example: %d bytes, want 3", n)
	}
	if n := PacketNumberLen(0, -1); n != 1 {
		t.Errorf("first packet: %d bytes", n)
	}
	if got := DecodePacketNumber(0xa82f30ea, 0x9b32, 16); got != 0xa82f9b32 {
		t.Errorf("A.3 example: %#x", got)
	}
	// Every encoding PacketNumberLen picks decodes back, for any largest
	// received between the largest acked and the packet.
	for _, c := range []struct{ full, acked uint64 }{
		{0, 0}, {1, 0}, {127, 0}, {128, 0}, {129, 0}, {255, 0}, {256, 0}, {1 << 20, 1<<20 - 30000},
		{1<<31 - 1, 0}, {MaxPacketNumber, MaxPacketNumber - 5}, {0xac5c02, 0xabe8b3},
	} {
		n := PacketNumberLen(c.full, int64(c.acked))
		trunc := c.full & (1<<(8*n) - 1)
		for _, largest := range []int64{int64(c.acked), int64(c.full) - 1} {
			if largest > int64(c.full)-1 || largest < int64(c.acked) {
				continue
			}
			if got := DecodePacketNumber(largest, trunc, 8*n); got != c.full && n < 4 {
				t.Errorf("full %d acked %d largest %d: %d bytes decode to %d", c.full, c.acked, largest, n, got)
			}
		}
	}
}

func TestVersionNegotiation(t *testing.T) {
	vn := AppendVersionNegotiation(nil, []byte{1, 2}, []byte{3, 4, 5}, Version1, 0x6b3343cf)
	vs, err := ParseVersionNegotiation(vn)
	if err != nil || len(vs) != 2 || vs[0] != Version1 || vs[1] != 0x6b3343cf {
		t.Fatalf("%v %v", vs, err)
	}
	if _, err := ParseVersionNegotiation(vn[:len(vn)-1]); !errors.Is(err, ErrInvalidPacket) {
		t.Fatalf("ragged version list: %v", err)
	}
	// A packet of an unknown version yields its header for the answer.
	unk := append([]byte{0xc0, 0x1a, 0x2a, 0x3a, 0x4a, 2, 7, 7, 1, 8}, make([]byte, 1200)...)
	h, _, err := ParseHeader(unk, 0)
	if !errors.Is(err, ErrUnsupportedVersion) || h.Version != 0x1a2a3a4a || !bytes.Equal(h.SCID, []byte{8}) {
		t.Fatalf("unknown version: %+v %v", h, err)
	}
}

func TestParseHeaderRejects(t *testing.T) {
	good, _ := AppendLongHeader(nil, LongHeader{Type: PacketHandshake, DCID: []byte{1}, SCID: []byte{2}}, 0, 4, 16)
	good = append(good, make([]byte, 16+16)...)
	if _, n, err := ParseHeader(good, 0); err != nil || n != len(good) {
		t.Fatalf("good header: %d %v", n, err)
	}
	long21 := append([]byte{0xc0, 0, 0, 0, 1, 21}, make([]byte, 60)...)
	retry := append([]byte{0xf0, 0, 0, 0, 1, 0, 0}, []byte("token")...)
	for name, b := range map[string][]byte{
		"empty":             {},
		"fixed bit 0":       {0x80, 0, 0, 0, 1, 0, 0, 0},
		"short fixed bit 0": append([]byte{0x00}, make([]byte, 40)...),
		"cid 21":            long21,
		"length beyond":     good[:len(good)-1],
		"short too small":   {0x40, 1, 2, 3},
		"retry without tag": retry,
		"truncated long":    {0xc0, 0, 0},
	} {
		if _, _, err := ParseHeader(b, 8); !errors.Is(err, ErrInvalidPacket) {
			t.Errorf("%s: err %v, want ErrInvalidPacket", name, err)
		}
	}
	// A Retry: token then 16-byte tag.
	retry = append(retry, make([]byte, 16)...)
	if h, _, err := ParseHeader(retry, 0); err != nil || h.Type != PacketRetry || string(h.Token) != "token" {
		t.Errorf("retry: %+v %v", h, err)
	}
}
