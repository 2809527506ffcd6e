package mpquic

import (
	"net"
	"net/netip"
	"syscall"
	"unsafe"
)

// ECN on Linux: IP_RECVTOS / IPV6_RECVTCLASS deliver each datagram's TOS or
// traffic class byte as a control message (its two low bits are the ECN
// field, RFC 3168); IP_TOS / IPV6_TCLASS control messages on send set them
// per datagram, so one listener socket serves paths that mark and paths
// whose validation failed.

// enableECN asks for the received ECN field; false when the socket is not
// a UDP socket or refuses both options (then the path does not mark:
// counts it could not report would fail validation anyway).
func enableECN(pc net.PacketConn) bool {
	if _, ok := pc.(*net.UDPConn); !ok {
		return false // a wrapper: its writes cannot carry control messages
	}
	on := false
	return controlUDP(pc, func(fd int) {
		e4 := syscall.SetsockoptInt(fd, syscall.IPPROTO_IP, syscall.IP_RECVTOS, 1)
		e6 := syscall.SetsockoptInt(fd, syscall.IPPROTO_IPV6, syscall.IPV6_RECVTCLASS, 1)
		on = e4 == nil || e6 == nil
	}) && on
}

// appendECN appends the control message that sends with codepoint cp to
// to: IP_TOS toward an IPv4 address (also from an IPv6 socket, which
// sends a mapped address as IPv4 and reads only IPv4 options for it),
// IPV6_TCLASS otherwise. cp ecnNotECT appends nothing.
func appendECN(oob []byte, to net.Addr, cp byte) []byte {
	if cp == ecnNotECT {
		return oob
	}
	ua, ok := to.(*net.UDPAddr)
	if !ok {
		return oob
	}
	level, typ := syscall.IPPROTO_IPV6, syscall.IPV6_TCLASS
	if a, ok := netip.AddrFromSlice(ua.IP); ok && a.Unmap().Is4() {
		level, typ = syscall.IPPROTO_IP, syscall.IP_TOS
	}
	start := len(oob)
	oob = append(oob, make([]byte, syscall.CmsgSpace(4))...)
	h := (*syscall.Cmsghdr)(unsafe.Pointer(&oob[start]))
	h.Level, h.Type = int32(level), int32(typ)
	h.SetLen(syscall.CmsgLen(4))
	*(*int32)(unsafe.Pointer(&oob[start+syscall.CmsgLen(0)])) = int32(cp)
	return oob
}

// writeECN sends b to to with codepoint cp (a plain write when cp is
// ecnNotECT or pc cannot carry control messages).
func writeECN(pc net.PacketConn, b []byte, to net.Addr, cp byte, oob *[]byte) error {
	uc, ok := pc.(*net.UDPConn)
	ua, ok2 := to.(*net.UDPAddr)
	if cp == ecnNotECT || !ok || !ok2 {
		_, err := pc.WriteTo(b, to)
		return err
	}
	*oob = appendECN((*oob)[:0], to, cp)
	_, _, err := uc.WriteMsgUDP(b, *oob, ua)
	return err
}
