package wire

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
)

// randFrame builds a random valid frame of type ft; values span every
// varint length so each encoding path is exercised.
func randFrame(rng *rand.Rand, ft FrameType) Frame {
	v := func() uint64 { // a value of random encoded length
		return rng.Uint64N(MaxVarint+1) >> (8 * rng.IntN(8)) & MaxVarint
	}
	small := func(max uint64) uint64 { return v() % (max + 1) }
	data := func() []byte {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	cid := func() []byte {
		b := make([]byte, 1+rng.IntN(MaxConnIDLen))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	var tok [16]byte
	for i := range tok {
		tok[i] = byte(rng.Uint32())
	}
	ack := func() AckFrame {
		n := 1 + rng.IntN(5)
		hi := small(1<<40) + uint64(4*n)
		var a AckFrame
		for i := 0; i < n && hi < 1<<62; i++ {
			lo := hi - rng.Uint64N(min(hi, 3)+1)
			a.Ranges = append(a.Ranges, AckRange{Smallest: lo, Largest: hi})
			if lo < 2 {
				break
			}
			hi = lo - 2 - rng.Uint64N(min(lo-2, 1000)+1)/2
			if hi > lo-2 {
				hi = lo - 2
			}
		}
		a.AckDelay = v()
		if ft&1 != 0 {
			a.ECN = &ECNCounts{v(), v(), v()}
		}
		return a
	}
	switch {
	case ft == FramePadding:
		return PaddingFrame{Len: 1 + rng.IntN(50)}
	case ft == FramePing:
		return PingFrame{}
	case ft == FrameAck || ft == FrameAckECN:
		return ack()
	case ft == FrameResetStream:
		return ResetStreamFrame{v(), v(), v()}
	case ft == FrameStopSending:
		return StopSendingFrame{v(), v()}
	case ft == FrameCrypto:
		return CryptoFrame{Offset: small(1 << 40), Data: data()}
	case ft == FrameNewToken:
		return NewTokenFrame{Token: append([]byte{7}, data()...)}
	case ft >= FrameStream && ft <= FrameStream|7:
		f := StreamFrame{StreamID: v(), Data: data(), Fin: ft&1 != 0, NoLength: ft&2 == 0}
		if ft&4 != 0 {
			f.Offset = 1 + small(1<<40)
		}
		return f
	case ft == FrameMaxData:
		return MaxDataFrame{v()}
	case ft == FrameMaxStreamData:
		return MaxStreamDataFrame{v(), v()}
	case ft == FrameMaxStreamsBidi || ft == FrameMaxStreamsUni:
		return MaxStreamsFrame{Bidi: ft == FrameMaxStreamsBidi, Max: small(maxStreams)}
	case ft == FrameDataBlocked:
		return DataBlockedFrame{v()}
	case ft == FrameStreamDataBlocked:
		return StreamDataBlockedFrame{v(), v()}
	case ft == FrameStreamsBlockedBidi || ft == FrameStreamsBlockedUni:
		return StreamsBlockedFrame{Bidi: ft == FrameStreamsBlockedBidi, Limit: small(maxStreams)}
	case ft == FrameNewConnectionID:
		seq := v()
		return NewConnectionIDFrame{Seq: seq, RetirePriorTo: small(seq), ConnID: cid(), ResetToken: tok}
	case ft == FrameRetireConnectionID:
		return RetireConnectionIDFrame{v()}
	case ft == FramePathChallenge:
		return PathChallengeFrame{[8]byte(tok[:8])}
	case ft == FramePathResponse:
		return PathResponseFrame{[8]byte(tok[8:])}
	case ft == FrameConnectionClose:
		return ConnectionCloseFrame{ErrorCode: v(), FrameType: v(), Reason: string(data())}
	case ft == FrameConnectionCloseApp:
		return ConnectionCloseFrame{Application: true, ErrorCode: v(), Reason: string(data())}
	case ft == FrameHandshakeDone:
		return HandshakeDoneFrame{}
	case ft == FramePathAck || ft == FramePathAckECN:
		return PathAckFrame{PathID: small(MaxPathID), Ack: ack()}
	case ft == FramePathAbandon:
		return PathAbandonFrame{small(MaxPathID), v()}
	case ft == FramePathStatusBackup || ft == FramePathStatusAvailable:
		return PathStatusFrame{PathID: small(MaxPathID), Seq: v(), Backup: ft == FramePathStatusBackup}
	case ft == FramePathNewConnectionID:
		seq := v()
		return PathNewConnectionIDFrame{PathID: small(MaxPathID), Seq: seq, RetirePriorTo: small(seq), ConnID: cid(), ResetToken: tok}
	case ft == FramePathRetireConnectionID:
		return PathRetireConnectionIDFrame{small(MaxPathID), v()}
	case ft == FrameMaxPathID:
		return MaxPathIDFrame{small(MaxPathID)}
	case ft == FramePathsBlocked:
		return PathsBlockedFrame{small(MaxPathID)}
	case ft == FramePathCIDsBlocked:
		return PathCIDsBlockedFrame{small(MaxPathID), v()}
	}
	panic("no generator for frame type " + ft.String())
}

// allFrameTypes is every type RFC 9000 §19 and the draft define.
func allFrameTypes() []FrameType {
	var ts []FrameType
	for t := FramePadding; t <= FrameHandshakeDone; t++ {
		ts = append(ts, t)
	}
	return append(ts, FramePathAck, FramePathAckECN, FramePathAbandon, FramePathStatusBackup,
		FramePathStatusAvailable, FramePathNewConnectionID, FramePathRetireConnectionID,
		FrameMaxPathID, FramePathsBlocked, FramePathCIDsBlocked)
}

// Property: every frame decodes to itself, with the type it was built as,
// consuming exactly its encoding, and also inside a run of frames.
func TestFrameRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, ft := range allFrameTypes() {
		for i := 0; i < 300; i++ {
			f := randFrame(rng, ft)
			if f.Type() != ft {
				t.Fatalf("generator for 0x%x built type 0x%x", uint64(ft), uint64(f.Type()))
			}
			b := f.Append([]byte{0xaa})[1:]
			got, n, err := ParseFrame(b, true)
			if err != nil {
				t.Fatalf("0x%x: %v\n%+v", uint64(ft), err, f)
			}
			if n != len(b) || !reflect.DeepEqual(got, f) {
				t.Fatalf("0x%x: decoded %+v (%d of %d bytes)\nbuilt   %+v", uint64(ft), got, n, len(b), f)
			}
		}
	}
	// A run of random frames (a length-less STREAM frame only last; PADDING
	// not next to PADDING, which would merge) parses back in order.
	for i := 0; i < 200; i++ {
		var want []Frame
		var b []byte
		for j := 0; j < 1+rng.IntN(12); j++ {
			ft := allFrameTypes()[rng.IntN(len(allFrameTypes()))]
			f := randFrame(rng, ft)
			if s, ok := f.(StreamFrame); ok && s.NoLength {
				continue
			}
			if _, ok := f.(PaddingFrame); ok && len(want) > 0 {
				if _, prev := want[len(want)-1].(PaddingFrame); prev {
					continue
				}
			}
			want = append(want, f)
			b = f.Append(b)
		}
		if len(want) == 0 {
			continue
		}
		got, err := ParseFrames(b, Packet1RTT, true)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("run: %v\n got %+v\nwant %+v", err, got, want)
		}
	}
}

