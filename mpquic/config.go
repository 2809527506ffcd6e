package mpquic

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Config tunes a connection; the zero value gives the defaults.
type Config struct {
	// MaxIdleTimeout closes a connection after this long without a packet
	// from the peer (RFC 9000 §10.1); default 30 s.
	MaxIdleTimeout time.Duration
	// MaxDatagramSize is the UDP payload size a path starts with; default
	// 1252 (fits IPv6's 1280-byte minimum MTU), at least 1200. Path MTU
	// discovery (pmtud.go) raises it per path up to 1452 where the path
	// carries it.
	MaxDatagramSize int
	// DisablePathMTUDiscovery keeps every path at MaxDatagramSize.
	DisablePathMTUDiscovery bool
	// StreamReceiveWindow and ConnectionReceiveWindow are the flow control
	// windows granted to the peer; defaults 6 MiB and 15 MiB.
	StreamReceiveWindow     uint64
	ConnectionReceiveWindow uint64
	// MaxIncomingStreams is how many bidirectional streams the peer may
	// have open at once; default 100.
	MaxIncomingStreams uint64
	// MaxIncomingUniStreams is how many unidirectional streams the peer
	// may have open at once; default 0 (none). HTTP/3 needs at least 3
	// (RFC 9114 §6.2: control and the two QPACK streams).
	MaxIncomingUniStreams uint64
	// SendBuffer is how many bytes a stream's Write queues ahead of the
	// sender before it blocks; default 1 MiB. A measurement keeps it small
	// so that a timed sender stops close to when it stops writing.
	SendBuffer int
	// ConnectionSendBuffer bounds the bytes queued unsent over all of a
	// connection's streams, so a peer that opens many streams and reads
	// none holds at most this much of our memory in unsent data (sent
	// data waits only for its acknowledgment); default 4 x SendBuffer.
	ConnectionSendBuffer int
	// KeepAlivePeriod, when set, sends a PING after this long without
	// sending or receiving, so an idle connection outlives the idle timeout.
	KeepAlivePeriod time.Duration
	// HandshakeTimeout bounds Dial and a server's handshake; default 10 s.
	HandshakeTimeout time.Duration
	// MaxPathID is the initial_max_path_id we offer
	// (draft-ietf-quic-multipath-21): paths 0..MaxPathID; default 3 (four
	// paths). Multipath is used only when the peer offers it too.
	MaxPathID uint32
	// DisableMultipath leaves initial_max_path_id out: plain QUIC v1.
	DisableMultipath bool
	// DisableECN sends every packet Not-ECT (RFC 9000 §13.4); received
	// codepoints are still counted and reported to the peer.
	DisableECN bool
	// MinFailureTimeout is the least time without a packet received on a
	// path before a PTO marks it potentially failed; default 0 (the PTO
	// alone). A floor keeps one spurious PTO of a starved timer on a
	// short-RTT path from moving traffic to the backup, as quic-handover's
	// HandoverConfig.MinTimeout does (study 000 §II-B).
	MinFailureTimeout time.Duration
	// StatelessResetKey derives the stateless reset token of every
	// connection ID issued (RFC 9000 §10.3.2). A server that keeps its key
	// across restarts resets the connections it lost at their peer's next
	// packet; nil: a random key per Listener (or client connection).
	StatelessResetKey *StatelessResetKey
	// KeyUpdateInterval is how many 1-RTT packets we send under one key
	// phase before updating the keys (RFC 9001 §6); default 2^22, half
	// AES-128-GCM's confidentiality limit (§6.6); negative: never on our
	// own (the peer's updates are always followed).
	KeyUpdateInterval int64
	// Congestion is every path's congestion avoidance: CongestionCUBIC
	// (default, each path on its own), CongestionNewReno, or CongestionLIA
	// (the paths' increase coupled, RFC 6356).
	Congestion CongestionControl
	// Qlog, when set, is asked at the start of each connection for the
	// writer of its qlog trace (JSON-SEQ, qlog.go; odcid is the original
	// destination connection ID, the trace's group); nil: none. The
	// connection closes it when it ends.
	Qlog func(isClient bool, odcid []byte) io.WriteCloser

	// A Listener's defences against handshake floods (RFC 9000 §8.1,
	// §21.1.1.1); clients ignore them. Only an Initial that decrypts under
	// the keys its destination ID gives (RFC 9001 §5.2) creates state.

	// MaxHalfOpen caps the connections whose handshake is not complete;
	// an Initial beyond it is dropped (the client retransmits); default
	// 1024.
	MaxHalfOpen int
	// MaxHalfOpenPerSource caps them per source (an IPv4 address, an IPv6
	// /64), counted apart for the addresses a Retry validated; default 64.
	// Beyond it an Initial without a token gets a Retry, one with a token
	// is dropped.
	MaxHalfOpenPerSource int
	// RequireRetry has every new connection prove its address with a
	// Retry first (RFC 9000 §8.1.2), at the cost of a round trip.
	RequireRetry bool
	// Version is the QUIC version a client dials: Version1 (default) or
	// Version2 (RFC 9369). A Listener speaks both, each connection in
	// its client's.
	Version uint32
	// Versions are compatible version negotiation's (RFC 9368,
	// versionneg.go). A client offers them by preference in its
	// version_information and follows a server that moves it to one
	// (Version, its first flight's, is listed last when left out;
	// default: Version alone). A Listener speaks these (default Version1
	// and Version2) and moves a client to the first of the client's list
	// it speaks.
	Versions []uint32
	// testVersionInfo, set only by tests, rewrites the version_information
	// we send (downgrade prevention's fault injection); nil drops it.
	testVersionInfo func(*VersionInfo) *VersionInfo
	// Allow0RTT has a Listener's session tickets allow early data and
	// accept it (zerortt.go): the application then sees requests that an
	// attacker may replay (RFC 9001 §9.2).
	Allow0RTT bool
	// RetryAboveHalfOpen and RetryAboveRate require a Retry of new
	// connections while more than this many are half-open (default 256)
	// or more than this many handshakes began in the last second
	// (default 1000); negative: never.
	RetryAboveHalfOpen int
	RetryAboveRate     int
}

