//go:build !linux

package dnstest

import "net"

// raiseReceiveBuffer lets the test server take a burst of queries.
func raiseReceiveBuffer(pc net.PacketConn) {
	if u, ok := pc.(*net.UDPConn); ok {
		_ = u.SetReadBuffer(4 << 20)
	}
}
