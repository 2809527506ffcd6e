package wire

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/mptester/mptester/mpquic/internal/hextest"
)

func FuzzParseHeader(f *testing.F) {
	f.Add(hextest.Read(f, "rfc9001_a2_packet.hex"), uint8(0))
	f.Add(hextest.Read(f, "rfc9001_a3_packet.hex"), uint8(0))
	f.Add(hextest.Unhex(f, "4cfe4189655e5cd55c41f69080575d7999c25a5bfb"), uint8(0))
	f.Add(AppendVersionNegotiation(nil, []byte{1}, []byte{2, 3}, Version1, 0x0a0a0a0a), uint8(8))
	f.Add(append(hextest.Read(f, "rfc9001_a3_packet.hex"), hextest.Unhex(f, "4cfe4189655e5cd55c41f69080575d7999c25a5bfb")...), uint8(0))
	f.Add(append([]byte{0xf0, 0, 0, 0, 1, 0, 0}, make([]byte, 20)...), uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, dcidLen uint8) {
		l := int(dcidLen % (MaxConnIDLen + 1))
		h, n, err := ParseHeader(b, l)
		if err == nil {
			if n < 1 || n > len(b) {
				t.Fatalf("packet length %d of %d bytes", n, len(b))
			}
			if (h.Type == PacketInitial || h.Type == PacketHandshake || h.Type == Packet0RTT || h.Type == Packet1RTT) &&
				h.PNOffset+4+sampleLen > n {
				t.Fatalf("%s: pn offset %d leaves no sample in %d bytes", h.Type, h.PNOffset, n)
			}
		} else if !errors.Is(err, ErrInvalidPacket) && !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("unclassified error %v", err)
		}
		pkts, _ := SplitDatagram(b, l)
		total := 0
		for _, p := range pkts {
			total += len(p.Data)
		}
		if total > len(b) {
			t.Fatalf("split into %d of %d bytes", total, len(b))
		}
	})
}

func FuzzParseFrames(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, ft := range allFrameTypes() {
		f.Add(randFrame(rng, ft).Append(nil), uint8(Packet1RTT), true)
	}
	f.Add([]byte{0x02, 5, 0, 1, 1, 3, 0}, uint8(PacketInitial), false)
	f.Add([]byte{0x06, 0, 3, 'a', 'b', 'c', 0, 0, 0}, uint8(PacketHandshake), false)
	f.Fuzz(func(t *testing.T, b []byte, pt uint8, multipath bool) {
		frames, err := ParseFrames(b, PacketType(pt%6), multipath)
		var te *TransportError
		if err != nil && !errors.As(err, &te) {
			t.Fatalf("error %v is not a TransportError", err)
		}
		// Every frame that decoded encodes to a form that decodes to it.
		for _, fr := range frames {
			enc := fr.Append(nil)
			again, n, err := ParseFrame(enc, multipath)
			if err != nil || n != len(enc) || !reflect.DeepEqual(again, fr) {
				t.Fatalf("%+v re-encoded as %x decodes to %+v, %v", fr, enc, again, err)
			}
		}
		// The receiver's path (STREAM frames into a scratch slice, given
		// as pointers) decodes the same frames with the same error.
		fast, _, ferr := AppendFramesStreams(nil, make([]StreamFrame, 0, 1), b, PacketType(pt%6), multipath)
		if !reflect.DeepEqual(errString(ferr), errString(err)) {
			t.Fatalf("AppendFramesStreams error %v, ParseFrames %v", ferr, err)
		}
		if len(fast) != len(frames) {
			t.Fatalf("AppendFramesStreams %d frames, ParseFrames %d", len(fast), len(frames))
		}
		for i, fr := range fast {
			if p, ok := fr.(*StreamFrame); ok {
				fr = *p
			}
			if !reflect.DeepEqual(fr, frames[i]) {
				t.Fatalf("frame %d: AppendFramesStreams %+v, ParseFrames %+v", i, fr, frames[i])
			}
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func FuzzTransportParameters(f *testing.F) {
	full := fullParams()
	f.Add(full.Append(nil), true)
	def := DefaultTransportParameters()
	f.Add(def.Append(nil), false)
	f.Add([]byte{0x3e, 0x01, 0x05, 0x0e, 0x01, 0x04}, false)
	f.Fuzz(func(t *testing.T, b []byte, fromServer bool) {
		p, err := ParseTransportParameters(b, fromServer)
		if err != nil {
			var te *TransportError
			if !errors.As(err, &te) || te.Code != TransportParameterError {
				t.Fatalf("error %v is not TRANSPORT_PARAMETER_ERROR", err)
			}
			return
		}
		again, err := ParseTransportParameters(p.Append(nil), fromServer)
		if err != nil || !reflect.DeepEqual(again, p) {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, again, p)
		}
	})
}

// sampleLen is the header protection sample (RFC 9001 §5.4.2): a
// protected packet must hold it 4 bytes after the packet number's start.
const sampleLen = 16
