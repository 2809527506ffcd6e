package mpquic

// The wire layer (mpquic/internal/wire) under the names mpquic has always
// exported: type aliases, the same constants and variables, and wrappers.

import "github.com/mptester/mptester/mpquic/internal/wire"

// TransportErrorCode is a QUIC transport error code (RFC 9000 §20.1).
type TransportErrorCode = wire.TransportErrorCode

// The RFC 9000 §20.1 codes this layer raises or a connection needs.
const (
	NoError                 = wire.NoError
	InternalError           = wire.InternalError
	ConnectionRefused       = wire.ConnectionRefused
	FlowControlError        = wire.FlowControlError
	StreamLimitError        = wire.StreamLimitError
	StreamStateError        = wire.StreamStateError
	FinalSizeError          = wire.FinalSizeError
	FrameEncodingError      = wire.FrameEncodingError
	TransportParameterError = wire.TransportParameterError
	ConnectionIDLimitError  = wire.ConnectionIDLimitError
	ProtocolViolation       = wire.ProtocolViolation
	InvalidToken            = wire.InvalidToken
	ApplicationError        = wire.ApplicationError
	CryptoBufferExceeded    = wire.CryptoBufferExceeded
	KeyUpdateError          = wire.KeyUpdateError
	AEADLimitReached        = wire.AEADLimitReached
	NoViablePath            = wire.NoViablePath
	VersionNegotiationError = wire.VersionNegotiationError
)

// Path abandon reasons of draft-ietf-quic-multipath-21 §"Error Codes".
const (
	ApplicationAbandonPath   = wire.ApplicationAbandonPath
	PathResourceLimitReached = wire.PathResourceLimitReached
	PathUnstableOrPoor       = wire.PathUnstableOrPoor
	NoCIDAvailableForPath    = wire.NoCIDAvailableForPath
)

// TransportError is a connection error as RFC 9000 §11 defines it: the code
// and the frame type are what the CONNECTION_CLOSE frame (type 0x1c) must
// carry, so the error is built where it is understood and sent as is.
type TransportError = wire.TransportError

// FrameType is a frame's type code (RFC 9000 §19, §12.4 Table 3;
// draft-ietf-quic-multipath-21 §"New Frames").
type FrameType = wire.FrameType

const (
	FramePadding            = wire.FramePadding
	FramePing               = wire.FramePing
	FrameAck                = wire.FrameAck
	FrameAckECN             = wire.FrameAckECN
	FrameResetStream        = wire.FrameResetStream
	FrameStopSending        = wire.FrameStopSending
	FrameCrypto             = wire.FrameCrypto
	FrameNewToken           = wire.FrameNewToken
	FrameStream             = wire.FrameStream // 0x08-0x0f: OFF 0x04, LEN 0x02, FIN 0x01
	FrameMaxData            = wire.FrameMaxData
	FrameMaxStreamData      = wire.FrameMaxStreamData
	FrameMaxStreamsBidi     = wire.FrameMaxStreamsBidi
	FrameMaxStreamsUni      = wire.FrameMaxStreamsUni
	FrameDataBlocked        = wire.FrameDataBlocked
	FrameStreamDataBlocked  = wire.FrameStreamDataBlocked
	FrameStreamsBlockedBidi = wire.FrameStreamsBlockedBidi
	FrameStreamsBlockedUni  = wire.FrameStreamsBlockedUni
	FrameNewConnectionID    = wire.FrameNewConnectionID
	FrameRetireConnectionID = wire.FrameRetireConnectionID
	FramePathChallenge      = wire.FramePathChallenge
	FramePathResponse       = wire.FramePathResponse
	FrameConnectionClose    = wire.FrameConnectionClose
	FrameConnectionCloseApp = wire.FrameConnectionCloseApp
	FrameHandshakeDone      = wire.FrameHandshakeDone
	// Multipath frames, draft-ietf-quic-multipath-21 / RFC 10069 (IANA's permanent codes).
	FramePathAck                = wire.FramePathAck
	FramePathAckECN             = wire.FramePathAckECN
	FramePathAbandon            = wire.FramePathAbandon
	FramePathStatusBackup       = wire.FramePathStatusBackup
	FramePathStatusAvailable    = wire.FramePathStatusAvailable
	FramePathNewConnectionID    = wire.FramePathNewConnectionID
	FramePathRetireConnectionID = wire.FramePathRetireConnectionID
	FrameMaxPathID              = wire.FrameMaxPathID
	FramePathsBlocked           = wire.FramePathsBlocked
	FramePathCIDsBlocked        = wire.FramePathCIDsBlocked
)

