package transport

import (
	"net"

	"github.com/quic-go/quic-go"
)

// AcceptedSampler samples a TCP connection a server accepted: MPTCP_FULL_INFO
// when the client negotiated MPTCP, TCP_INFO otherwise (what the client's
// Conn.Sample reads on its side). Nil for a connection that is not TCP.
func AcceptedSampler(c net.Conn) func() State {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	if mp, _ := tc.MultipathTCP(); mp {
		return func() State { return sampleMPTCP(tc) }
	}
	return func() State { return sampleTCP(tc) }
}

// SampleQUIC reads quic-go's ConnectionStats of either side of a connection.
func SampleQUIC(c *quic.Conn) State {
	s := c.ConnectionStats()
	return State{QUIC: &QUICStats{MinRTT: s.MinRTT, LatestRTT: s.LatestRTT, SmoothedRTT: s.SmoothedRTT,
		MeanDeviation: s.MeanDeviation, CongestionWindow: s.CongestionWindow, BytesSent: s.BytesSent,
		PacketsSent: s.PacketsSent, BytesReceived: s.BytesReceived, PacketsReceived: s.PacketsReceived,
		BytesLost: s.BytesLost, PacketsLost: s.PacketsLost}}
}
