//go:build !linux

package mpquic

import (
	"net"
	"net/netip"
)

func enableDstInfo(net.PacketConn) bool { return false }

func readWithDst(pc net.PacketConn, b, _ []byte) (int, net.Addr, netip.Addr, byte, error) {
	n, from, err := pc.ReadFrom(b)
	return n, from, netip.Addr{}, ecnNotECT, err
}

func writeFrom(pc net.PacketConn, b []byte, to net.Addr, _ netip.Addr, _ byte, _ *[]byte) error {
	_, err := pc.WriteTo(b, to)
	return err
}
