package mpquic

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"unsafe"
)

// udpSegment is the UDP_SEGMENT socket option and control message
// (linux/udp.h): the kernel cuts the buffer into datagrams of that size.
const udpSegment = 103

func gsoCapable(pc net.PacketConn) bool {
	var serr error
	return controlUDP(pc, func(fd int) {
		_, serr = syscall.GetsockoptInt(fd, syscall.IPPROTO_UDP, udpSegment)
	}) && serr == nil
}

// controlUDP runs f on pc's descriptor; false if pc has none (a wrapper
// that embeds a *net.UDPConn has its socket).
func controlUDP(pc net.PacketConn, f func(fd int)) bool {
	uc, ok := pc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return false
	}
	return rc.Control(func(fd uintptr) { f(int(fd)) }) == nil
}

func writeGSO(pc net.PacketConn, b []byte, seg int, to net.Addr, src netip.Addr, cp byte, oob *[]byte) error {
	uc, ok := pc.(*net.UDPConn)
	ua, ok2 := to.(*net.UDPAddr)
	if !ok || !ok2 {
		return errors.ErrUnsupported
	}
	o := append((*oob)[:0], make([]byte, syscall.CmsgSpace(2))...)
	h := (*syscall.Cmsghdr)(unsafe.Pointer(&o[0]))
	h.Level = syscall.IPPROTO_UDP
	h.Type = udpSegment
	h.SetLen(syscall.CmsgLen(2))
	binary.NativeEndian.PutUint16(o[syscall.CmsgLen(0):], uint16(seg))
	if src.IsValid() {
		o = appendSrc(o, src)
	}
	o = appendECN(o, to, cp)
	*oob = o
	_, _, err := uc.WriteMsgUDP(b, o, ua)
	return err
}

// gsoTransient errors do not mean the socket lacks GSO.
func gsoTransient(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, net.ErrClosed)
}

// setDontFragment makes the kernel set DF and never fragment pc's
// datagrams, without using its cached path MTU either (PMTUDISC_PROBE):
// a PMTU probe must be dropped when too large, not fragmented. True if
// set for the socket's family.
func setDontFragment(pc net.PacketConn) bool {
	const ipPMTUDiscProbe, ipv6PMTUDiscProbe = 3, 3 // linux/in.h, linux/in6.h
	var e4, e6 error
	ok := controlUDP(pc, func(fd int) {
		e4 = syscall.SetsockoptInt(fd, syscall.IPPROTO_IP, syscall.IP_MTU_DISCOVER, ipPMTUDiscProbe)
		e6 = syscall.SetsockoptInt(fd, syscall.IPPROTO_IPV6, syscall.IPV6_MTU_DISCOVER, ipv6PMTUDiscProbe)
	})
	return ok && (e4 == nil || e6 == nil)
}
