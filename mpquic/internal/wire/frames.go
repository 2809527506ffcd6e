package wire

import "fmt"

// FrameType is a frame's type code (RFC 9000 §19, §12.4 Table 3;
// draft-ietf-quic-multipath-21 §"New Frames").
type FrameType uint64

const (
	FramePadding            FrameType = 0x00
	FramePing               FrameType = 0x01
	FrameAck                FrameType = 0x02
	FrameAckECN             FrameType = 0x03
	FrameResetStream        FrameType = 0x04
	FrameStopSending        FrameType = 0x05
	FrameCrypto             FrameType = 0x06
	FrameNewToken           FrameType = 0x07
	FrameStream             FrameType = 0x08 // 0x08-0x0f: OFF 0x04, LEN 0x02, FIN 0x01
	FrameMaxData            FrameType = 0x10
	FrameMaxStreamData      FrameType = 0x11
	FrameMaxStreamsBidi     FrameType = 0x12
	FrameMaxStreamsUni      FrameType = 0x13
	FrameDataBlocked        FrameType = 0x14
	FrameStreamDataBlocked  FrameType = 0x15
	FrameStreamsBlockedBidi FrameType = 0x16
	FrameStreamsBlockedUni  FrameType = 0x17
	FrameNewConnectionID    FrameType = 0x18
	FrameRetireConnectionID FrameType = 0x19
	FramePathChallenge      FrameType = 0x1a
	FramePathResponse       FrameType = 0x1b
	FrameConnectionClose    FrameType = 0x1c
	FrameConnectionCloseApp FrameType = 0x1d
	FrameHandshakeDone      FrameType = 0x1e

	// Multipath frames, draft-ietf-quic-multipath-21 / RFC 10069 (IANA's permanent codes).
	FramePathAck                FrameType = 0x3e
	FramePathAckECN             FrameType = 0x3f
	FramePathAbandon            FrameType = 0x3e75
	FramePathStatusBackup       FrameType = 0x3e76
	FramePathStatusAvailable    FrameType = 0x3e77
	FramePathNewConnectionID    FrameType = 0x3e78
	FramePathRetireConnectionID FrameType = 0x3e79
	FrameMaxPathID              FrameType = 0x3e7a
	FramePathsBlocked           FrameType = 0x3e7b
	FramePathCIDsBlocked        FrameType = 0x3e7c
)

// MaxPathID is the largest path ID the multipath nonce can carry (draft §"Nonce").
const MaxPathID = 1<<32 - 1

// maxStreams is the largest stream count a MAX_STREAMS or STREAMS_BLOCKED
// frame may carry (RFC 9000 §19.11, §19.14).
const maxStreams = 1 << 60

// A Frame is one decoded frame; Append writes its wire form. Byte slices
// in decoded frames alias the packet payload.
type Frame interface {
	Type() FrameType
	Append(b []byte) []byte
}