// MaxPathID is the largest path ID the multipath nonce can carry (draft §"Nonce").
const MaxPathID = wire.MaxPathID

// A Frame is one decoded frame; Append writes its wire form. Byte slices
// in decoded frames alias the packet payload.
type Frame = wire.Frame

type (
	// PaddingFrame is a run of Len PADDING bytes, decoded as one frame.
	PaddingFrame = wire.PaddingFrame
	PingFrame    = wire.PingFrame
	// AckRange is an acknowledged closed interval of packet numbers.
	AckRange  = wire.AckRange
	ECNCounts = wire.ECNCounts
	// AckFrame lists ranges in descending order with gaps of at least one
	// packet between them; AckDelay is the encoded (scaled) value.
	AckFrame         = wire.AckFrame
	ResetStreamFrame = wire.ResetStreamFrame
	StopSendingFrame = wire.StopSendingFrame
	CryptoFrame      = wire.CryptoFrame
	NewTokenFrame    = wire.NewTokenFrame
	// StreamFrame's NoLength leaves out the Length field: the data then
	// runs to the end of the packet, so it must be the packet's last frame.
	StreamFrame             = wire.StreamFrame
	MaxDataFrame            = wire.MaxDataFrame
	MaxStreamDataFrame      = wire.MaxStreamDataFrame
	MaxStreamsFrame         = wire.MaxStreamsFrame
	DataBlockedFrame        = wire.DataBlockedFrame
	StreamDataBlockedFrame  = wire.StreamDataBlockedFrame
	StreamsBlockedFrame     = wire.StreamsBlockedFrame
	NewConnectionIDFrame    = wire.NewConnectionIDFrame
	RetireConnectionIDFrame = wire.RetireConnectionIDFrame
	PathChallengeFrame      = wire.PathChallengeFrame
	PathResponseFrame       = wire.PathResponseFrame
	// ConnectionCloseFrame is type 0x1c, or 0x1d when Application is set
	// (then FrameType is absent from the wire).
	ConnectionCloseFrame = wire.ConnectionCloseFrame
	HandshakeDoneFrame   = wire.HandshakeDoneFrame
	PathAckFrame         = wire.PathAckFrame
	PathAbandonFrame     = wire.PathAbandonFrame
	// PathStatusFrame is PATH_STATUS_BACKUP when Backup, else
	// PATH_STATUS_AVAILABLE (one sequence number space for both).
	PathStatusFrame             = wire.PathStatusFrame
	PathNewConnectionIDFrame    = wire.PathNewConnectionIDFrame
	PathRetireConnectionIDFrame = wire.PathRetireConnectionIDFrame
	MaxPathIDFrame              = wire.MaxPathIDFrame
	PathsBlockedFrame           = wire.PathsBlockedFrame
	PathCIDsBlockedFrame        = wire.PathCIDsBlockedFrame
)

// CloseFrameFor is the CONNECTION_CLOSE frame that reports err to the peer.
func CloseFrameFor(err *TransportError) ConnectionCloseFrame { return wire.CloseFrameFor(err) }

// ParseFrame decodes the frame at the front of b and returns it with its
// length. Errors are *TransportError: FRAME_ENCODING_ERROR for a truncated,
// malformed or unknown frame, PROTOCOL_VIOLATION where RFC 9000 or the
// draft names it. multipath says whether the extension was negotiated;
// without it its frames are unknown frames (draft §"initial_max_path_id").
func ParseFrame(b []byte, multipath bool) (Frame, int, error) { return wire.ParseFrame(b, multipath) }

