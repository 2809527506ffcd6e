package transport

import (
	"net"
	"sync/atomic"

	"golang.org/x/net/ipv4"
)

// countedUDP is a QUIC connection's own UDP socket counting the datagrams
// quic-go reads from it: quic-go drops received datagrams in userspace
// when a connection's packet queue is full and leaves them out of
// ConnectionStats, so only the socket knows what reached the transport.
// It reads in batches as quic-go does with a bare *net.UDPConn (quic-go
// uses a ReadBatch its Conn offers), so no receive optimization is lost;
// the count is a sum per batch, where a qlog tracer (the other way to see
// the drops) makes quic-go build an event for every packet.
type countedUDP struct {
	*net.UDPConn
	batch            *ipv4.PacketConn
	datagrams, bytes atomic.Uint64
}

func newCountedUDP(c *net.UDPConn) *countedUDP {
	return &countedUDP{UDPConn: c, batch: ipv4.NewPacketConn(c)}
}

// ReadBatch is quic-go's read on Linux, macOS and FreeBSD.
func (c *countedUDP) ReadBatch(ms []ipv4.Message, flags int) (int, error) {
	n, err := c.batch.ReadBatch(ms, flags)
	if n <= 0 {
		return n, err
	}
	var b uint64
	for _, m := range ms[:n] {
		b += uint64(m.N)
	}
	c.datagrams.Add(uint64(n))
	c.bytes.Add(b)
	return n, err
}

// ReadFrom is quic-go's read where it does not batch (Windows).
func (c *countedUDP) ReadFrom(p []byte) (int, net.Addr, error) {
	n, addr, err := c.UDPConn.ReadFrom(p)
	if err == nil {
		c.datagrams.Add(1)
		c.bytes.Add(uint64(n))
	}
	return n, addr, err
}
