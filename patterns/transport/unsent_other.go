//go:build !linux

package transport

import "net"

// LimitUnsent is a no-op off Linux: the send buffer is left to the OS.
func LimitUnsent(net.Conn) {}