// CheckFrameAllowed reports whether a frame of type ft may appear in a
// packet of type pt; if not, the error is PROTOCOL_VIOLATION (RFC 9000
// §12.4, draft-ietf-quic-multipath-21 §"New Frames").
func CheckFrameAllowed(ft FrameType, pt PacketType) error { return wire.CheckFrameAllowed(ft, pt) }

// ParseFrames decodes every frame of a packet's plaintext payload and checks
// each is allowed in the packet type. A payload without frames is a
// PROTOCOL_VIOLATION (RFC 9000 §12.4).
func ParseFrames(payload []byte, pt PacketType, multipath bool) ([]Frame, error) {
	return wire.ParseFrames(payload, pt, multipath)
}

// Version1 is QUIC version 1 (RFC 9000 §15).
const Version1 = wire.Version1

// Version2 is QUIC version 2 (RFC 9369).
const Version2 = wire.Version2

// MaxConnIDLen is the longest connection ID version 1 allows (RFC 9000 §17.2).
const MaxConnIDLen = wire.MaxConnIDLen

// PacketType names the packet kinds of RFC 9000 §17.
type PacketType = wire.PacketType

const (
	PacketInitial            = wire.PacketInitial
	Packet0RTT               = wire.Packet0RTT
	PacketHandshake          = wire.PacketHandshake
	PacketRetry              = wire.PacketRetry
	Packet1RTT               = wire.Packet1RTT
	PacketVersionNegotiation = wire.PacketVersionNegotiation
)

// ErrInvalidPacket marks a packet that must be dropped (RFC 9000 §5.2: an
// unparseable packet is discarded, not answered with an error).
var ErrInvalidPacket = wire.ErrInvalidPacket

// ErrUnsupportedVersion is returned with the header of a long-header packet
// of a version other than 1; a server answers it with Version Negotiation.
var ErrUnsupportedVersion = wire.ErrUnsupportedVersion

// Header is a parsed packet header, still under header protection: the
// reserved bits, key phase and packet number are read by Unprotect. Slices
// alias the parsed buffer.
type Header = wire.Header

// ParseHeader parses the packet at the front of b. A short header carries no
// connection ID length, so the caller says how long its own IDs are
// (shortDCIDLen). n is the length of this packet within b: for long headers
// with a Length field the rest of b may hold coalesced packets (RFC 9000 §12.2).
func ParseHeader(b []byte, shortDCIDLen int) (h Header, n int, err error) {
	return wire.ParseHeader(b, shortDCIDLen)
}

// Packet is one packet of a datagram: its header and its bytes.
type Packet = wire.Packet

// SplitDatagram splits a UDP datagram into its coalesced packets (RFC 9000
// §12.2). A packet that fails to parse ends the split: the packets before it
// are returned with the error, which the caller logs and drops.
func SplitDatagram(b []byte, shortDCIDLen int) ([]Packet, error) {
	return wire.SplitDatagram(b, shortDCIDLen)
}

// ParseVersionNegotiation returns the versions a Version Negotiation packet
// offers (RFC 9000 §17.2.1).
func ParseVersionNegotiation(b []byte) ([]uint32, error) { return wire.ParseVersionNegotiation(b) }

// AppendVersionNegotiation builds a Version Negotiation packet answering a
// packet with the given connection IDs (swapped, RFC 9000 §17.2.1).
func AppendVersionNegotiation(b []byte, dcid, scid []byte, versions ...uint32) []byte {
	return wire.AppendVersionNegotiation(b, dcid, scid, versions...)
}

// LongHeader is what a sender puts in an Initial, 0-RTT or Handshake header.
type LongHeader = wire.LongHeader

