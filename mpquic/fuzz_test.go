package mpquic

import (
	"bytes"
	"crypto/tls"
	"errors"
	"testing"

	"github.com/mptester/mptester/mpquic/internal/hextest"
)

// FuzzUnprotect feeds arbitrary packets to the Initial (AES) and the RFC
// 9001 A.5 (ChaCha20) keys. Whatever opens must protect back to the very
// same bytes.
func FuzzUnprotect(f *testing.F) {
	f.Add(hextest.Read(f, "rfc9001_a2_packet.hex"), false, int64(-1), uint32(0))
	f.Add(hextest.Unhex(f, "4cfe4189655e5cd55c41f69080575d7999c25a5bfb"), true, int64(654360563), uint32(0))
	f.Add(hextest.Unhex(f, "4cfe4189655e5cd55c41f69080575d7999c25a5bfb"), true, int64(654360563), uint32(1))
	client, _ := InitialKeys(rfcDCID)
	chacha, err := NewKeys(tls.TLS_CHACHA20_POLY1305_SHA256,
		hextest.Unhex(f, "9ac312a7f877468ebe69422748ad00a15443f18203a07d6060f688f30f21632b"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte, useChaCha bool, largest int64, pathID uint32) {
		if largest < -1 || largest > MaxPacketNumber-1 {
			largest = -1
		}
		k, dcidLen := client, len(rfcDCID)
		if useChaCha {
			k, dcidLen = chacha, 0
		}
		b = bytes.Clone(b) // Unprotect works in place; the fuzzer's input must stay intact
		h, n, err := ParseHeader(b, dcidLen)
		if err != nil || h.Type == PacketRetry || h.Type == PacketVersionNegotiation {
			return
		}
		orig := bytes.Clone(b[:n])
		o, err := k.Unprotect(b[:n], h.PNOffset, largest, pathID)
		if err != nil {
			var te *TransportError
			if !errors.Is(err, ErrDecryptionFailed) && !errors.Is(err, ErrInvalidPacket) && !errors.As(err, &te) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		hdr := bytes.Clone(b[:o.HeaderLen])
		again, err := k.Protect(nil, hdr, bytes.Clone(o.Payload), o.PN, pathID)
		if err != nil || !bytes.Equal(again, orig) {
			t.Fatalf("re-protected %x\nwant         %x (%v)", again, orig, err)
		}
	})
}
