package mpquic

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"
)

// FuzzStreamFrames drives a server connection's stream state with any run
// of STREAM, RESET_STREAM, STOP_SENDING and MAX_STREAM_DATA frames a peer
// could send: it must never panic, must fail only with the stream and
// flow-control codes RFC 9000 §4 and §19.8 name, and while it has not
// failed it must hold its own limits.
func FuzzStreamFrames(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 5, 0, 1, 0, 0, 0})
	f.Add([]byte{0, 4, 0, 0, 200, 0, 1, 0, 1, 4, 0, 0, 100, 0, 0, 0, 2, 4, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 255, 255, 255, 255, 255, 1, 3, 0, 0, 0, 0, 0, 0, 0})
	data := make([]byte, 1<<16)
	f.Fuzz(func(t *testing.T, in []byte) {
		conf, _ := (&Config{StreamReceiveWindow: 1 << 12, ConnectionReceiveWindow: 1 << 13, MaxIncomingStreams: 3}).withDefaults()
		c := newConn(false, nil, nil, conf, &tls.Config{})
		c.peerParams = DefaultTransportParameters()
		c.peerParams.InitialMaxStreamDataBidiLocal = 1 << 20
		for ; len(in) >= 8; in = in[8:] {
			id := uint64(in[1]) // client-initiated and others, small IDs
			off := uint64(binary.BigEndian.Uint16(in[2:4])) << (in[4] % 24)
			n := int(binary.BigEndian.Uint16(in[5:7])) % 5000
			var fr Frame
			switch in[0] % 4 {
			case 0:
				fr = StreamFrame{StreamID: id, Offset: off, Data: data[:n], Fin: in[7]&1 != 0}
			case 1:
				fr = ResetStreamFrame{StreamID: id, ErrorCode: 7, FinalSize: off}
			case 2:
				fr = StopSendingFrame{StreamID: id, ErrorCode: 9}
			case 3:
				fr = MaxStreamDataFrame{StreamID: id, Max: off}
			}
			err := c.handleStreamFrame(fr)
			if err != nil {
				var te *TransportError
				if !errors.As(err, &te) {
					t.Fatalf("%T: untyped error %v", fr, err)
				}
				switch te.Code {
				case FlowControlError, StreamLimitError, StreamStateError, FinalSizeError, ProtocolViolation:
				default:
					t.Fatalf("%T: code %s: %v", fr, te.Code, err)
				}
				return
			}
			if c.dataRecvd > c.localMaxData {
				t.Fatalf("accepted %d bytes past the connection limit %d", c.dataRecvd, c.localMaxData)
			}
			sl, cl := c.gapLimits()
			gaps := 0
			for _, s := range c.streams {
				gaps += s.recv.gaps()
				if s.recv.gaps() > sl {
					t.Fatalf("stream %d holds %d pieces, limit %d", s.id, s.recv.gaps(), sl)
				}
				for i, ch := range s.recv.chunks {
					if ch.off <= s.recv.contiguous() || (i > 0 && ch.off < s.recv.chunks[i-1].end()) {
						t.Fatalf("stream %d: piece %d at %d overlaps (contiguous %d)", s.id, i, ch.off, s.recv.contiguous())
					}
				}
				if s.recv.contiguous() > s.recv.highest || s.recv.highest > s.recvMax {
					t.Fatalf("stream %d: contiguous %d, highest %d, limit %d", s.id, s.recv.contiguous(), s.recv.highest, s.recvMax)
				}
				if s.finalKnown && s.recv.highest > s.finalSize {
					t.Fatalf("stream %d: data to %d past the final size %d", s.id, s.recv.highest, s.finalSize)
				}
			}
			if gaps != c.recvGaps || gaps > cl {
				t.Fatalf("%d pieces held, counted %d, limit %d", gaps, c.recvGaps, cl)
			}
		}
	})
}

// discardConn is a PacketConn that drops what it is given (the fuzzer's
// server writes into it) and never has anything to read.
type discardConn struct{ net.PacketConn }

func (discardConn) WriteTo(b []byte, _ net.Addr) (int, error) { return len(b), nil }
func (discardConn) LocalAddr() net.Addr                       { return &net.UDPAddr{} }

