package mpquic

import (
	"encoding/binary"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rxControl is what a received datagram's control messages say.
type rxControl struct {
	dst netip.Addr // IP_PKTINFO / IPV6_PKTINFO: the local address it was sent to (pktinfo_linux.go)
	ecn byte       // IP_TOS / IPV6_TCLASS: its ECN codepoint (ecn_linux.go)
	seg int        // UDP_GRO: the segment size of a coalesced message, 0 if none (rxbatch_linux.go)
}

// parseControl reads oob's control messages in one pass, without
// allocating (it runs for every datagram a socket reads). A truncated or
// malformed message ends the walk with what was read before it.
func parseControl(oob []byte) rxControl {
	var c rxControl
	hdr := unix.CmsgSpace(0)
	for len(oob) >= hdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < hdr || l > len(oob) {
			break
		}
		data := oob[unix.CmsgLen(0):l]
		switch {
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_PKTINFO && len(data) >= 12:
			// struct in_pktinfo { int ifindex; in_addr spec_dst; in_addr addr; }: addr is the header's.
			c.dst = netip.AddrFrom4([4]byte(data[8:12]))
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_PKTINFO && len(data) >= 16:
			c.dst = netip.AddrFrom16([16]byte(data[:16])).Unmap()
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TOS && len(data) >= 1:
			c.ecn = data[0] & ecnMask
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_TCLASS && len(data) >= 4:
			// An int in host order; its low byte is the traffic class.
			c.ecn = byte(binary.NativeEndian.Uint32(data)) & ecnMask
		case h.Level == unix.IPPROTO_UDP && h.Type == unix.UDP_GRO && len(data) >= 4:
			c.seg = int(binary.NativeEndian.Uint32(data))
		}
		oob = oob[min(unix.CmsgSpace(l-unix.CmsgLen(0)), len(oob)):]
	}
	return c
}
