//go:build !linux

package mpquic

import "net"

// ECN elsewhere: not read and not marked (darwin and windows have other
// socket options; not done): every path reports ECNNotTried.

func enableECN(net.PacketConn) bool { return false }

func appendECN(oob []byte, _ net.Addr, _ byte) []byte { return oob }

func writeECN(pc net.PacketConn, b []byte, to net.Addr, _ byte, _ *[]byte) error {
	_, err := pc.WriteTo(b, to)
	return err
}
