package mpquic

import (
	"net"
	"net/netip"
	"syscall"
	"unsafe"
)

// A server on a wildcard address must answer from the address the client
// sent to (RFC 9000 §9: a path is its 4-tuple); the kernel's default source
// is the route's, which on a host with several addresses is another one.
// IP_PKTINFO / IPV6_RECVPKTINFO give each datagram's destination and the
// same control messages on send set the source.

// enableDstInfo asks for each datagram's destination address; false when
// the socket is not a UDP socket or refuses both options.
func enableDstInfo(pc net.PacketConn) bool {
	on := false
	return controlUDP(pc, func(fd int) {
		e4 := syscall.SetsockoptInt(fd, syscall.IPPROTO_IP, syscall.IP_PKTINFO, 1)
		e6 := syscall.SetsockoptInt(fd, syscall.IPPROTO_IPV6, syscall.IPV6_RECVPKTINFO, 1)
		on = e4 == nil || e6 == nil
	}) && on
}

// readWithDst reads one datagram, the address it was sent to (invalid
// if the kernel gave none) and its ECN codepoint (ecn_linux.go).
func readWithDst(pc net.PacketConn, b, oob []byte) (int, net.Addr, netip.Addr, byte, error) {
	uc, ok := pc.(*net.UDPConn)
	if !ok || oob == nil {
		n, from, err := pc.ReadFrom(b)
		return n, from, netip.Addr{}, ecnNotECT, err
	}
	n, oobn, _, from, err := uc.ReadMsgUDP(b, oob)
	if err != nil {
		return n, nil, netip.Addr{}, ecnNotECT, err
	}
	c := parseControl(oob[:oobn])
	return n, from, c.dst, c.ecn, nil
}

// appendSrc appends the control message that sends from src.
func appendSrc(oob []byte, src netip.Addr) []byte {
	src = src.Unmap()
	level, typ, n := syscall.IPPROTO_IP, syscall.IP_PKTINFO, 12
	if src.Is6() {
		level, typ, n = syscall.IPPROTO_IPV6, syscall.IPV6_PKTINFO, 20
	}
	start := len(oob)
	oob = append(oob, make([]byte, syscall.CmsgSpace(n))...)
	h := (*syscall.Cmsghdr)(unsafe.Pointer(&oob[start]))
	h.Level, h.Type = int32(level), int32(typ)
	h.SetLen(syscall.CmsgLen(n))
	data := oob[start+syscall.CmsgLen(0):]
	if src.Is4() {
		a := src.As4()
		copy(data[4:8], a[:]) // spec_dst: the source address
	} else {
		a := src.As16()
		copy(data[:16], a[:])
	}
	return oob
}

// writeFrom sends b to to from the local address src, with ECN codepoint cp.
func writeFrom(pc net.PacketConn, b []byte, to net.Addr, src netip.Addr, cp byte, oob *[]byte) error {
	uc, ok := pc.(*net.UDPConn)
	ua, ok2 := to.(*net.UDPAddr)
	if !ok || !ok2 {
		_, err := pc.WriteTo(b, to)
		return err
	}
	*oob = appendECN(appendSrc((*oob)[:0], src), to, cp)
	_, _, err := uc.WriteMsgUDP(b, *oob, ua)
	return err
}
