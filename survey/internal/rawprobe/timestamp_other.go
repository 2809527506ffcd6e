//go:build !linux

package rawprobe

import (
	"context"
	"syscall"

	"github.com/mptester/mptester/probe"
	"net"
	"net/netip"
	"time"
)

func enableRxTimestamps(syscall.Conn) {}

// openRaw opens a raw socket the Go way (the poller's read deadlines
// drive the receive goroutine).
func openRaw(ctx context.Context, p probe.Path, f probe.Family, proto string) (rawConn, netip.Addr, error) {
	return probe.ListenRaw(ctx, p, f, proto)
}

// startRx starts a receive goroutine: without a non-blocking batch read
// the probe loop cannot drain the socket itself.
func startRx(c rawConn, h rxHandler) rxDrainer {
	go receive(c.(*net.IPConn), h)
	return nil
}

// receive reads c until it is closed. Without a non-blocking read, a read
// that times out after rxTick dates the watermark at its start: nothing
// arrived during it.
func receive(c *net.IPConn, h rxHandler) {
	buf := make([]byte, 1500)
	for {
		start := time.Now()
		c.SetReadDeadline(start.Add(rxTick))
		n, from, err := c.ReadFromIP(buf)
		now := time.Now()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				h.empty(start)
				continue
			}
			return // closed
		}
		if testRxHook != nil {
			testRxHook()
		}
		a, _ := netip.AddrFromSlice(from.IP)
		h.packet(buf[:n], a.Unmap(), now, now)
	}
}

func sentNow() time.Time { return time.Now() }

// writeBatch sends the packets of out one system call each.
func writeBatch(out []rawOut) {
	for i := range out {
		o := &out[i]
		o.sent = sentNow()
		_, o.err = o.sock.conn.(*net.IPConn).WriteToIP(o.pkt[:o.n], &net.IPAddr{IP: o.dst.AsSlice()})
	}
}

func handshakeInfo(*net.TCPConn) (rtt time.Duration, timestamps, ok bool) { return 0, false, false }
