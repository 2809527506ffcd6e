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

// controlUDP runs f on pc's descriptor; false if pc is no UDP socket.
func controlUDP(pc net.PacketConn, f func(fd int)) bool {
	uc, ok := pc.(*net.UDPConn)
	if !ok {
		return false
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return false
	}
	return rc.Control(func(fd uintptr) { f(int(fd)) }) == nil
}

func writeGSO(pc net.PacketConn, b []byte, seg int, to net.Addr, src netip.Addr, oob *[]byte) error {
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
	*oob = o
	_, _, err := uc.WriteMsgUDP(b, o, ua)
	return err
}

// gsoTransient errors do not mean the socket lacks GSO.
func gsoTransient(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, net.ErrClosed)
}
