package mpquic

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestParseControl: one pass reads what the kernel would hand a reader
// (an IPv4 in_pktinfo with the header's destination in ipi_addr; IPv6's
// and the TOS/TCLASS messages as the writers' own encoders make them; a
// UDP_GRO segment size), and a truncated buffer ends the walk without
// reading past it.
func TestParseControl(t *testing.T) {
	gro := func(seg uint32) []byte {
		b := make([]byte, unix.CmsgSpace(4))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		h.Level, h.Type = unix.IPPROTO_UDP, unix.UDP_GRO
		h.SetLen(unix.CmsgLen(4))
		binary.NativeEndian.PutUint32(b[unix.CmsgLen(0):], seg)
		return b
	}
	v4, v6 := netip.MustParseAddr("198.18.0.7"), netip.MustParseAddr("fd00::7")
	pktinfo4 := make([]byte, unix.CmsgSpace(12))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&pktinfo4[0]))
	h.Level, h.Type = unix.IPPROTO_IP, unix.IP_PKTINFO
	h.SetLen(unix.CmsgLen(12))
	a4 := v4.As4()
	copy(pktinfo4[unix.CmsgLen(0)+8:], a4[:]) // ipi_addr

	to4 := &net.UDPAddr{IP: net.IPv4(198, 18, 0, 1), Port: 443}
	to6 := &net.UDPAddr{IP: net.ParseIP("fd00::1"), Port: 443}
	for _, tc := range []struct {
		name string
		oob  []byte
		want rxControl
	}{
		{"v4", append(appendECN(pktinfo4, to4, ecnECT0), gro(1252)...), rxControl{dst: v4, ecn: ecnECT0, seg: 1252}},
		{"v6", appendECN(appendSrc(nil, v6), to6, ecnCE), rxControl{dst: v6, ecn: ecnCE}},
		{"none", nil, rxControl{}},
	} {
		if got := parseControl(tc.oob); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
		for n := range len(tc.oob) {
			parseControl(tc.oob[:n]) // truncated: no panic, no read past n
		}
	}
}
