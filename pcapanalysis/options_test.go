package pcapanalysis

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type optCase struct {
	name     string
	b        []byte
	syn, ack bool
	check    func(t *testing.T, o Option)
}

func optCases() []optCase {
	v4 := []byte{198, 18, 0, 7}
	v6 := bytes.Repeat([]byte{0xfd}, 16)
	return []optCase{
		{"capable syn v1", capSYN(), true, false, func(t *testing.T, o Option) {
			assert.Equal(t, uint8(1), o.Capable.Version)
			assert.False(t, o.Capable.HasSenderKey)
		}},
		{"capable synack", capSYNACK(keyS), true, true, func(t *testing.T, o Option) { assert.Equal(t, keyS, o.Capable.SenderKey) }},
		{"capable ack", capACK(keyC, keyS), false, true, func(t *testing.T, o Option) {
			assert.Equal(t, keyC, o.Capable.SenderKey)
			assert.Equal(t, keyS, o.Capable.ReceiverKey)
		}},
		{"capable ack data", mpOpt(SubCapable, 1, cat([]byte{0x81}, be64(keyC), be64(keyS), be16(777))...), false, true, func(t *testing.T, o Option) {
			assert.Equal(t, uint16(777), o.Capable.DataLen)
			assert.False(t, o.Capable.HasChecksum)
		}},
		{"capable ack data csum", mpOpt(SubCapable, 1, cat([]byte{0x81 | 0x80}, be64(keyC), be64(keyS), be16(777), be16(0x1234))...), false, true, func(t *testing.T, o Option) {
			assert.Equal(t, uint16(0x1234), o.Capable.Checksum)
		}},
		{"join syn", joinSYN(0xdeadbeef, true), true, false, func(t *testing.T, o Option) {
			assert.Equal(t, JoinSYN, int(o.Join.Form))
			assert.Equal(t, uint32(0xdeadbeef), o.Join.Token)
			assert.True(t, o.Join.Backup)
			assert.Equal(t, uint8(2), o.Join.AddrID)
		}},
		{"join synack", joinSYNACK(), true, true, func(t *testing.T, o Option) {
			assert.Equal(t, uint64(0xabcdef), o.Join.TruncHMAC)
			assert.Equal(t, uint32(7), o.Join.Random)
		}},
		{"join ack", joinACK(), false, true, func(t *testing.T, o Option) { assert.Equal(t, JoinACK, int(o.Join.Form)) }},
		{"dss ack4 map8", dss8(9, 1<<40, 5, 1400), false, true, func(t *testing.T, o Option) {
			d := o.DSS
			assert.Equal(t, uint64(9), d.DataAck)
			assert.Equal(t, uint64(1<<40), d.DSN)
			assert.Equal(t, uint32(5), d.SSN)
			assert.Equal(t, uint16(1400), d.DataLen)
		}},
		{"dss map4 csum", dss4(77, 1, 10), false, true, func(t *testing.T, o Option) {
			assert.True(t, o.DSS.HasChecksum)
			assert.Equal(t, uint64(77), o.DSS.DSN)
		}},
		{"dss ack8 fin", mpOpt(SubDSS, 0, cat([]byte{0x01 | 0x02 | 0x10}, be64(1<<50))...), false, true, func(t *testing.T, o Option) {
			assert.Equal(t, uint64(1<<50), o.DSS.DataAck)
			assert.True(t, o.DSS.DataFin)
			assert.False(t, o.DSS.HasMap)
		}},
		{"add_addr v4", mpOpt(SubAddAddr, 0, cat([]byte{3}, v4)...), false, true, func(t *testing.T, o Option) {
			assert.Equal(t, v4, o.AddAddr.Addr)
			assert.False(t, o.AddAddr.HasPort)
		}},
		{"add_addr v4 port hmac", mpOpt(SubAddAddr, 0, cat([]byte{3}, v4, be16(8443), be64(5))...), false, true, func(t *testing.T, o Option) {
			assert.Equal(t, uint16(8443), o.AddAddr.Port)
			assert.Equal(t, uint64(5), o.AddAddr.HMAC)
		}},
		{"add_addr v4 hmac", mpOpt(SubAddAddr, 0, cat([]byte{3}, v4, be64(5))...), false, true, func(t *testing.T, o Option) {
			assert.True(t, o.AddAddr.HasHMAC)
			assert.False(t, o.AddAddr.HasPort)
		}},
		{"add_addr v6 port echo", mpOpt(SubAddAddr, 1, cat([]byte{4}, v6, be16(443))...), false, true, func(t *testing.T, o Option) {
			assert.Equal(t, v6, o.AddAddr.Addr)
			assert.True(t, o.AddAddr.Echo)
			assert.Equal(t, uint16(443), o.AddAddr.Port)
		}},
		{"add_addr v6 port hmac", mpOpt(SubAddAddr, 0, cat([]byte{4}, v6, be16(443), be64(1))...), false, true, func(t *testing.T, o Option) {
			assert.True(t, o.AddAddr.HasHMAC)
		}},
		{"remove_addr", mpOpt(SubRemove, 0, 3, 4), false, true, func(t *testing.T, o Option) { assert.Equal(t, []byte{3, 4}, o.RemoveIDs) }},
		{"mp_prio", mpOpt(SubPrio, 1), false, true, func(t *testing.T, o Option) { assert.True(t, o.Backup) }},
		{"mp_fail", mpOpt(SubFail, 0, cat([]byte{0}, be64(42))...), false, true, func(t *testing.T, o Option) { assert.Equal(t, uint64(42), o.FailDSN) }},
		{"mp_fastclose", mpOpt(SubFastclose, 0, cat([]byte{0}, be64(keyS))...), false, true, func(t *testing.T, o Option) { assert.Equal(t, keyS, o.Key) }},
		{"mp_tcprst", mpOpt(SubTCPRST, 0x9, 3), false, true, func(t *testing.T, o Option) {
			assert.Equal(t, uint8(9), o.RSTFlags)
			assert.Equal(t, uint8(3), o.RSTReason)
		}},
	}
}

