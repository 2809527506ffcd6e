package transport

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"
)

// State is one protocol-state sample of a connection (000 §II-B: "dumps
// of the transport protocol states ... periodically collected"): the
// transport's own sample type, written under its own key.
type State struct {
	Key  string     // "tcp_info", "mptcp", "quic", ...
	Data SampleData // nil when Err is set
	Err  string
}

// SampleData is a transport's sample type.
type SampleData interface {
	// Retransmissions so far: TCP total_retrans (segments), MPTCP the sum
	// over subflows, QUIC packets declared lost (each is retransmitted).
	Retransmissions() uint64
	// Bytes the connection sent (retransmissions included) and received,
	// as the transport counts them (payload of TCP segments, QUIC packets).
	Bytes() (sent, received uint64)
}

// RetransUnknown is implemented by a sample that cannot count
// retransmissions (Network.framework on macOS): its count is absent from
// results, never 0.
type RetransUnknown interface{ RetransmissionsUnknown() bool }

// PathSampler is implemented by the sample of a multipath transport: what
// each path (by local address) carried so far.
type PathSampler interface {
	PerPath() []PathCounters
}

// PathCounters of one path of a multipath connection, from its sample.
type PathCounters struct {
	Path     string         `json:"path,omitempty"` // as the transport labelled it
	Local    netip.AddrPort `json:"local"`
	Remote   netip.AddrPort `json:"remote"`
	Sent     uint64         `json:"bytes_acked"`
	Received uint64         `json:"bytes_received"`
}

// Retransmissions of the sample (0 without data).
func (s State) Retransmissions() uint64 {
	if s.Data == nil {
		return 0
	}
	return s.Data.Retransmissions()
}

func errState(err string) State { return State{Err: err} }

// TCPInfo is the part of Linux struct tcp_info a measurement needs. Times
// are in microseconds as the kernel gives them.
type TCPInfo struct {
	State         uint8  `json:"state"`
	CAState       uint8  `json:"ca_state"`
	Retransmits   uint8  `json:"retransmits"`
	RTO           uint32 `json:"rto_us"`
	SndMSS        uint32 `json:"snd_mss"`
	Unacked       uint32 `json:"unacked"`
	Lost          uint32 `json:"lost"`
	Retrans       uint32 `json:"retrans"`
	RTT           uint32 `json:"rtt_us"`
	RTTVar        uint32 `json:"rttvar_us"`
	SndSsthresh   uint32 `json:"snd_ssthresh"`
	SndCwnd       uint32 `json:"snd_cwnd"`
	TotalRetrans  uint32 `json:"total_retrans"`
	PacingRate    uint64 `json:"pacing_rate"`
	BytesAcked    uint64 `json:"bytes_acked"`
	BytesReceived uint64 `json:"bytes_received"`
	SegsOut       uint32 `json:"segs_out"`
	SegsIn        uint32 `json:"segs_in"`
	NotsentBytes  uint32 `json:"notsent_bytes"`
	MinRTT        uint32 `json:"min_rtt_us"`
	DeliveryRate  uint64 `json:"delivery_rate"`
	BytesSent     uint64 `json:"bytes_sent"`
	BytesRetrans  uint64 `json:"bytes_retrans"`
}

// TCPInfoLen is the prefix of struct tcp_info we read (up to bytes_retrans).
const TCPInfoLen = 216

// kernelStruct reads fields of a struct the kernel wrote in host byte
// order; a field past the end (an older kernel's shorter struct) reads 0.
type kernelStruct []byte

func (b kernelStruct) u8(o int) uint8 {
	if o < len(b) {
		return b[o]
	}
	return 0
}

func (b kernelStruct) u32(o int) uint32 {
	if o+4 <= len(b) {
		return binary.NativeEndian.Uint32(b[o:])
	}
	return 0
}

func (b kernelStruct) u64(o int) uint64 {
	if o+8 <= len(b) {
		return binary.NativeEndian.Uint64(b[o:])
	}
	return 0
}