func wantCode(t *testing.T, name string, err error, code TransportErrorCode, ft FrameType) {
	t.Helper()
	var te *TransportError
	if !errors.As(err, &te) {
		t.Errorf("%s: err %v, want %s", name, err, code)
		return
	}
	if te.Code != code || te.FrameType != ft {
		t.Errorf("%s: %s in frame 0x%x, want %s in 0x%x", name, te.Code, uint64(te.FrameType), code, uint64(ft))
	}
}

func TestFrameErrors(t *testing.T) {
	tok := make([]byte, 16)
	for _, c := range []struct {
		name string
		b    []byte
		code TransportErrorCode
		ft   FrameType
	}{
		{"unknown type", []byte{0x21}, FrameEncodingError, 0x21},
		{"non-minimal type", []byte{0x40, 0x01}, ProtocolViolation, FramePing},
		{"truncated type", []byte{0x40}, FrameEncodingError, 0},
		{"truncated max_data", []byte{0x10, 0x40}, FrameEncodingError, FrameMaxData},
		{"ack below zero", []byte{0x02, 5, 0, 0, 6}, FrameEncodingError, FrameAck},
		{"ack gap below zero", []byte{0x02, 5, 0, 1, 1, 3, 0}, FrameEncodingError, FrameAck},
		{"ack ecn truncated", []byte{0x03, 5, 0, 0, 0, 1, 1}, FrameEncodingError, FrameAckECN},
		{"empty token", []byte{0x07, 0}, FrameEncodingError, FrameNewToken},
		{"stream past 2^62", append([]byte{0x0e, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2}, 1, 2), FrameEncodingError, 0x0e},
		{"stream data truncated", []byte{0x0a, 0, 5, 1}, FrameEncodingError, 0x0a},
		{"crypto past 2^62", []byte{0x06, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 9}, FrameEncodingError, FrameCrypto},
		{"max_streams 2^60+1", append([]byte{0x12}, AppendVarint(nil, 1<<60+1)...), FrameEncodingError, FrameMaxStreamsBidi},
		{"streams_blocked 2^60+1", append([]byte{0x17}, AppendVarint(nil, 1<<60+1)...), FrameEncodingError, FrameStreamsBlockedUni},
		{"new cid length 0", append([]byte{0x18, 1, 0, 0}, tok...), FrameEncodingError, FrameNewConnectionID},
		{"new cid length 21", append(append([]byte{0x18, 1, 0, 21}, make([]byte, 21)...), tok...), FrameEncodingError, FrameNewConnectionID},
		{"retire prior to above seq", append([]byte{0x18, 1, 2, 1, 9}, tok...), FrameEncodingError, FrameNewConnectionID},
		{"path challenge short", []byte{0x1a, 1, 2, 3}, FrameEncodingError, FramePathChallenge},
		{"close reason truncated", []byte{0x1c, 0, 0, 5, 'a'}, FrameEncodingError, FrameConnectionClose},
		{"max_path_id 2^32", append(AppendVarint(nil, uint64(FrameMaxPathID)), AppendVarint(nil, 1<<32)...), ProtocolViolation, FrameMaxPathID},
		{"path_abandon path 2^32", append(AppendVarint(nil, uint64(FramePathAbandon)), append(AppendVarint(nil, 1<<32), 0)...), ProtocolViolation, FramePathAbandon},
		{"path new cid length 0", append(append(AppendVarint(nil, uint64(FramePathNewConnectionID)), 1, 1, 0, 0), tok...), FrameEncodingError, FramePathNewConnectionID},
		{"path_ack truncated", append(AppendVarint(nil, uint64(FramePathAck)), 1, 5), FrameEncodingError, FramePathAck},
	} {
		_, _, err := ParseFrame(c.b, true)
		wantCode(t, c.name, err, c.code, c.ft)
	}
	// Without multipath negotiated its frames are unknown frames.
	_, _, err := ParseFrame(MaxPathIDFrame{3}.Append(nil), false)
	wantCode(t, "multipath not negotiated", err, FrameEncodingError, FrameMaxPathID)
	_, err = ParseFrames(nil, Packet1RTT, true)
	wantCode(t, "no frames", err, ProtocolViolation, 0)
}

