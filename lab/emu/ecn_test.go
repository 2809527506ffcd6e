package emu

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"
)

// ipv4ChecksumOK verifies an IPv4 header's checksum.
func ipv4ChecksumOK(p []byte) bool {
	var sum uint32
	for i := 0; i < int(p[0]&0x0f)*4; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(p[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return sum == 0xffff
}

// TestECNBleachAndMark: a link that bleaches clears the ECN field of
// every ECN-capable packet (IPv4 with a valid checksum after, IPv6) and
// counts them; one that marks sets every Nth ECN-capable packet CE and
// counts it; Not-ECT packets pass untouched either way.
func TestECNBleachAndMark(t *testing.T) {
	src4, dst4 := netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("198.18.1.2")
	src6, dst6 := netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fd00:1::2")
	withECN := func(p []byte, cp byte) []byte {
		setECNField(p, cp)
		return p
	}
	for _, tc := range []struct {
		setting string
		want    []byte // codepoints delivered for ECT(0), Not-ECT, ECT(1), CE, ECT(0), ECT(0) sent
		bleach  uint64
		ce      uint64
	}{
		{"ecn=bleach", []byte{0, 0, 0, 0, 0, 0}, 5, 0},
		{"ecn=ce/2", []byte{2, 0, 3, 3, 2, 3}, 0, 2}, // a packet already CE is not counted
		{"ecn=off", []byte{2, 0, 1, 3, 2, 2}, 0, 0},
	} {
		for _, fam := range []struct{ src, dst netip.Addr }{{src4, dst4}, {src6, dst6}} {
			tl := startLink(t, 1)
			ch, err := ParseChange([]string{tc.setting})
			if err != nil {
				t.Fatal(err)
			}
			tl.Apply(ch)
			in, out := tl.devs(Up)
			for i, cp := range []byte{2, 0, 1, 3, 2, 2} {
				in.send(withECN(udpPacket(fam.src, fam.dst, 100, uint64(i)), cp))
			}
			got := collect(out, 6, 5*time.Second)
			if len(got) != 6 {
				t.Fatalf("%s %v: %d of 6 packets delivered", tc.setting, fam.src, len(got))
			}
			for i, f := range got {
				cp, _ := ecnField(f.b)
				if cp != tc.want[i] {
					t.Errorf("%s %v: packet %d delivered with %d, want %d", tc.setting, fam.src, i, cp, tc.want[i])
				}
				if fam.src.Is4() && !ipv4ChecksumOK(f.b) {
					t.Errorf("%s: packet %d: IPv4 header checksum wrong after the rewrite", tc.setting, i)
				}
			}
			st := tl.Stats().Up
			if st.ECNBleached != tc.bleach || st.ECNMarkedCE != tc.ce {
				t.Errorf("%s %v: counted %d bleached, %d marked CE; want %d, %d", tc.setting, fam.src, st.ECNBleached, st.ECNMarkedCE, tc.bleach, tc.ce)
			}
			tl.Close()
		}
	}
	for _, bad := range []string{"ecn=ce/0", "ecn=ce/x", "ecn=mark"} {
		if _, err := ParseChange([]string{bad}); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if ch, _ := ParseChange([]string{"down.ecn=ce/10"}); ch.String() != "down.ecn=ce/10" {
		t.Errorf("down.ecn=ce/10 renders as %q", ch.String())
	}
}