// DecodeTCPInfo decodes a struct tcp_info as the kernel wrote it (host
// byte order). Fields beyond len(b) (older kernels) stay zero.
func DecodeTCPInfo(b []byte) TCPInfo {
	f := kernelStruct(b)
	u8, u32, u64 := f.u8, f.u32, f.u64
	// Offsets from include/uapi/linux/tcp.h.
	return TCPInfo{State: u8(0), CAState: u8(1), Retransmits: u8(2), RTO: u32(8), SndMSS: u32(16),
		Unacked: u32(24), Lost: u32(32), Retrans: u32(36), RTT: u32(68), RTTVar: u32(72),
		SndSsthresh: u32(76), SndCwnd: u32(80), TotalRetrans: u32(100), PacingRate: u64(104),
		BytesAcked: u64(120), BytesReceived: u64(128), SegsOut: u32(136), SegsIn: u32(140),
		NotsentBytes: u32(144), MinRTT: u32(148), DeliveryRate: u64(160), BytesSent: u64(200),
		BytesRetrans: u64(208)}
}

// MPTCPInfo is struct mptcp_info (include/uapi/linux/mptcp.h).
type MPTCPInfo struct {
	Subflows            uint8  `json:"subflows"` // additional subflows (not counting the initial one)
	AddAddrSignal       uint8  `json:"add_addr_signal"`
	AddAddrAccepted     uint8  `json:"add_addr_accepted"`
	SubflowsMax         uint8  `json:"subflows_max"`
	Flags               uint32 `json:"flags"`
	Token               uint32 `json:"token"`
	WriteSeq            uint64 `json:"write_seq"`
	SndUna              uint64 `json:"snd_una"`
	RcvNxt              uint64 `json:"rcv_nxt"`
	LocalAddrUsed       uint8  `json:"local_addr_used"`
	LocalAddrMax        uint8  `json:"local_addr_max"`
	CsumEnabled         uint8  `json:"csum_enabled"`
	Retransmits         uint32 `json:"retransmits"`
	BytesRetrans        uint64 `json:"bytes_retrans"`
	BytesSent           uint64 `json:"bytes_sent"`
	BytesReceived       uint64 `json:"bytes_received"`
	BytesAcked          uint64 `json:"bytes_acked"`
	SubflowsTotal       uint8  `json:"subflows_total"`
	LastDataSentMillis  uint32 `json:"last_data_sent_ms"`
	LastDataRecvMillis  uint32 `json:"last_data_recv_ms"`
	LastAckRecvMillisec uint32 `json:"last_ack_recv_ms"`
}

// MPTCPInfoLen is sizeof(struct mptcp_info) on current kernels.
const MPTCPInfoLen = 96

// DecodeMPTCPInfo decodes struct mptcp_info; a short buffer (older kernel)
// leaves the later fields zero, a buffer shorter than the first 48 bytes
// is an error.
func DecodeMPTCPInfo(b []byte) (MPTCPInfo, error) {
	if len(b) < 48 {
		return MPTCPInfo{}, fmt.Errorf("mptcp_info of %d bytes", len(b))
	}
	f := kernelStruct(b)
	u32, u64 := f.u32, f.u64
	total := f.u8(80)
	return MPTCPInfo{Subflows: b[0], AddAddrSignal: b[1], AddAddrAccepted: b[2], SubflowsMax: b[3],
		Flags: u32(8), Token: u32(12), WriteSeq: u64(16), SndUna: u64(24), RcvNxt: u64(32),
		LocalAddrUsed: b[40], LocalAddrMax: b[41], CsumEnabled: b[42], Retransmits: u32(44),
		BytesRetrans: u64(48), BytesSent: u64(56), BytesReceived: u64(64), BytesAcked: u64(72),
		SubflowsTotal: total, LastDataSentMillis: u32(84), LastDataRecvMillis: u32(88),
		LastAckRecvMillisec: u32(92)}, nil
}

// Subflow is one MPTCP subflow: its addresses and its tcp_info.
type Subflow struct {
	ID uint32 `json:"id"`
	// Path is the selected path whose address the subflow uses ("" when
	// none has it).
	Path   string         `json:"path,omitempty"`
	Local  netip.AddrPort `json:"local"`
	Remote netip.AddrPort `json:"remote"`
	// Backup: the subflow is a backup. From the kernel's per-subflow
	// flags (KernelFlags, inet_diag, as `ss -M`; needs CAP_NET_ADMIN) when
	// it answers, else the host endpoint role run took from `ip mptcp
	// endpoint ... backup` (MPTCP_FULL_INFO carries no flags).
	Backup bool `json:"backup,omitempty"`
	// KernelFlags: MPTCP_SUBFLOW_ATTR_FLAGS (SubflowBackupLocal/Remote,
	// join, fully established...); nil when the kernel did not say.
	KernelFlags *uint32 `json:"kernel_flags,omitempty"`
	TCP         TCPInfo `json:"tcp_info"`
}

