package dnstest

import (
	"net"

	"golang.org/x/sys/unix"
)

// raiseReceiveBuffer lets the test server take a burst of hundreds of
// queries (a resolver test fires them at once) without the kernel dropping
// some for the socket's per-packet accounting. It is
// probe.RaiseReceiveBuffer's twin: probe's own tests import this package,
// so it cannot import probe.
func raiseReceiveBuffer(pc net.PacketConn) {
	u, ok := pc.(*net.UDPConn)
	if !ok {
		return
	}
	rc, err := u.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20) != nil {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
		}
	})
}