type (
	// PaddingFrame is a run of Len PADDING bytes, decoded as one frame.
	PaddingFrame struct{ Len int }
	PingFrame    struct{}
	// AckRange is an acknowledged closed interval of packet numbers.
	AckRange  struct{ Smallest, Largest uint64 }
	ECNCounts struct{ ECT0, ECT1, CE uint64 }
	// AckFrame lists ranges in descending order with gaps of at least one
	// packet between them; AckDelay is the encoded (scaled) value.
	AckFrame struct {
		Ranges   []AckRange
		AckDelay uint64
		ECN      *ECNCounts
	}
	ResetStreamFrame struct{ StreamID, ErrorCode, FinalSize uint64 }
	StopSendingFrame struct{ StreamID, ErrorCode uint64 }
	CryptoFrame      struct {
		Offset uint64
		Data   []byte
	}
	NewTokenFrame struct{ Token []byte }
	// StreamFrame's NoLength leaves out the Length field: the data then
	// runs to the end of the packet, so it must be the packet's last frame.
	StreamFrame struct {
		StreamID, Offset uint64
		Data             []byte
		Fin, NoLength    bool
	}
	MaxDataFrame       struct{ Max uint64 }
	MaxStreamDataFrame struct{ StreamID, Max uint64 }
	MaxStreamsFrame    struct {
		Bidi bool
		Max  uint64
	}
	DataBlockedFrame       struct{ Limit uint64 }
	StreamDataBlockedFrame struct{ StreamID, Limit uint64 }
	StreamsBlockedFrame    struct {
		Bidi  bool
		Limit uint64
	}
	NewConnectionIDFrame struct {
		Seq, RetirePriorTo uint64
		ConnID             []byte
		ResetToken         [16]byte
	}
	RetireConnectionIDFrame struct{ Seq uint64 }
	PathChallengeFrame      struct{ Data [8]byte }
	PathResponseFrame       struct{ Data [8]byte }
	// ConnectionCloseFrame is type 0x1c, or 0x1d when Application is set
	// (then FrameType is absent from the wire).
	ConnectionCloseFrame struct {
		Application bool
		ErrorCode   uint64
		FrameType   uint64
		Reason      string
	}
	HandshakeDoneFrame struct{}

	PathAckFrame struct {
		PathID uint64
		Ack    AckFrame
	}
	PathAbandonFrame struct{ PathID, ErrorCode uint64 }
	// PathStatusFrame is PATH_STATUS_BACKUP when Backup, else
	// PATH_STATUS_AVAILABLE (one sequence number space for both).
	PathStatusFrame struct {
		PathID, Seq uint64
		Backup      bool
	}
	PathNewConnectionIDFrame struct {
		PathID             uint64
		Seq, RetirePriorTo uint64
		ConnID             []byte
		ResetToken         [16]byte
	}
	PathRetireConnectionIDFrame struct{ PathID, Seq uint64 }
	MaxPathIDFrame              struct{ MaxPathID uint64 }
	PathsBlockedFrame           struct{ MaxPathID uint64 }
	PathCIDsBlockedFrame        struct{ PathID, NextSeq uint64 }
)

func (PaddingFrame) Type() FrameType { return FramePadding }
func (f PaddingFrame) Append(b []byte) []byte {
	for i := 0; i < f.Len; i++ {
		b = append(b, 0)
	}
	return b
}

func (PingFrame) Type() FrameType          { return FramePing }
func (PingFrame) Append(b []byte) []byte   { return append(b, byte(FramePing)) }
func (HandshakeDoneFrame) Type() FrameType { return FrameHandshakeDone }
func (HandshakeDoneFrame) Append(b []byte) []byte {
	return append(b, byte(FrameHandshakeDone))
}

func (f AckFrame) Type() FrameType {
	if f.ECN != nil {
		return FrameAckECN
	}
	return FrameAck
}
func (f AckFrame) Append(b []byte) []byte { return f.appendBody(AppendVarint(b, uint64(f.Type()))) }

// appendBody writes the ACK fields after the type (shared with PATH_ACK).
func (f AckFrame) appendBody(b []byte) []byte {
	if len(f.Ranges) == 0 {
		panic("mpquic: ACK frame without ranges")
	}
	first := f.Ranges[0]
	b = AppendVarint(b, first.Largest)
	b = AppendVarint(b, f.AckDelay)
	b = AppendVarint(b, uint64(len(f.Ranges)-1))
	b = AppendVarint(b, first.Largest-first.Smallest)
	prev := first.Smallest
	for _, r := range f.Ranges[1:] {
		b = AppendVarint(b, prev-r.Largest-2) // Gap (RFC 9000 §19.3.1)
		b = AppendVarint(b, r.Largest-r.Smallest)
		prev = r.Smallest
	}
	if f.ECN != nil {
		b = AppendVarint(b, f.ECN.ECT0)
		b = AppendVarint(b, f.ECN.ECT1)
		b = AppendVarint(b, f.ECN.CE)
	}
	return b
}

func (f *AckFrame) parseBody(r *reader, ft FrameType, ecn bool) error {
	largest := r.varint()
	f.AckDelay = r.varint()
	count := r.varint()
	firstLen := r.varint()
	if r.err != nil {
		return r.err
	}
	if firstLen > largest {
		return transportErr(FrameEncodingError, ft, "first ACK range %d below packet 0 (largest %d)", firstLen, largest)
	}
	f.Ranges = []AckRange{{Smallest: largest - firstLen, Largest: largest}}
	prev := largest - firstLen
	for i := uint64(0); i < count; i++ {
		gap, length := r.varint(), r.varint()
		if r.err != nil {
			return r.err
		}
		if gap+2 > prev || prev-gap-2 < length {
			return transportErr(FrameEncodingError, ft, "ACK range %d goes below packet 0", i+1)
		}
		hi := prev - gap - 2
		f.Ranges = append(f.Ranges, AckRange{Smallest: hi - length, Largest: hi})
		prev = hi - length
	}
	if ecn {
		f.ECN = &ECNCounts{ECT0: r.varint(), ECT1: r.varint(), CE: r.varint()}
	}
	return r.err
}

