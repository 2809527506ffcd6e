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
	// PathCIDsBlockedSent and PathCIDsBlockedReceived count PATH_CIDS_BLOCKED
	// frames: a path waited for the peer's connection IDs.
	PathCIDsBlockedSent, PathCIDsBlockedReceived uint64
	// KeyUpdatesInitiated and KeyUpdatesFollowed count 1-RTT key updates
	// (RFC 9001 §6) begun by this side and by the peer.
	KeyUpdatesInitiated, KeyUpdatesFollowed uint64
	// DatagramsDropped counts datagrams that arrived for this connection
	// and were dropped inside this host because its input queue was full
	// (a server's: the listener never waits for one connection; a
	// client's readers wait instead). The peer declares them lost.
	DatagramsDropped uint64
}

// Stats reads the connection's counters: the RTT of path 0 (or, once it is
// abandoned, of the lowest open path ID), windows summed over the open
// paths, packets and bytes over all paths (PathStats has each path's).
func (c *Conn) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Stats{PacketsSent: c.packetsSent, PacketsLost: c.packetsLost, PTOCount: c.ptos,
		BytesSent: c.socketSent, BytesReceived: c.socketRecv.Load(),
		PathCIDsBlockedSent: c.pathCIDs.sent, PathCIDsBlockedReceived: c.pathCIDs.recv,
		KeyUpdatesInitiated: c.kp.updatesByUs, KeyUpdatesFollowed: c.kp.updatesByPeer,
		DatagramsDropped: c.rxDropped.Load()}
	rttSet := false
	for _, id := range c.pathIDs() {
		p := c.paths[id]
		if p.abandoned || p.closed {
			continue
		}
		if !rttSet {
			rttSet = true
			s.SmoothedRTT, s.RTTVar, s.MinRTT, s.LatestRTT = p.rtt.Smoothed, p.rtt.RTTVar, p.rtt.Min, p.rtt.Latest
		}
		s.CongestionWindow += p.cc.Cwnd
		s.BytesInFlight += p.cc.InFlight
	}
	return s
}
