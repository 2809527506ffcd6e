//go:build !linux

package probe

import (
	"net"
	"syscall"
)

// RaiseReceiveBuffer sets a socket's receive buffer to size bytes (as far
// as the OS allows).
func RaiseReceiveBuffer(c syscall.Conn, size int) {
	if u, ok := c.(*net.UDPConn); ok {
		_ = u.SetReadBuffer(size)
	}
}