func (ResetStreamFrame) Type() FrameType { return FrameResetStream }
func (f ResetStreamFrame) Append(b []byte) []byte {
	return appendVarints(b, uint64(FrameResetStream), f.StreamID, f.ErrorCode, f.FinalSize)
}
func (StopSendingFrame) Type() FrameType { return FrameStopSending }
func (f StopSendingFrame) Append(b []byte) []byte {
	return appendVarints(b, uint64(FrameStopSending), f.StreamID, f.ErrorCode)
}

func (CryptoFrame) Type() FrameType { return FrameCrypto }
func (f CryptoFrame) Append(b []byte) []byte {
	b = appendVarints(b, uint64(FrameCrypto), f.Offset, uint64(len(f.Data)))
	return append(b, f.Data...)
}

func (NewTokenFrame) Type() FrameType { return FrameNewToken }
func (f NewTokenFrame) Append(b []byte) []byte {
	b = appendVarints(b, uint64(FrameNewToken), uint64(len(f.Token)))
	return append(b, f.Token...)
}

func (f StreamFrame) Type() FrameType {
	t := FrameStream
	if f.Offset != 0 {
		t |= 0x04
	}
	if !f.NoLength {
		t |= 0x02
	}
	if f.Fin {
		t |= 0x01
	}
	return t
}
func (f StreamFrame) Append(b []byte) []byte {
	t := f.Type()
	b = appendVarints(b, uint64(t), f.StreamID)
	if t&0x04 != 0 {
		b = AppendVarint(b, f.Offset)
	}
	if t&0x02 != 0 {
		b = AppendVarint(b, uint64(len(f.Data)))
	}
	return append(b, f.Data...)
}

func (MaxDataFrame) Type() FrameType { return FrameMaxData }
func (f MaxDataFrame) Append(b []byte) []byte {
	return appendVarints(b, uint64(FrameMaxData), f.Max)
}
func (MaxStreamDataFrame) Type() FrameType { return FrameMaxStreamData }
func (f MaxStreamDataFrame) Append(b []byte) []byte {
	return appendVarints(b, uint64(FrameMaxStreamData), f.StreamID, f.Max)
}
func (f MaxStreamsFrame) Type() FrameType {
	if f.Bidi {
		return FrameMaxStreamsBidi
	}
	return FrameMaxStreamsUni
}
func (f MaxStreamsFrame) Append(b []byte) []byte {
	return appendVarints(b, uint64(f.Type()), f.Max)
}
func (DataBlockedFrame) Type() FrameType { return FrameDataBlocked }
func (f DataBlockedFrame) Append(b []byte) []byte {
	return appendVarints(b, uint64(FrameDataBlocked), f.Limit)
}
func (StreamDataBlockedFrame) Type() FrameType { return FrameStreamDataBlocked }
func (f StreamDataBlockedFrame) Append(b []byte) []byte {
	return appendVarints(b, uint64(FrameStreamDataBlocked), f.StreamID, f.Limit)
}
func (f StreamsBlockedFrame) Type() FrameType {
	if f.Bidi {
		return FrameStreamsBlockedBidi
	}
	return FrameStreamsBlockedUni
}
func (f StreamsBlockedFrame) Append(b []byte) []byte {
	return appendVarints(b, uint64(f.Type()), f.Limit)
}

func (NewConnectionIDFrame) Type() FrameType { return FrameNewConnectionID }
func (f NewConnectionIDFrame) Append(b []byte) []byte {
	b = appendVarints(b, uint64(FrameNewConnectionID), f.Seq, f.RetirePriorTo)
	return appendConnIDAndToken(b, f.ConnID, f.ResetToken)
}
func (RetireConnectionIDFrame) Type() FrameType { return FrameRetireConnectionID }
func (f RetireConnectionIDFrame) Append(b []byte) []byte {
	return appendVarints(b, uint64(FrameRetireConnectionID), f.Seq)
}

