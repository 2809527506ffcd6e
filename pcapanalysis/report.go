package pcapanalysis

import "time"

// Options tune the analysis.
type Options struct {
	// IdleTimeout frees a connection nothing was seen on for this long
	// (capture time); 0 means 5 minutes.
	IdleTimeout time.Duration
	// OnConnection, when set, receives each connection as it is finished and
	// the report does not keep it (streaming use); otherwise Report.Connections
	// collects them.
	OnConnection func(*Connection)
	// Strict makes a capture cut inside its last packet an error, as before
	// analyze learned to read what a killed tcpdump leaves behind.
	Strict bool
}

// Report is the analysis of one capture file.
type Report struct {
	File        string        `json:"file"`
	Packets     int64         `json:"packets"`
	TCPPackets  int64         `json:"tcp_packets"`
	UDPPackets  int64         `json:"udp_packets"`
	Other       int64         `json:"other_packets"`       // not IP, not TCP/UDP, or IP fragments
	SnapShort   int64         `json:"snaplen_cut_packets"` // headers cut by the snapshot length
	Stray       int64         `json:"stray_tcp_packets"`   // empty segments of no known flow (late ACKs, RSTs)
	First       time.Time     `json:"first"`
	Last        time.Time     `json:"last"`
	Connections []*Connection `json:"connections"`
	QUIC        []*QUICConn   `json:"quic"`
	Summary     Summary       `json:"summary"`
	LinkTypes   map[int]int64 `json:"link_types"`
	// Warnings name what was read around rather than analysed (a capture cut
	// inside its last packet); the report covers everything before it.
	Warnings []string `json:"warnings"`
}

// Summary aggregates the connections of a capture as study 001 §IV-B does.
type Summary struct {
	TCP             int `json:"tcp_connections"`
	MPTCP           int `json:"mptcp_connections"`
	MPTCPSinglePath int `json:"mptcp_single_path"` // MPTCP connections whose data went over one subflow only
	// Per direction: MPTCP connections with data up (down) that sent it
	// over one subflow only, and those with data in that direction.
	MPTCPSinglePathDir [2]int `json:"mptcp_single_path_dir"`
	MPTCPWithDataDir   [2]int `json:"mptcp_with_data_dir"`
	MPTCPWithReinject  int    `json:"mptcp_with_reinjections"`
	ReinjectedBytes    int64  `json:"reinjected_bytes"`
	QUIC               int    `json:"quic_connections"`
	QUICPaths          int    `json:"quic_paths"`
	// Bytes per client-side address over all MPTCP connections (data bytes,
	// both directions), the "bytes per interface" of 001 Fig. 4c.
	PerAddress []AddrBytes `json:"mptcp_bytes_per_address"`
}

