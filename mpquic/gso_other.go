//go:build !linux

package mpquic

import (
	"errors"
	"net"
	"net/netip"
)

func gsoCapable(net.PacketConn) bool { return false }

// setDontFragment: without a portable way to set DF, paths keep their
// starting datagram size (no PMTU probes that the kernel could fragment).
func setDontFragment(net.PacketConn) bool { return false }

func writeGSO(net.PacketConn, []byte, int, net.Addr, netip.Addr, byte, *[]byte) error {
	return errors.ErrUnsupported
}

func gsoTransient(error) bool { return false }