func (PathChallengeFrame) Type() FrameType { return FramePathChallenge }
func (f PathChallengeFrame) Append(b []byte) []byte {
	return append(append(b, byte(FramePathChallenge)), f.Data[:]...)
}
func (PathResponseFrame) Type() FrameType { return FramePathResponse }
func (f PathResponseFrame) Append(b []byte) []byte {
	return append(append(b, byte(FramePathResponse)), f.Data[:]...)
}

func (f ConnectionCloseFrame) Type() FrameType {
	if f.Application {
		return FrameConnectionCloseApp
	}
	return FrameConnectionClose
}
func (f ConnectionCloseFrame) Append(b []byte) []byte {
	b = appendVarints(b, uint64(f.Type()), f.ErrorCode)
	if !f.Application {
		b = AppendVarint(b, f.FrameType)
	}
	b = AppendVarint(b, uint64(len(f.Reason)))
	return append(b, f.Reason...)
}

// CloseFrameFor is the CONNECTION_CLOSE frame that reports err to the peer.
func CloseFrameFor(err *TransportError) ConnectionCloseFrame {
	return ConnectionCloseFrame{ErrorCode: uint64(err.Code), FrameType: uint64(err.FrameType), Reason: err.Reason}
}

func (f PathAckFrame) Type() FrameType {
	if f.Ack.ECN != nil {
		return FramePathAckECN
	}
	return FramePathAck
}
func (f PathAckFrame) Append(b []byte) []byte {
	return f.Ack.appendBody(appendVarints(b, uint64(f.Type()), f.PathID))
}
func (PathAbandonFrame) Type() FrameType { return FramePathAbandon }
func (f PathAbandonFrame) Append(b []byte) []byte {
	return appendVarints(b, uint64(FramePathAbandon), f.PathID, f.ErrorCode)
}
func (f PathStatusFrame) Type() FrameType {
	if f.Backup {
		return FramePathStatusBackup
	}
	return FramePathStatusAvailable
}
func (f PathStatusFrame) Append(b []byte) []byte {
	return appendVarints(b, uint64(f.Type()), f.PathID, f.Seq)
}
func (PathNewConnectionIDFrame) Type() FrameType { return FramePathNewConnectionID }
func (f PathNewConnectionIDFrame) Append(b []byte) []byte {
	b = appendVarints(b, uint64(FramePathNewConnectionID), f.PathID, f.Seq, f.RetirePriorTo)
	return appendConnIDAndToken(b, f.ConnID, f.ResetToken)
}
func (PathRetireConnectionIDFrame) Type() FrameType { return FramePathRetireConnectionID }
func (f PathRetireConnectionIDFrame) Append(b []byte) []byte {
	return appendVarints(b, uint64(FramePathRetireConnectionID), f.PathID, f.Seq)
}
func (MaxPathIDFrame) Type() FrameType { return FrameMaxPathID }
func (f MaxPathIDFrame) Append(b []byte) []byte {
	return appendVarints(b, uint64(FrameMaxPathID), f.MaxPathID)
}
func (PathsBlockedFrame) Type() FrameType { return FramePathsBlocked }
func (f PathsBlockedFrame) Append(b []byte) []byte {
	return appendVarints(b, uint64(FramePathsBlocked), f.MaxPathID)
}
func (PathCIDsBlockedFrame) Type() FrameType { return FramePathCIDsBlocked }
func (f PathCIDsBlockedFrame) Append(b []byte) []byte {
	return appendVarints(b, uint64(FramePathCIDsBlocked), f.PathID, f.NextSeq)
}

func appendVarints(b []byte, vs ...uint64) []byte {
	for _, v := range vs {
		b = AppendVarint(b, v)
	}
	return b
}

func appendConnIDAndToken(b, cid []byte, token [16]byte) []byte {
	b = append(b, byte(len(cid)))
	b = append(b, cid...)
	return append(b, token[:]...)
}

