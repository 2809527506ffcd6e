package transport

import (
	"net"

	"golang.org/x/sys/unix"
)

// LimitUnsent caps the data queued in the kernel but not yet sent
// (TCP_NOTSENT_LOWAT). Without it a sender's writes complete long before
// the bytes leave on a slow path, so "send for 7 s" would keep the path
// busy for many seconds more and a test would outlive its duration. Best
// effort: an MPTCP socket on an older kernel refuses the option.
func LimitUnsent(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, UnsentLimit)
	})
}
