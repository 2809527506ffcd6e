package mpquic

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/tls"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"
)

// Packet protection throughput for a full-size 1-RTT packet (8-byte DCID,
// 2-byte packet number, 1200-byte payload). The "aead" rows are the bare
// AEAD on the same bytes: the floor every QUIC stack (quic-go included)
// pays, so protect/aead is this package's own overhead.
const benchPayload = 1200

var benchSuites = []struct {
	name  string
	suite uint16
}{{"AES128GCM", tls.TLS_AES_128_GCM_SHA256}, {"ChaCha20", tls.TLS_CHACHA20_POLY1305_SHA256}}

func benchKeys(b *testing.B, suite uint16) *Keys {
	k, err := NewKeys(suite, bytes.Repeat([]byte{0x5a}, 32))
	if err != nil {
		b.Fatal(err)
	}
	return k
}

var benchDCID = []byte{1, 2, 3, 4, 5, 6, 7, 8}

func BenchmarkProtect(b *testing.B) {
	for _, s := range benchSuites {
		b.Run(s.name, func(b *testing.B) {
			k := benchKeys(b, s.suite)
			payload := make([]byte, benchPayload)
			out := make([]byte, 0, 1500)
			hdr := make([]byte, 0, 32)
			b.SetBytes(benchPayload)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				pn := uint64(i)
				hdr, _ = AppendShortHeader(hdr[:0], ShortHeader{DCID: benchDCID}, pn, 2)
				var err error
				if out, err = k.Protect(out[:0], hdr, payload, pn, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkProtectInPlace seals the payload where the frames were written,
// as a sender building packets in one buffer does.
func BenchmarkProtectInPlace(b *testing.B) {
	for _, s := range benchSuites {
		b.Run(s.name, func(b *testing.B) {
			k := benchKeys(b, s.suite)
			buf := make([]byte, 0, 1500)
			b.SetBytes(benchPayload)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				pn := uint64(i)
				buf, _ = AppendShortHeader(buf[:0], ShortHeader{DCID: benchDCID}, pn, 2)
				hdrLen := len(buf)
				buf = buf[:hdrLen+benchPayload] // the frames (zeros here)
				var err error
				if buf, err = k.ProtectInPlace(buf, hdrLen, pn, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkUnprotect(b *testing.B) {
	for _, s := range benchSuites {
		b.Run(s.name, func(b *testing.B) {
			k := benchKeys(b, s.suite)
			hdr, _ := AppendShortHeader(nil, ShortHeader{DCID: benchDCID}, 1000, 2)
			pkt, _ := k.Protect(nil, hdr, make([]byte, benchPayload), 1000, 1)
			buf := make([]byte, len(pkt))
			b.SetBytes(benchPayload)
			b.ReportAllocs()
			for b.Loop() {
				copy(buf, pkt)
				if _, err := k.Unprotect(buf, 1+len(benchDCID), 999, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAEAD is the bare AEAD seal and open of the same payload.
func BenchmarkAEAD(b *testing.B) {
	key := bytes.Repeat([]byte{0x5a}, 16)
	block, _ := aes.NewCipher(key)
	gcm, _ := cipher.NewGCM(block)
	cc, _ := chacha20poly1305.New(bytes.Repeat([]byte{0x5a}, 32))
	for _, a := range []struct {
		name string
		aead cipher.AEAD
	}{{"AES128GCM", gcm}, {"ChaCha20", cc}} {
		nonce := make([]byte, 12)
		payload := make([]byte, benchPayload)
		ad := make([]byte, 11)
		out := make([]byte, 0, 1500)
		b.Run("seal/"+a.name, func(b *testing.B) {
			b.SetBytes(benchPayload)
			for b.Loop() {
				out = a.aead.Seal(out[:0], nonce, payload, ad)
			}
		})
		sealed := a.aead.Seal(nil, nonce, payload, ad)
		buf := make([]byte, len(sealed))
		b.Run("open/"+a.name, func(b *testing.B) {
			b.SetBytes(benchPayload)
			for b.Loop() {
				copy(buf, sealed)
				if _, err := a.aead.Open(buf[:0], nonce, buf, ad); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