// ParseFrame decodes the frame at the front of b and returns it with its
// length. Errors are *TransportError: FRAME_ENCODING_ERROR for a truncated,
// malformed or unknown frame, PROTOCOL_VIOLATION where RFC 9000 or the
// draft names it. multipath says whether the extension was negotiated;
// without it its frames are unknown frames (draft §"initial_max_path_id").
func ParseFrame(b []byte, multipath bool) (Frame, int, error) {
	tv, tn, err := ParseVarint(b)
	if err != nil {
		return nil, 0, transportErr(FrameEncodingError, 0, "truncated frame type")
	}
	ft := FrameType(tv)
	if tn != VarintLen(tv) {
		// RFC 9000 §12.4: frame types use the shortest encoding.
		return nil, 0, transportErr(ProtocolViolation, ft, "frame type in %d bytes", tn)
	}
	r := &reader{b: b[tn:]}
	f, err := parseBody(r, ft, multipath)
	if err == nil {
		err = r.err
	}
	if err != nil {
		if _, ok := err.(*TransportError); !ok {
			err = transportErr(FrameEncodingError, ft, "%v", err)
		}
		return nil, 0, err
	}
	return f, len(b) - len(r.b), nil
}

// parseStream decodes the body of a STREAM frame of type ft.
func parseStream(r *reader, ft FrameType) (StreamFrame, error) {
	f := StreamFrame{StreamID: r.varint(), Fin: ft&0x01 != 0, NoLength: ft&0x02 == 0}
	if ft&0x04 != 0 {
		f.Offset = r.varint()
	}
	if f.NoLength {
		f.Data = r.bytes(uint64(len(r.b)))
	} else {
		f.Data = r.bytes(r.varint())
	}
	if r.err == nil && f.Offset+uint64(len(f.Data)) > MaxVarint {
		return f, transportErr(FrameEncodingError, ft, "stream data ends beyond 2^62-1")
	}
	return f, nil
}

func parseBody(r *reader, ft FrameType, multipath bool) (Frame, error) {
	switch {
	case ft == FramePadding:
		n := 1
		for len(r.b) > 0 && r.b[0] == 0 {
			r.b = r.b[1:]
			n++
		}
		return PaddingFrame{Len: n}, nil
	case ft == FramePing:
		return PingFrame{}, nil
	case ft == FrameAck || ft == FrameAckECN:
		var f AckFrame
		err := f.parseInto(r, ft)
		return f, err
	case ft == FrameResetStream:
		return ResetStreamFrame{StreamID: r.varint(), ErrorCode: r.varint(), FinalSize: r.varint()}, nil
	case ft == FrameStopSending:
		return StopSendingFrame{StreamID: r.varint(), ErrorCode: r.varint()}, nil
	case ft == FrameCrypto:
		f := CryptoFrame{Offset: r.varint()}
		f.Data = r.bytes(r.varint())
		if r.err == nil && f.Offset+uint64(len(f.Data)) > MaxVarint {
			return nil, transportErr(FrameEncodingError, ft, "crypto data ends beyond 2^62-1")
		}
		return f, nil
	case ft == FrameNewToken:
		f := NewTokenFrame{Token: r.bytes(r.varint())}
		if r.err == nil && len(f.Token) == 0 {
			return nil, transportErr(FrameEncodingError, ft, "empty token")
		}
		return f, nil
	case ft >= FrameStream && ft <= FrameStream|0x07:
		f, err := parseStream(r, ft)
		if err != nil {
			return nil, err
		}
		return f, nil
	case ft == FrameMaxData:
		return MaxDataFrame{Max: r.varint()}, nil
	case ft == FrameMaxStreamData:
		return MaxStreamDataFrame{StreamID: r.varint(), Max: r.varint()}, nil
	case ft == FrameMaxStreamsBidi || ft == FrameMaxStreamsUni:
		f := MaxStreamsFrame{Bidi: ft == FrameMaxStreamsBidi, Max: r.varint()}
		if f.Max > maxStreams {
			return nil, transportErr(FrameEncodingError, ft, "stream count %d above 2^60", f.Max)
		}
		return f, nil
	case ft == FrameDataBlocked:
		return DataBlockedFrame{Limit: r.varint()}, nil
	case ft == FrameStreamDataBlocked:
		return StreamDataBlockedFrame{StreamID: r.varint(), Limit: r.varint()}, nil
	case ft == FrameStreamsBlockedBidi || ft == FrameStreamsBlockedUni:
		f := StreamsBlockedFrame{Bidi: ft == FrameStreamsBlockedBidi, Limit: r.varint()}
		if f.Limit > maxStreams {
			return nil, transportErr(FrameEncodingError, ft, "stream count %d above 2^60", f.Limit)
		}
		return f, nil
	case ft == FrameNewConnectionID:
		f := NewConnectionIDFrame{Seq: r.varint(), RetirePriorTo: r.varint()}
		var err error
		f.ConnID, f.ResetToken, err = parseConnIDAndToken(r, ft, f.Seq, f.RetirePriorTo)
		return f, err
	case ft == FrameRetireConnectionID:
		return RetireConnectionIDFrame{Seq: r.varint()}, nil
	case ft == FramePathChallenge:
		var f PathChallengeFrame
		copy(f.Data[:], r.bytes(8))
		return f, nil
	case ft == FramePathResponse:
		var f PathResponseFrame
		copy(f.Data[:], r.bytes(8))
		return f, nil
	case ft == FrameConnectionClose || ft == FrameConnectionCloseApp:
		f := ConnectionCloseFrame{Application: ft == FrameConnectionCloseApp, ErrorCode: r.varint()}
		if !f.Application {
			f.FrameType = r.varint()
		}
		f.Reason = string(r.bytes(r.varint()))
		return f, nil
	case ft == FrameHandshakeDone:
		return HandshakeDoneFrame{}, nil
	}
	if multipath {
		if f, ok, err := parseMultipath(r, ft); ok {
			return f, err
		}
	}
	return nil, transportErr(FrameEncodingError, ft, "unknown frame type")
}

