package probe

import (
	"encoding/binary"

	"golang.org/x/sys/windows"
)

const mptcpSupported = false

const (
	ipUnicastIf   = 31 // IP_UNICAST_IF
	ipv6UnicastIf = 31 // IPV6_UNICAST_IF
)

func bindToPath(fd uintptr, p Path, f Family) error {
	h := windows.Handle(fd)
	if f == Family6 {
		return windows.SetsockoptInt(h, windows.IPPROTO_IPV6, ipv6UnicastIf, p.Index)
	}
	// IP_UNICAST_IF takes the IPv4 interface index in network byte order.
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(p.Index))
	return windows.SetsockoptInt(h, windows.IPPROTO_IP, ipUnicastIf, int(binary.NativeEndian.Uint32(b[:])))
}