// AppendLongHeader appends an unprotected long header ending with the packet
// number, ready for Keys.Protect. payloadLen is the plaintext frames' length;
// the Length field also counts the packet number and the AEAD tag.
func AppendLongHeader(b []byte, h LongHeader, pn uint64, pnLen, payloadLen int) ([]byte, error) {
	return wire.AppendLongHeader(b, h, pn, pnLen, payloadLen)
}

// ShortHeader is what a sender puts in a 1-RTT header.
type ShortHeader = wire.ShortHeader

// AppendShortHeader appends an unprotected 1-RTT header ending with the
// packet number (RFC 9000 §17.3.1).
func AppendShortHeader(b []byte, h ShortHeader, pn uint64, pnLen int) ([]byte, error) {
	return wire.AppendShortHeader(b, h, pn, pnLen)
}

// MaxPacketNumber is the largest packet number (RFC 9000 §12.3).
const MaxPacketNumber = wire.MaxPacketNumber

// PacketNumberLen is how many bytes (1-4) to encode full with, given the
// largest packet number the peer acknowledged in this space, or -1 if none
// (RFC 9000 §17.1 and the algorithm of Appendix A.2): the encoding must span
// more than twice the range of unacknowledged packets.
func PacketNumberLen(full uint64, largestAcked int64) int {
	return wire.PacketNumberLen(full, largestAcked)
}

// DecodePacketNumber recovers a full packet number from its truncated
// nbits-bit encoding and the largest packet number received so far in the
// space, or -1 if none (RFC 9000 Appendix A.3): the candidate closest to
// largest+1.
func DecodePacketNumber(largest int64, truncated uint64, nbits int) uint64 {
	return wire.DecodePacketNumber(largest, truncated, nbits)
}

// Defaults of absent parameters (RFC 9000 §18.2).
const (
	DefaultMaxUDPPayloadSize = wire.DefaultMaxUDPPayloadSize
	DefaultAckDelayExponent  = wire.DefaultAckDelayExponent
	DefaultMaxAckDelay       = wire.DefaultMaxAckDelay
	DefaultActiveConnIDLimit = wire.DefaultActiveConnIDLimit
)

// PreferredAddress is the server's preferred_address (RFC 9000 §18.2).
type PreferredAddress = wire.PreferredAddress

// TransportParameters are one endpoint's parameters. Connection IDs are nil
// when absent (an empty non-nil slice is a present zero-length ID);
// InitialMaxPathID is nil unless the endpoint offers multipath.
type TransportParameters = wire.TransportParameters

// VersionInfo is the version_information transport parameter (RFC 9368).
type VersionInfo = wire.VersionInfo

// DefaultTransportParameters are the values of a peer that sent none.
func DefaultTransportParameters() TransportParameters { return wire.DefaultTransportParameters() }

// ParseTransportParameters decodes the peer's parameters (RFC 9000 §18,
// §7.4). fromServer says who sent them: a client may not send the
// server-only ones. Every violation is a TRANSPORT_PARAMETER_ERROR;
// unknown and reserved parameters are ignored.
func ParseTransportParameters(b []byte, fromServer bool) (TransportParameters, error) {
	return wire.ParseTransportParameters(b, fromServer)
}

// MaxVarint is the largest value a variable-length integer holds (2^62-1).
const MaxVarint = wire.MaxVarint

// VarintLen is the minimal encoded length of v (RFC 9000 §16); v must not
// exceed MaxVarint.
func VarintLen(v uint64) int { return wire.VarintLen(v) }

// AppendVarint appends v in its minimal encoding. It panics above
// MaxVarint: every caller holds values it produced, so that is a bug.
func AppendVarint(b []byte, v uint64) []byte { return wire.AppendVarint(b, v) }

// ParseVarint decodes one variable-length integer from the front of b and
// returns it with the number of bytes it took.
func ParseVarint(b []byte) (uint64, int, error) { return wire.ParseVarint(b) }

func transportErr(code TransportErrorCode, ft FrameType, format string, args ...any) *TransportError {
	return wire.NewError(code, ft, format, args...)
}

func invalid(format string, args ...any) error { return wire.Invalid(format, args...) }