// FuzzServerInitial sends a new server connection one client Initial whose
// plaintext frames are the fuzzer's input, properly protected, so the
// frames reach the connection's frame handling (CRYPTO into TLS, ACK,
// frames not allowed in Initial, ...) and its answer is built. Nothing may
// panic; a failure must close with a *TransportError.
func FuzzServerInitial(f *testing.F) {
	f.Add(append(PingFrame{}.Append(nil), make([]byte, 20)...))
	f.Add(CryptoFrame{Offset: 0, Data: []byte{1, 0, 0, 5, 3, 3, 0, 0, 0}}.Append(nil))
	f.Add(AckFrame{Ranges: []AckRange{{Smallest: 0, Largest: 0}}}.Append(nil))
	f.Add(StreamFrame{StreamID: 0, Data: []byte("x")}.Append(nil))
	f.Add(HandshakeDoneFrame{}.Append(nil))
	stls, _ := testTLS(f)
	dcid, scid := []byte{1, 2, 3, 4, 5, 6, 7, 8}, []byte{8, 7, 6, 5, 4, 3, 2, 1}
	f.Fuzz(func(t *testing.T, payload []byte) {
		if len(payload) > 1400 {
			return
		}
		conf, _ := (*Config)(nil).withDefaults()
		c := newConn(false, discardConn{}, &net.UDPAddr{}, conf, stls)
		c.origDCID, c.p0().dcid = dcid, scid
		if err := c.start(); err != nil {
			t.Fatal(err)
		}
		client, _ := InitialKeys(dcid)
		p := append([]byte(nil), payload...)
		for len(p) < 4 {
			p = append(p, 0)
		}
		hdr, err := AppendLongHeader(nil, LongHeader{Type: PacketInitial, DCID: dcid, SCID: scid}, 0, 2, len(p))
		if err != nil {
			t.Fatal(err)
		}
		pkt, err := client.Protect(nil, hdr, p, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		now := time.Now()
		c.handleDatagram(datagram{b: pkt, from: &net.UDPAddr{}}, now)
		c.sendPackets(now)
		if c.closeErr != nil {
			var te *TransportError
			if !errors.As(c.closeErr, &te) {
				t.Fatalf("closed with %T %v", c.closeErr, c.closeErr)
			}
		}
		c.terminate(ErrClosed)
	})
}

// FuzzMultipathFrames drives a server connection that negotiated multipath
// (path IDs up to 3 on both sides) with any run of frames decoded as a
// 1-RTT payload: it must never panic, must fail only with the codes the
// draft and RFC 9000 name for a bad frame (PROTOCOL_VIOLATION,
// FRAME_ENCODING_ERROR, CONNECTION_ID_LIMIT_ERROR, or a stream code), and
// while it has not failed it must hold its limits: no path above its
// maximum path ID, no more of the peer's IDs than it allows.
func FuzzMultipathFrames(f *testing.F) {
	cid := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	seeds := [][]Frame{
		{PathNewConnectionIDFrame{PathID: 1, Seq: 0, ConnID: cid}, PathStatusFrame{PathID: 1, Seq: 1, Backup: true}},
		{PathAbandonFrame{PathID: 0, ErrorCode: 1}, PathAbandonFrame{PathID: 1}},
		{MaxPathIDFrame{MaxPathID: 9}, PathsBlockedFrame{MaxPathID: 3}, PathCIDsBlockedFrame{PathID: 2, NextSeq: 1}},
		{PathRetireConnectionIDFrame{PathID: 2, Seq: 0}, PathAckFrame{PathID: 1, Ack: AckFrame{Ranges: []AckRange{{Smallest: 0, Largest: 0}}}}},
		{PathNewConnectionIDFrame{PathID: 7, Seq: 0, ConnID: cid}},
	}
	for _, s := range seeds {
		var b []byte
		for _, fr := range s {
			b = fr.Append(b)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		frames, err := ParseFrames(in, Packet1RTT, true)
		if err != nil {
			return // the decoders have FuzzParseFrames
		}
		conf, _ := (&Config{}).withDefaults()
		c := newConn(false, discardConn{}, &net.UDPAddr{}, conf, &tls.Config{})
		c.peerParams = DefaultTransportParameters()
		c.multipath, c.localMaxPathID, c.peerMaxPathID = true, 3, 3
		c.confirmed, c.handshakeComplete = true, true
		c.p0().dcid = cid
		c.issueCIDs()
		now := time.Now()
		for _, fr := range frames {
			switch fr.Type() {
			case FrameAck, FrameAckECN, FrameNewConnectionID, FrameRetireConnectionID, FramePathChallenge, FramePathResponse:
			default:
				if fr.Type() < FramePathAck {
					continue // FuzzStreamFrames and FuzzServerInitial have the others
				}
			}
			if err := c.handleFrame(c.spaces[spaceApp], fr, now); err != nil {
				var te *TransportError
				if !errors.As(err, &te) {
					t.Fatalf("%T: untyped error %v", fr, err)
				}
				switch te.Code {
				case ProtocolViolation, FrameEncodingError, ConnectionIDLimitError:
				default:
					t.Fatalf("%T: code %s: %v", fr, te.Code, err)
				}
				return
			}
			for id, cs := range c.cids {
				if id > c.localMaxPathID {
					t.Fatalf("connection IDs kept for path %d above our maximum %d", id, c.localMaxPathID)
				}
				if len(cs.peer) > DefaultActiveConnIDLimit {
					t.Fatalf("path %d: %d of the peer's IDs kept, limit %d", id, len(cs.peer), DefaultActiveConnIDLimit)
				}
			}
			for id := range c.paths {
				if id > c.localMaxPathID {
					t.Fatalf("path %d above our maximum %d", id, c.localMaxPathID)
				}
			}
		}
	})
}