// Connection is one TCP or MPTCP connection. Directions are seen from the
// connection's client, the host that sent the SYN of the first subflow:
// index 0 is client to server ("up"), 1 server to client ("down").
type Connection struct {
	ID       int       `json:"id"`
	Kind     string    `json:"kind"` // "mptcp" or "tcp"
	Client   string    `json:"client"`
	Server   string    `json:"server"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Duration float64   `json:"duration_s"`
	// Handshake is false when the capture missed the first subflow's SYN.
	Handshake bool   `json:"handshake"`
	Version   int    `json:"mptcp_version,omitempty"`
	TokenC    string `json:"client_token,omitempty"`
	TokenS    string `json:"server_token,omitempty"`
	// Data bytes per direction: MPTCP data sequence space covered at least
	// once (relative to the IDSN, each byte counted once however often it
	// was sent); for plain TCP the subflow sequence space likewise.
	Data [2]int64 `json:"data_bytes"`
	// Missing is data sequence space between the IDSN and the highest
	// byte seen that no captured segment carried (capture loss, or a
	// capture started late); 0 for a complete capture of an MPTCP
	// connection whose keys were seen.
	Missing [2]int64 `json:"missing_bytes"`
	// Reinjections per direction (001 §IV-B): segments carrying data
	// sequence numbers already sent on another subflow, and those bytes.
	Reinjections     [2]int64    `json:"reinjections"`
	ReinjectedBytes  [2]int64    `json:"reinjected_bytes"`
	PathsWithData    int         `json:"paths_with_data"`
	PathsWithDataDir [2]int      `json:"paths_with_data_dir"` // per direction: 001 Fig. 4 counts the upstream
	SinglePath       bool        `json:"single_path"`
	FirstDataSubflow int         `json:"first_data_subflow"` // index into Subflows, -1 if no data
	FirstDataDir     int         `json:"first_data_dir"`
	Subflows         []*Subflow  `json:"subflows"`
	PerAddress       []AddrBytes `json:"per_address"`
	AddAddr          []string    `json:"add_addr,omitempty"`
	RemoveAddr       int         `json:"remove_addr,omitempty"`
	Prio             int         `json:"mp_prio,omitempty"`
	Fail             int         `json:"mp_fail,omitempty"`
	Fastclose        bool        `json:"mp_fastclose,omitempty"`
	TCPRST           int         `json:"mp_tcprst,omitempty"`
	// Fallback: an infinite mapping seen, or (kind tcp) MPTCP offered on the
	// SYN but not agreed (RFC 8684 §3.7).
	Fallback bool `json:"fallback,omitempty"`
}

// Subflow is one TCP connection of an MPTCP connection (or the only one of a
// plain TCP connection). Client is the subflow's SYN sender.
type Subflow struct {
	Index  int    `json:"index"`
	Client string `json:"client"`
	Server string `json:"server"`
	Join   bool   `json:"join"`
	Backup bool   `json:"backup"`
	// JoinVerified: the MP_JOIN SYN-ACK's HMAC matches the connection's
	// keys (RFC 8684 §3.2), not only its token.
	JoinVerified bool      `json:"join_verified,omitempty"`
	AddrID       int       `json:"addr_id"`
	Interface    string    `json:"interface,omitempty"`
	Start        time.Time `json:"start"`
	End          time.Time `json:"end"`
	// HandshakeRTT is SYN to the ACK that completes the handshake, the
	// round trip as seen wherever the capture was taken.
	HandshakeRTT float64 `json:"handshake_rtt_ms"`
	// TSRTT per direction: from a segment carrying a new TSval to the first
	// segment of the other direction echoing it (RFC 7323 §4.1), so the
	// round trip from the capture point to that direction's receiver: near
	// 0 for data sent to the capturing host, the path's RTT for data it sent.
	TSRTT   [2]RTTStats `json:"ts_rtt"`
	Dir     [2]DirBytes `json:"dir"`    // in the connection's directions
	Closed  string      `json:"closed"` // fin, rst or open
	flipped bool
}

// DirBytes counts one direction of a subflow.
type DirBytes struct {
	Packets int64 `json:"packets"`
	// Wire is the IP bytes of every packet (headers included), what a
	// link's byte counter sees.
	Wire int64 `json:"wire"`
	// Payload is every TCP payload byte, retransmissions included.
	Payload int64 `json:"payload"`
	// Data is the data bytes first carried by this subflow (see Connection.Data).
	Data int64 `json:"data"`
	// Reinjected is data bytes first sent on another subflow.
	Reinjected int64 `json:"reinjected"`
	// Retransmitted is payload this subflow had carried before: TCP
	// retransmissions, and (MPTCP) data the connection sent again on the
	// same subflow, as Linux does for everything unacknowledged at the
	// data level when another subflow fails.
	Retransmitted int64 `json:"retransmitted"`
	// Unmapped is MPTCP payload no DSS mapping seen in the capture covers.
	Unmapped int64 `json:"unmapped"`
}

// RTTStats summarises RTT samples in milliseconds.
type RTTStats struct {
	N    int     `json:"n"`
	Min  float64 `json:"min_ms"`
	Mean float64 `json:"mean_ms"`
	Max  float64 `json:"max_ms"`
}

func (s *RTTStats) add(ms float64) {
	if s.N == 0 || ms < s.Min {
		s.Min = ms
	}
	if ms > s.Max {
		s.Max = ms
	}
	s.Mean += (ms - s.Mean) / float64(s.N+1)
	s.N++
}

// AddrBytes is the data bytes of the subflows whose client side has this address.
type AddrBytes struct {
	Addr string   `json:"addr"`
	Data [2]int64 `json:"data"`
}

// QUICConn is a QUIC connection recognised from its long-header packets
// (RFC 9000 §17.2) and followed by connection ID into short-header packets.
type QUICConn struct {
	ID      int       `json:"id"`
	Version string    `json:"version"`
	CIDs    []string  `json:"cids"`
	Paths   []string  `json:"paths"` // client-server 4-tuples seen
	Packets int64     `json:"packets"`
	Bytes   int64     `json:"bytes"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
}
