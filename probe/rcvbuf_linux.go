package probe

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// RaiseReceiveBuffer sets a socket's receive buffer to size bytes, past
// net.core.rmem_max where the process may (SO_RCVBUFFORCE, root or
// CAP_NET_ADMIN). A socket that takes many small datagrams at once (every
// DNS answer of a path, every probe reply) is limited by the kernel's
// per-packet accounting, not by their bytes: at the default 208 KiB a burst
// of a few hundred answers overflows it, and each drop would read as a
// timeout.
func RaiseReceiveBuffer(c syscall.Conn, size int) {
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, size) != nil {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, size)
		}
	})
}
