package transport

import (
	"net/netip"
	"time"
)

// PathState is one path of a connection in one sample, in terms common to
// an MPTCP subflow and a QUIC path, so that mobile mode classifies why the
// backup path was first used (000 §II-B, Table I: RTT threshold, under
// RTO, RTO threshold, other) the same way for every transport.
type PathState struct {
	// Path is the selected path's name ("" when no selected path has the
	// local address).
	Path   string         `json:"path,omitempty"`
	Local  netip.AddrPort `json:"local"`
	Remote netip.AddrPort `json:"remote"`
	// Backup: the path is a backup (MPTCP backup flag, a QUIC path held in
	// standby).
	Backup bool `json:"backup"`
	// Active: the path may carry data now (MPTCP: established and not
	// stale; quic-handover: the path in use).
	Active bool `json:"active"`
	// SRTT and RTO (TCP) or PTO (QUIC) as the sender estimates them.
	SRTT time.Duration `json:"srtt_ns"`
	RTO  time.Duration `json:"rto_ns"`
	// RTOs counts retransmission timeouts (PTOs) in progress: tcp_info
	// retransmits, QUIC's PTO count; 0 when the path is not in timeout.
	RTOs uint32 `json:"rtos"`
	// InFlight is data sent and not yet acknowledged on the path.
	InFlight uint64 `json:"in_flight_bytes"`
	// Sent and Received count the bytes the path carried so far.
	Sent     uint64 `json:"bytes_sent"`
	Received uint64 `json:"bytes_received"`
}

// PathStater is implemented by the sample of a transport that can use more
// than one path over a connection's life (MPTCP, quic-handover, mpquic).
type PathStater interface {
	PathStates() []PathState
}