const (
	minDatagramSize = 1200
	maxDatagramSize = 1452 // the largest we send or advertise reading
	readBufSize     = 1500
)

func (c *Config) withDefaults() (Config, error) {
	var o Config
	if c != nil {
		o = *c
	}
	if o.MinFailureTimeout < 0 {
		return o, fmt.Errorf("mpquic: MinFailureTimeout %v is negative", o.MinFailureTimeout)
	}
	if o.Version == 0 {
		o.Version = Version1
	}
	if !supportedVersion(o.Version) {
		return o, fmt.Errorf("mpquic: QUIC version 0x%08x is not supported (Version1 or Version2)", o.Version)
	}
	if err := validVersions(o.Versions); err != nil {
		return o, err
	}
	if o.Congestion == "" {
		o.Congestion = CongestionCUBIC
	}
	if err := o.Congestion.valid(); err != nil {
		return o, err
	}
	if o.MaxIdleTimeout == 0 {
		o.MaxIdleTimeout = 30 * time.Second
	}
	if o.MaxDatagramSize == 0 {
		o.MaxDatagramSize = 1252
	}
	if o.MaxDatagramSize < minDatagramSize || o.MaxDatagramSize > maxDatagramSize {
		return o, fmt.Errorf("mpquic: MaxDatagramSize %d outside [%d, %d]", o.MaxDatagramSize, minDatagramSize, maxDatagramSize)
	}
	if o.StreamReceiveWindow == 0 {
		o.StreamReceiveWindow = 6 << 20
	}
	if o.ConnectionReceiveWindow == 0 {
		o.ConnectionReceiveWindow = 15 << 20
	}
	if o.SendBuffer <= 0 {
		o.SendBuffer = 1 << 20
	}
	if o.ConnectionSendBuffer <= 0 {
		o.ConnectionSendBuffer = 4 * o.SendBuffer
	}
	if o.MaxIncomingStreams == 0 {
		o.MaxIncomingStreams = 100
	}
	if o.MaxPathID == 0 {
		o.MaxPathID = 3
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	if o.MaxHalfOpen == 0 {
		o.MaxHalfOpen = 1024
	}
	if o.MaxHalfOpenPerSource == 0 {
		o.MaxHalfOpenPerSource = 64
	}
	if o.RetryAboveHalfOpen == 0 {
		o.RetryAboveHalfOpen = 256
	}
	if o.RetryAboveRate == 0 {
		o.RetryAboveRate = 1000
	}
	if o.MaxHalfOpen < 0 || o.MaxHalfOpenPerSource < 0 {
		return o, errors.New("mpquic: negative half-open limit")
	}
	if o.StatelessResetKey == nil {
		o.StatelessResetKey = NewStatelessResetKey()
	}
	if o.MaxIdleTimeout < 0 || o.HandshakeTimeout < 0 {
		return o, errors.New("mpquic: negative timeout")
	}
	return o, nil
}

// ErrIdleTimeout ends a connection that heard nothing from its peer for the
// idle timeout.
var ErrIdleTimeout = errors.New("mpquic: idle timeout")

// ErrHandshakeTimeout ends a connection whose handshake took too long.
var ErrHandshakeTimeout = errors.New("mpquic: handshake timeout")

// ErrVersionNegotiation: the server speaks no version this client does.
var ErrVersionNegotiation = errors.New("mpquic: server does not support QUIC version 1")

// ErrClosed is returned by operations on a connection closed locally.
var ErrClosed = errors.New("mpquic: connection closed")

// ApplicationCloseError is a connection closed by an application with a
// code (CONNECTION_CLOSE 0x1d, RFC 9000 §19.19).
type ApplicationCloseError struct {
	Remote bool
	Code   uint64
	Reason string
}

func (e *ApplicationCloseError) Error() string {
	who := "local"
	if e.Remote {
		who = "peer"
	}
	return fmt.Sprintf("mpquic: %s application closed the connection: code 0x%x %q", who, e.Code, e.Reason)
}

// PeerCloseError is a connection the peer closed with a transport error.
type PeerCloseError struct{ Err *TransportError }

func (e *PeerCloseError) Error() string {
	return "mpquic: peer closed the connection: " + e.Err.Error()
}
func (e *PeerCloseError) Unwrap() error { return e.Err }

// StreamError is a stream reset (RESET_STREAM) or stopped (STOP_SENDING)
// with an application error code.
type StreamError struct {
	StreamID uint64
	Code     uint64
	Remote   bool
}

func (e *StreamError) Error() string {
	who := "locally"
	if e.Remote {
		who = "by the peer"
	}
	return fmt.Sprintf("mpquic: stream %d canceled %s with code 0x%x", e.StreamID, who, e.Code)
}