// RFC 9000 §12.4 Table 3, row by row; the draft's frames are 1-RTT only.
func TestFramePacketTypes(t *testing.T) {
	table := map[FrameType]string{ // packet types as Table 3 spells them: I, 0, H, 1
		FramePadding: "IH01", FramePing: "IH01", FrameAck: "IH_1", FrameAckECN: "IH_1",
		FrameResetStream: "__01", FrameStopSending: "__01", FrameCrypto: "IH_1", FrameNewToken: "___1",
		FrameMaxData: "__01", FrameMaxStreamData: "__01", FrameMaxStreamsBidi: "__01", FrameMaxStreamsUni: "__01",
		FrameDataBlocked: "__01", FrameStreamDataBlocked: "__01", FrameStreamsBlockedBidi: "__01",
		FrameStreamsBlockedUni: "__01", FrameNewConnectionID: "__01", FrameRetireConnectionID: "__01",
		FramePathChallenge: "__01", FramePathResponse: "___1", FrameConnectionClose: "IH01",
		FrameConnectionCloseApp: "__01", FrameHandshakeDone: "___1",
	}
	for s := FrameStream; s <= FrameStream|7; s++ {
		table[s] = "__01"
	}
	for _, ft := range allFrameTypes() {
		want, ok := table[ft]
		if !ok {
			want = "___1" // multipath
		}
		for i, pt := range []PacketType{PacketInitial, PacketHandshake, Packet0RTT, Packet1RTT} {
			allowed := want[i] != '_'
			err := CheckFrameAllowed(ft, pt)
			if allowed && err != nil {
				t.Errorf("0x%x in %s: %v", uint64(ft), pt, err)
			}
			if !allowed {
				wantCode(t, "0x"+ft.String()+" in "+pt.String(), err, ProtocolViolation, ft)
			}
		}
	}
	// Through ParseFrames: a STREAM frame in an Initial packet.
	_, err := ParseFrames(StreamFrame{StreamID: 0, Data: []byte("x")}.Append(nil), PacketInitial, false)
	wantCode(t, "STREAM in Initial", err, ProtocolViolation, 0x0a)
	_, err = ParseFrames(PathStatusFrame{PathID: 1, Seq: 1}.Append(nil), PacketHandshake, true)
	wantCode(t, "PATH_STATUS_AVAILABLE in Handshake", err, ProtocolViolation, FramePathStatusAvailable)
}