// MPTCPState is an MPTCP_FULL_INFO sample: connection-level info plus
// every subflow.
type MPTCPState struct {
	Info       MPTCPInfo `json:"info"`
	NumSubflow int       `json:"num_subflows"` // as the kernel counts them, initial one included
	Subflows   []Subflow `json:"subflows"`
}

// Layout of struct mptcp_full_info and struct mptcp_subflow_info.
const (
	fullInfoHdrLen = 40 // six u32 + two u64 pointers, then struct mptcp_info
	FullInfoLen    = fullInfoHdrLen + MPTCPInfoLen
	SubflowInfoLen = 8 + 2*128 // u32 id, padding to 8, two sockaddr_storage
	sockaddrLen    = 128       // sizeof(struct __kernel_sockaddr_storage)
	afInet         = 2         // AF_INET
	afInet6        = 10        // AF_INET6 on Linux
)

// DecodeFullInfo decodes what getsockopt(MPTCP_FULL_INFO) returned: hdr is
// struct mptcp_full_info, sf and ti the subflow-info and tcp_info arrays
// the caller passed (strides as in hdr). Nothing is trusted: counts and
// strides are checked against the buffers.
func DecodeFullInfo(hdr, sf, ti []byte) (MPTCPState, error) {
	if len(hdr) < fullInfoHdrLen+48 {
		return MPTCPState{}, fmt.Errorf("mptcp_full_info of %d bytes", len(hdr))
	}
	ne := binary.NativeEndian
	tiKernel, tiUser := ne.Uint32(hdr[0:]), ne.Uint32(hdr[4:])
	sfKernel, sfUser := ne.Uint32(hdr[8:]), ne.Uint32(hdr[12:])
	num, arrays := ne.Uint32(hdr[16:]), ne.Uint32(hdr[20:])
	info, err := DecodeMPTCPInfo(hdr[fullInfoHdrLen:])
	if err != nil {
		return MPTCPState{}, err
	}
	st := MPTCPState{Info: info, NumSubflow: int(num), Subflows: []Subflow{}}
	n := min(num, arrays)
	tiStride, sfStride := min(tiKernel, tiUser), min(sfKernel, sfUser)
	if tiUser == 0 || sfUser == 0 || uint64(n)*uint64(tiUser) > uint64(len(ti)) || uint64(n)*uint64(sfUser) > uint64(len(sf)) {
		if n > 0 {
			return st, fmt.Errorf("mptcp_full_info: %d subflows do not fit the buffers", n)
		}
		return st, nil
	}
	for i := range int(n) {
		s := sf[i*int(sfUser):][:sfStride]
		var sub Subflow
		if len(s) >= 4 {
			sub.ID = ne.Uint32(s)
		}
		if len(s) >= 8+2*sockaddrLen {
			sub.Local = decodeSockaddr(s[8:][:sockaddrLen])
			sub.Remote = decodeSockaddr(s[8+sockaddrLen:][:sockaddrLen])
		}
		sub.TCP = DecodeTCPInfo(ti[i*int(tiUser):][:tiStride])
		st.Subflows = append(st.Subflows, sub)
	}
	return st, nil
}

// decodeSockaddr reads a sockaddr_in or sockaddr_in6 (family in host
// order, port in network order).
func decodeSockaddr(b []byte) netip.AddrPort {
	if len(b) < 28 {
		return netip.AddrPort{}
	}
	port := binary.BigEndian.Uint16(b[2:])
	switch binary.NativeEndian.Uint16(b) {
	case afInet:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	case afInet6:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])).Unmap(), port)
	}
	return netip.AddrPort{}
}

