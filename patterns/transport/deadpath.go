package transport

import (
	"errors"
	"net"
	"syscall"
)

// deadPathConn is a path's UDP socket whose sends to a path the host has
// just lost (link down, address removed, an unreachable route) count as
// lost packets instead of errors: quic-go closes the whole connection on
// any send error but "message too long", which would end a quic-handover
// connection exactly when it should move to its backup. onDead is told
// (it kicks the switching rule). It embeds *net.UDPConn so quic-go still
// sees a socket it can batch and segment (GSO) on.
type deadPathConn struct {
	*net.UDPConn
	onDead func()
}

// pathGone says whether a send error means the path is gone from the host
// (the packet is lost, as on a dead link) rather than a fault of the
// socket.
func pathGone(err error) bool {
	return errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETDOWN) || errors.Is(err, syscall.EADDRNOTAVAIL)
}

func (c *deadPathConn) WriteMsgUDP(b, oob []byte, addr *net.UDPAddr) (int, int, error) {
	n, oobn, err := c.UDPConn.WriteMsgUDP(b, oob, addr)
	if err != nil && pathGone(err) {
		c.onDead()
		return len(b), len(oob), nil
	}
	return n, oobn, err
}

func (c *deadPathConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	n, err := c.UDPConn.WriteTo(b, addr)
	if err != nil && pathGone(err) {
		c.onDead()
		return len(b), nil
	}
	return n, err
}
