//go:build !linux

package mpquic

import (
	"net"
	"net/netip"
)

// batchReader: batched reads are Linux's (rxbatch_linux.go); elsewhere a
// client reads one datagram a call.
type batchReader struct{}

func newBatchReader(net.PacketConn) *batchReader { return nil }

func (*batchReader) nextDatagram() ([]byte, net.Addr, netip.Addr, byte, error) {
	return nil, nil, netip.Addr{}, 0, net.ErrClosed
}
