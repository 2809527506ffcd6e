package mpquic

import "time"

// Stats is a snapshot of a connection's path: what the per-path
// samples report (RTT, congestion window, bytes in flight, packets sent
// and declared lost).
type Stats struct {
	SmoothedRTT, RTTVar, MinRTT, LatestRTT time.Duration
	CongestionWindow                       int
	BytesInFlight                          int
	PacketsSent, PacketsLost, PTOCount     uint64
	// BytesSent and BytesReceived count UDP payloads: all the socket took,
	// and all
	// read from the socket for this connection (including any the
	// connection then dropped, so they match what the path carried).
	BytesSent, BytesReceived uint64
}

// Stats reads the connection's counters.
func (c *Conn) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{
		SmoothedRTT: c.rtt.smoothed, RTTVar: c.rtt.rttvar, MinRTT: c.rtt.min, LatestRTT: c.rtt.latest,
		CongestionWindow: c.cc.cwnd, BytesInFlight: c.cc.inFlight,
		PacketsSent: c.packetsSent, PacketsLost: c.packetsLost, PTOCount: c.ptos,
		BytesSent: c.socketSent, BytesReceived: c.socketRecv.Load(),
	}
}
