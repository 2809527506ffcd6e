package mpquic

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"testing"
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
				case FlowControlError, StreamLimitError, StreamStateError, FinalSizeError:
				default:
					t.Fatalf("%T: code %s: %v", fr, te.Code, err)
				}
				return
			}
			if c.dataRecvd > c.localMaxData {
				t.Fatalf("accepted %d bytes past the connection limit %d", c.dataRecvd, c.localMaxData)
			}
			for _, s := range c.streams {
				if s.recv.contiguous() > s.recv.highest || s.recv.highest > s.recvMax {
					t.Fatalf("stream %d: contiguous %d, highest %d, limit %d", s.id, s.recv.contiguous(), s.recv.highest, s.recvMax)
				}
				if s.finalKnown && s.recv.highest > s.finalSize {
					t.Fatalf("stream %d: data to %d past the final size %d", s.id, s.recv.highest, s.finalSize)
				}
			}
		}
	})
}