func (f *AckFrame) parseInto(r *reader, ft FrameType) error {
	return f.parseBody(r, ft, ft&1 != 0)
}

func parseMultipath(r *reader, ft FrameType) (Frame, bool, error) {
	var f Frame
	var pathID uint64
	switch ft {
	case FramePathAck, FramePathAckECN:
		pa := PathAckFrame{PathID: r.varint()}
		if err := pa.Ack.parseInto(r, ft); err != nil {
			return nil, true, err
		}
		f, pathID = pa, pa.PathID
	case FramePathAbandon:
		pa := PathAbandonFrame{PathID: r.varint(), ErrorCode: r.varint()}
		f, pathID = pa, pa.PathID
	case FramePathStatusBackup, FramePathStatusAvailable:
		ps := PathStatusFrame{PathID: r.varint(), Seq: r.varint(), Backup: ft == FramePathStatusBackup}
		f, pathID = ps, ps.PathID
	case FramePathNewConnectionID:
		pn := PathNewConnectionIDFrame{PathID: r.varint(), Seq: r.varint(), RetirePriorTo: r.varint()}
		var err error
		if pn.ConnID, pn.ResetToken, err = parseConnIDAndToken(r, ft, pn.Seq, pn.RetirePriorTo); err != nil {
			return nil, true, err
		}
		f, pathID = pn, pn.PathID
	case FramePathRetireConnectionID:
		pr := PathRetireConnectionIDFrame{PathID: r.varint(), Seq: r.varint()}
		f, pathID = pr, pr.PathID
	case FrameMaxPathID:
		m := MaxPathIDFrame{MaxPathID: r.varint()}
		f, pathID = m, m.MaxPathID
	case FramePathsBlocked:
		m := PathsBlockedFrame{MaxPathID: r.varint()}
		f, pathID = m, m.MaxPathID
	case FramePathCIDsBlocked:
		m := PathCIDsBlockedFrame{PathID: r.varint(), NextSeq: r.varint()}
		f, pathID = m, m.PathID
	default:
		return nil, false, nil
	}
	// No path ID can exceed the nonce's 32 bits, so a larger one is above any
	// limit an endpoint announced (draft §"New Frames", §"MAX_PATH_ID").
	if r.err == nil && pathID > MaxPathID {
		return nil, true, transportErr(ProtocolViolation, ft, "path ID %d above 2^32-1", pathID)
	}
	return f, true, nil
}

func parseConnIDAndToken(r *reader, ft FrameType, seq, retirePriorTo uint64) ([]byte, [16]byte, error) {
	var token [16]byte
	n := r.byte()
	cid := r.bytes(uint64(n))
	copy(token[:], r.bytes(16))
	if r.err != nil {
		return nil, token, r.err
	}
	// RFC 9000 §19.15: both are FRAME_ENCODING_ERROR.
	if n < 1 || n > MaxConnIDLen {
		return nil, token, transportErr(FrameEncodingError, ft, "connection ID length %d", n)
	}
	if retirePriorTo > seq {
		return nil, token, transportErr(FrameEncodingError, ft, "retire prior to %d above sequence number %d", retirePriorTo, seq)
	}
	return cid, token, nil
}