func TestCloseFrameFor(t *testing.T) {
	_, _, err := ParseFrame([]byte{0x07, 0}, false)
	var te *TransportError
	if !errors.As(err, &te) {
		t.Fatal(err)
	}
	f := CloseFrameFor(te)
	if f.ErrorCode != uint64(FrameEncodingError) || f.FrameType != uint64(FrameNewToken) || f.Application {
		t.Fatalf("%+v", f)
	}
}

// TestAppendFramesStreamsAllocatesNothing: with its slices grown, the
// receiver's decoding of a bulk data packet (two STREAM frames) allocates
// nothing, where ParseFrames boxes each STREAM frame and allocates a slice.
func TestAppendFramesStreamsAllocatesNothing(t *testing.T) {
	pkt := StreamFrame{StreamID: 8, Data: make([]byte, 10)}.Append(nil)
	pkt = StreamFrame{StreamID: 4, Offset: 1 << 20, Data: make([]byte, 1200)}.Append(pkt)
	out, ss := make([]Frame, 0, 4), make([]StreamFrame, 0, 4)
	var err error
	a := testing.AllocsPerRun(100, func() {
		out, ss, err = AppendFramesStreams(out[:0], ss[:0], pkt, Packet1RTT, true)
	})
	if err != nil || len(out) != 2 {
		t.Fatalf("%d frames, %v", len(out), err)
	}
	sf, ok := out[1].(*StreamFrame)
	if !ok || sf.StreamID != 4 || sf.Offset != 1<<20 || len(sf.Data) != 1200 {
		t.Fatalf("frame 1: %#v", out[1])
	}
	if a != 0 {
		t.Errorf("%v allocations per packet, want 0", a)
	}
}
