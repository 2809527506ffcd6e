//go:build !linux

package survey

import (
	"net"
	"net/netip"
	"time"
)

func enableRxTimestamps(*net.IPConn) {}

const oobSize = 0

func readStamped(c *net.IPConn, buf, _ []byte) ([]byte, netip.Addr, time.Time, error) {
	n, from, err := c.ReadFromIP(buf)
	at := time.Now()
	if err != nil {
		return nil, netip.Addr{}, at, err
	}
	a, _ := netip.AddrFromSlice(from.IP)
	return buf[:n], a.Unmap(), at, nil
}

func sentNow() time.Time { return time.Now() }

func handshakeInfo(*net.TCPConn) (rtt time.Duration, timestamps, ok bool) { return 0, false, false }