func TestParseOption(t *testing.T) {
	for _, c := range optCases() {
		t.Run(c.name, func(t *testing.T) {
			o, err := ParseOption(c.b, c.syn, c.ack)
			require.NoError(t, err)
			c.check(t, o)
			// Every shorter prefix with a matching length byte is either a
			// different valid form or an ErrOption, never a panic.
			for n := 0; n < len(c.b); n++ {
				b := append([]byte(nil), c.b[:n]...)
				if n >= 2 {
					b[1] = byte(n)
				}
				if _, err := ParseOption(b, c.syn, c.ack); err != nil {
					assert.ErrorIs(t, err, ErrOption)
				}
			}
		})
	}
	for _, b := range [][]byte{mpOpt(SubDSS, 0, 0x04, 1, 2), mpOpt(SubCapable, 1, 0x81, 1, 2, 3), mpOpt(SubJoin, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9), mpOpt(SubFail, 0, 1)} {
		_, err := ParseOption(b, false, true)
		assert.ErrorIs(t, err, ErrOption, "% x", b)
	}
}

func TestExpandDSN(t *testing.T) {
	assert.Equal(t, uint64(0x1_0000_0005), expand(5, false, 0xffff_fff0))
	assert.Equal(t, uint64(0xffff_fff0), expand(0xffff_fff0, false, 0x1_0000_0005))
	assert.Equal(t, uint64(0x7_1234_0000), expand(0x1234_0000, false, 0x7_1233_0000))
	assert.Equal(t, uint64(12), expand(12, false, 3))
}

func FuzzParseOption(f *testing.F) {
	for _, c := range optCases() {
		f.Add(c.b, c.syn, c.ack)
	}
	f.Fuzz(func(t *testing.T, b []byte, syn, ack bool) {
		if len(b) >= 2 {
			b[0], b[1] = tcpOptMPTCP, byte(len(b))
		}
		o, err := ParseOption(b, syn, ack)
		if err != nil {
			if !errors.Is(err, ErrOption) {
				t.Fatalf("error not ErrOption: %v", err)
			}
			return
		}
		if o.DSS != nil && o.DSS.HasMap && !o.DSS.DSN64 && o.DSS.DSN > 0xffffffff {
			t.Fatal("4-byte DSN wider than 32 bits")
		}
	})
}

func FuzzAnalyze(f *testing.F) {
	good := scenario(f)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(good[:30])
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Analyze(context.Background(), bytes.NewReader(b), Options{})
		if err != nil {
			if !errors.Is(err, ErrInput) {
				t.Fatalf("error not ErrInput: %v", err)
			}
			return
		}
		for _, c := range r.Connections {
			for _, s := range c.Subflows {
				for _, d := range s.Dir {
					if d.Payload < 0 || d.Data < 0 || d.Reinjected < 0 || d.Retransmitted < 0 {
						t.Fatalf("negative byte count %+v", d)
					}
				}
			}
		}
	})
}