// Packet types a frame may appear in (RFC 9000 §12.4 Table 3).
const (
	inInitial   = 1 << PacketInitial
	in0RTT      = 1 << Packet0RTT
	inHandshake = 1 << PacketHandshake
	in1RTT      = 1 << Packet1RTT
	ihIn01      = inInitial | inHandshake | in0RTT | in1RTT // "IH01"
	ihIn1       = inInitial | inHandshake | in1RTT          // "IH_1"
	in01        = in0RTT | in1RTT                           // "__01"
)

func allowedIn(ft FrameType) int {
	switch {
	case ft == FramePadding, ft == FramePing, ft == FrameConnectionClose:
		return ihIn01
	case ft == FrameAck, ft == FrameAckECN, ft == FrameCrypto:
		return ihIn1
	case ft == FrameNewToken, ft == FramePathResponse, ft == FrameHandshakeDone:
		return in1RTT
	case ft >= FrameResetStream && ft <= FrameConnectionCloseApp:
		return in01 // the stream, flow control, CID and PATH_CHALLENGE frames, 0x1d
	}
	return in1RTT // the multipath frames: 1-RTT only (draft §"New Frames")
}

// CheckFrameAllowed reports whether a frame of type ft may appear in a
// packet of type pt; if not, the error is PROTOCOL_VIOLATION (RFC 9000
// §12.4, draft-ietf-quic-multipath-21 §"New Frames").
func CheckFrameAllowed(ft FrameType, pt PacketType) error {
	if pt > Packet1RTT || pt == PacketRetry || allowedIn(ft)&(1<<pt) == 0 {
		return transportErr(ProtocolViolation, ft, "frame 0x%x not allowed in a %s packet", uint64(ft), pt)
	}
	return nil
}

// ParseFrames decodes every frame of a packet's plaintext payload and checks
// each is allowed in the packet type. A payload without frames is a
// PROTOCOL_VIOLATION (RFC 9000 §12.4).
func ParseFrames(payload []byte, pt PacketType, multipath bool) ([]Frame, error) {
	return AppendFrames(nil, payload, pt, multipath)
}

// AppendFrames is ParseFrames appending to out, so a receiver can reuse
// one slice for every packet (one allocation less per packet).
func AppendFrames(out []Frame, payload []byte, pt PacketType, multipath bool) ([]Frame, error) {
	out, _, err := AppendFramesStreams(out, nil, payload, pt, multipath)
	return out, err
}

// AppendFramesStreams is AppendFrames with STREAM frames stored in streams
// (returned grown) and given to out as *StreamFrame: a bulk receiver then
// boxes no frame per packet. The pointers stay valid after streams grows
// (they keep the older array), but the caller must not reuse streams while
// it still uses out.
func AppendFramesStreams(out []Frame, streams []StreamFrame, payload []byte, pt PacketType, multipath bool) ([]Frame, []StreamFrame, error) {
	if len(payload) == 0 {
		return out, streams, transportErr(ProtocolViolation, 0, "%s packet without frames", pt)
	}
	for len(payload) > 0 {
		// A STREAM frame's type is one byte (0x08-0x0f, shortest form).
		if ft := FrameType(payload[0]); streams != nil && ft >= FrameStream && ft <= FrameStream|0x07 {
			r := &reader{b: payload[1:]}
			f, err := parseStream(r, ft)
			if err == nil {
				err = r.err
			}
			if err != nil {
				if _, ok := err.(*TransportError); !ok {
					err = transportErr(FrameEncodingError, ft, "%v", err)
				}
				return out, streams, err
			}
			if err := CheckFrameAllowed(ft, pt); err != nil {
				return out, streams, err
			}
			streams = append(streams, f)
			out = append(out, &streams[len(streams)-1])
			payload = r.b
			continue
		}
		f, n, err := ParseFrame(payload, multipath)
		if err != nil {
			return out, streams, err
		}
		if err := CheckFrameAllowed(f.Type(), pt); err != nil {
			return out, streams, err
		}
		out = append(out, f)
		payload = payload[n:]
	}
	return out, streams, nil
}

// String names a frame type for errors and logs.
func (t FrameType) String() string {
	return fmt.Sprintf("0x%x", uint64(t))
}