// QUICStats is quic-go's ConnectionStats.
type QUICStats struct {
	MinRTT           time.Duration `json:"min_rtt_ns"`
	LatestRTT        time.Duration `json:"latest_rtt_ns"`
	SmoothedRTT      time.Duration `json:"smoothed_rtt_ns"`
	MeanDeviation    time.Duration `json:"mean_deviation_ns"`
	CongestionWindow uint64        `json:"congestion_window"`
	BytesSent        uint64        `json:"bytes_sent"`
	PacketsSent      uint64        `json:"packets_sent"`
	BytesReceived    uint64        `json:"bytes_received"`
	PacketsReceived  uint64        `json:"packets_received"`
	BytesLost        uint64        `json:"bytes_lost"`
	PacketsLost      uint64        `json:"packets_lost"`
	// What reached the transport but not quic-go's counters: datagrams
	// quic-go drops when a connection's packet queue is full are on the
	// wire and not in BytesReceived. The quic client counts its socket's
	// reads, quic-handover the drops (from the qlog events it already
	// follows); zero where not counted.
	SocketDatagramsReceived uint64 `json:"socket_datagrams_received,omitempty"`
	SocketBytesReceived     uint64 `json:"socket_bytes_received,omitempty"`
	PacketsDroppedQueueFull uint64 `json:"packets_dropped_queue_full,omitempty"`
	BytesDroppedQueueFull   uint64 `json:"bytes_dropped_queue_full,omitempty"`
	// ECN of a quic connection when recorded (Options.QUICECN or a qlog
	// trace); absent otherwise, and on mpquic, whose paths carry their own.
	*QUICECN
}

// QUICECN is quic-go's ECN validation of the connection (RFC 9000
// §13.4.2), in mpquic's words: validated, bleached (the peer's ACKs carry
// no ECN counts), mangled (any other failure quic-go names), testing (no
// verdict yet) or not-tried (quic-go never marked: ECN off or not
// supported on the platform). CESent counts the CE marks the peer
// reported on the packets this side sent (the largest count of each packet
// number space's ACK frames, summed), CEReceived the CE-marked packets
// that arrived.
type QUICECN struct {
	ECN        string `json:"ecn"`
	CESent     uint64 `json:"ce_sent"`
	CEReceived uint64 `json:"ce_received"`
}

// Retransmissions: TCP total_retrans segments.
func (t *TCPInfo) Retransmissions() uint64 { return uint64(t.TotalRetrans) }

// Bytes of the TCP connection.
func (t *TCPInfo) Bytes() (uint64, uint64) { return t.BytesSent, t.BytesReceived }

// Bytes summed over subflows (what the paths carried, reinjections
// included).
func (m *MPTCPState) Bytes() (sent, received uint64) {
	for _, sf := range m.Subflows {
		sent += sf.TCP.BytesSent
		received += sf.TCP.BytesReceived
	}
	if len(m.Subflows) == 0 {
		// MPTCP_INFO only (kernels before 6.5): the connection's counters.
		return m.Info.BytesSent, m.Info.BytesReceived
	}
	return sent, received
}

// Retransmissions summed over subflows.
func (m *MPTCPState) Retransmissions() uint64 {
	var n uint64
	for _, sf := range m.Subflows {
		n += uint64(sf.TCP.TotalRetrans)
	}
	return n
}

// PerPath: each subflow is a path's share of the connection.
func (m *MPTCPState) PerPath() []PathCounters {
	out := make([]PathCounters, 0, len(m.Subflows))
	for _, sf := range m.Subflows {
		out = append(out, PathCounters{Path: sf.Path, Local: sf.Local, Remote: sf.Remote, Sent: sf.TCP.BytesAcked, Received: sf.TCP.BytesReceived})
	}
	return out
}

// Bytes of QUIC packets sent and received.
func (q *QUICStats) Bytes() (uint64, uint64) { return q.BytesSent, q.BytesReceived }

// Retransmissions: QUIC packets declared lost.
func (q *QUICStats) Retransmissions() uint64 { return q.PacketsLost }

// tcpEstablished is TCP_ESTABLISHED in tcp_info's state.
const tcpEstablished = 1

// PathStates: each subflow as one path of the connection (000 §II-B's
// subflow state: srtt, RTO, RTOs in progress, in flight). Active is
// "established and not in timeout": the kernel's own stale mark
// (net.mptcp.stale_loss_cnt) is not exported, and stale follows from
// repeated RTOs, which RTOs shows.
func (m *MPTCPState) PathStates() []PathState {
	out := make([]PathState, 0, len(m.Subflows))
	for _, sf := range m.Subflows {
		t := sf.TCP
		out = append(out, PathState{Path: sf.Path, Local: sf.Local, Remote: sf.Remote, Backup: sf.Backup,
			Active: t.State == tcpEstablished && t.Retransmits == 0,
			SRTT:   time.Duration(t.RTT) * time.Microsecond, RTO: time.Duration(t.RTO) * time.Microsecond,
			RTOs: uint32(t.Retransmits), InFlight: uint64(t.Unacked) * uint64(max(t.SndMSS, 1)),
			Sent: t.BytesSent, Received: t.BytesReceived})
	}
	return out
}
