package mpquic

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/mptester/mptester/mpquic/internal/hextest"
)

var rfcDCID = []byte{0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51, 0x57, 0x08}

// RFC 9001 Appendix A.1.
func TestInitialKeysRFC9001(t *testing.T) {
	client, server := InitialKeys(rfcDCID)
	for _, c := range []struct {
		name        string
		k           *Keys
		secret, key string
		iv, hp      string
	}{
		{"client", client, "c00cf151ca5be075ed0ebfb5c80323c42d6b7db67881289af4008f1f6c357aea",
			"1f369613dd76d5467730efcbe3b1a22d", "fa044b2f42a3fd3b46fb255c", "9f50449e04a0e810283a1e9933adedd2"},
		{"server", server, "3c199828fd139efd216c155ad844cc81fb82fa8d7446fa7d78be803acdda951b",
			"cf3a5331653c364c88f0f379b6067e37", "0ac1493ca1905853b0bba03e", "c206b8d9b9f0f37644430b490eeaa314"},
	} {
		if got := hex.EncodeToString(c.k.secret); got != c.secret {
			t.Errorf("%s secret %s, want %s", c.name, got, c.secret)
		}
		if got := hex.EncodeToString(HKDFExpandLabel(sha256.New, c.k.secret, "quic key", 16)); got != c.key {
			t.Errorf("%s key %s, want %s", c.name, got, c.key)
		}
		if got := hex.EncodeToString(c.k.iv[:]); got != c.iv {
			t.Errorf("%s iv %s, want %s", c.name, got, c.iv)
		}
		if got := hex.EncodeToString(HKDFExpandLabel(sha256.New, c.k.secret, "quic hp", 16)); got != c.hp {
			t.Errorf("%s hp %s, want %s", c.name, got, c.hp)
		}
	}
}

// RFC 9001 Appendix A.2: the client Initial, protected byte for byte, and
// back. The header is built with AppendLongHeader, not copied.
func TestClientInitialRFC9001(t *testing.T) {
	client, _ := InitialKeys(rfcDCID)
	crypto := hextest.Read(t, "rfc9001_a2_crypto.hex")
	payload := make([]byte, 1162)
	copy(payload, crypto) // the rest is PADDING
	want := protectVector(t, client, LongHeader{Type: PacketInitial, DCID: rfcDCID, SCID: []byte{}}, 2, 4, payload, "a2")

	// The server's view: parse, unprotect, parse the frames.
	h, n, err := ParseHeader(want, 0)
	if err != nil || n != len(want) || h.Type != PacketInitial || !bytes.Equal(h.DCID, rfcDCID) {
		t.Fatalf("ParseHeader: %+v %d %v", h, n, err)
	}
	c2, _ := InitialKeys(h.DCID) // the server derives the client keys from the DCID it got
	o, err := c2.Unprotect(bytes.Clone(want), h.PNOffset, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if o.PN != 2 || !bytes.Equal(o.Payload, payload) {
		t.Fatalf("unprotected pn %d, payload equal %v", o.PN, bytes.Equal(o.Payload, payload))
	}
	frames, err := ParseFrames(o.Payload, PacketInitial, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 2 {
		t.Fatalf("frames %d, want CRYPTO + PADDING", len(frames))
	}
	cf, ok := frames[0].(CryptoFrame)
	if !ok || cf.Offset != 0 || len(cf.Data) != 241 {
		t.Fatalf("first frame %T %+v", frames[0], frames[0])
	}
	if p, ok := frames[1].(PaddingFrame); !ok || p.Len != 1162-len(crypto) {
		t.Fatalf("second frame %+v", frames[1])
	}
}

// RFC 9001 Appendix A.3: the server Initial with a 2-byte packet number.
func TestServerInitialRFC9001(t *testing.T) {
	_, server := InitialKeys(rfcDCID)
	payload := hextest.Read(t, "rfc9001_a3_payload.hex")
	scid := hextest.Unhex(t, "f067a5502a4262b5")
	want := protectVector(t, server, LongHeader{Type: PacketInitial, DCID: []byte{}, SCID: scid}, 1, 2, payload, "a3")
	h, _, err := ParseHeader(want, 0)
	if err != nil {
		t.Fatal(err)
	}
	o, err := server.Unprotect(bytes.Clone(want), h.PNOffset, 0, 0)
	if err != nil || o.PN != 1 || !bytes.Equal(o.Payload, payload) {
		t.Fatalf("unprotect: pn %d err %v", o.PN, err)
	}
	frames, err := ParseFrames(o.Payload, PacketInitial, false)
	if err != nil || len(frames) != 2 {
		t.Fatalf("frames %v %v", frames, err)
	}
	if a, ok := frames[0].(AckFrame); !ok || len(a.Ranges) != 1 || a.Ranges[0] != (AckRange{Smallest: 0, Largest: 0}) {
		t.Fatalf("ACK frame %+v", frames[0])
	}
}

// RFC 9001 Appendix A.5: ChaCha20-Poly1305 short header packet.
func TestChaCha20ShortHeaderRFC9001(t *testing.T) {
	secret := hextest.Unhex(t, "9ac312a7f877468ebe69422748ad00a15443f18203a07d6060f688f30f21632b")
	k, err := NewKeys(tls.TLS_CHACHA20_POLY1305_SHA256, secret)
	if err != nil {
		t.Fatal(err)
	}
	for label, want := range map[string]string{
		"quic key": "c6d98ff3441c3fe1b2182094f69caa2ed4b716b65488960a7a984979fb23e1c8",
		"quic hp":  "25a282b9e82f06f21f488917a4fc8f1b73573685608597d0efcb076b0ab7a7a4",
		"quic ku":  "1223504755036d556342ee9361d253421a826c9ecdf3c7148684b36b714881f9",
	} {
		if got := hex.EncodeToString(HKDFExpandLabel(sha256.New, secret, label, 32)); got != want {
			t.Errorf("%s = %s, want %s", label, got, want)
		}
	}
	if got := hex.EncodeToString(k.iv[:]); got != "e0459b3474bdd0e44a41c144" {
		t.Errorf("iv %s", got)
	}
	const pn = 654360564
	if n := k.nonce(0, pn); hex.EncodeToString(n) != "e0459b3474bdd0e46d417eb0" {
		t.Errorf("nonce %x", n)
	}
	if l := PacketNumberLen(pn, pn-40000); l != 3 {
		t.Errorf("packet number length %d, want 3", l)
	}
	hdr, err := AppendShortHeader(nil, ShortHeader{}, pn, 3)
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(hdr) != "4200bff4" {
		t.Fatalf("header %x", hdr)
	}
	pkt, err := k.Protect(nil, hdr, []byte{0x01}, pn, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(pkt); got != "4cfe4189655e5cd55c41f69080575d7999c25a5bfb" {
		t.Fatalf("packet %s", got)
	}
	h, _, err := ParseHeader(pkt, 0)
	if err != nil || h.Type != Packet1RTT || h.PNOffset != 1 {
		t.Fatalf("ParseHeader %+v %v", h, err)
	}
	o, err := k.Unprotect(pkt, 1, pn-1, 0)
	if err != nil || o.PN != pn || !bytes.Equal(o.Payload, []byte{1}) || o.KeyPhase() {
		t.Fatalf("unprotect %+v %v", o, err)
	}
}

// draft-ietf-quic-multipath-21 §"Nonce Calculation" example.
func TestMultipathNonce(t *testing.T) {
	k := &Keys{}
	copy(k.iv[:], hextest.Unhex(t, "6b26114b9cba2b63a9e8dd4f"))
	if n := k.nonce(3, 54321); hex.EncodeToString(n) != "6b2611489cba2b63a9e8097e" {
		t.Fatalf("nonce %x", n)
	}
}

// The same packet number on two paths must not decrypt with the other
// path's nonce: the path ID is bound into the AEAD.
func TestProtectPathIDSeparatesSpaces(t *testing.T) {
	for _, suite := range []uint16{tls.TLS_AES_128_GCM_SHA256, tls.TLS_AES_256_GCM_SHA384, tls.TLS_CHACHA20_POLY1305_SHA256} {
		k, err := NewKeys(suite, bytes.Repeat([]byte{7}, 48)[:32])
		if err != nil {
			t.Fatal(err)
		}
		dcid := []byte{1, 2, 3, 4, 5, 6, 7, 8}
		hdr, _ := AppendShortHeader(nil, ShortHeader{DCID: dcid, KeyPhase: true}, 77, 2)
		payload := []byte("hello multipath world")
		pkt, err := k.Protect(nil, hdr, payload, 77, 5)
		if err != nil {
			t.Fatal(err)
		}
		o, err := k.Unprotect(bytes.Clone(pkt), 1+len(dcid), 70, 5)
		if err != nil || o.PN != 77 || !bytes.Equal(o.Payload, payload) || !o.KeyPhase() {
			t.Fatalf("suite %x: path 5: %+v %v", suite, o, err)
		}
		if _, err := k.Unprotect(bytes.Clone(pkt), 1+len(dcid), 70, 4); !errors.Is(err, ErrDecryptionFailed) {
			t.Fatalf("suite %x: opened on the wrong path: %v", suite, err)
		}
		next, err := k.NextKeys()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := next.Unprotect(bytes.Clone(pkt), 1+len(dcid), 70, 5); !errors.Is(err, ErrDecryptionFailed) {
			t.Fatalf("suite %x: opened with the updated keys: %v", suite, err)
		}
		// After a key update both ends derive the same keys, and header
		// protection is unchanged (RFC 9001 §6.1).
		hdr, _ = AppendShortHeader(nil, ShortHeader{DCID: dcid}, 78, 2)
		pkt2, _ := next.Protect(nil, hdr, payload, 78, 5)
		peerNext, _ := k.NextKeys()
		if o, err := peerNext.Unprotect(pkt2, 1+len(dcid), 77, 5); err != nil || o.PN != 78 || o.KeyPhase() {
			t.Fatalf("suite %x: updated keys: %+v %v", suite, o, err)
		}
		if next.hpKey == nil && next.hpAES != k.hpAES || next.hpKey != nil && !bytes.Equal(next.hpKey, k.hpKey) {
			t.Fatalf("suite %x: header protection key changed on update", suite)
		}
		if bytes.Equal(next.secret, k.secret) || next.iv == k.iv {
			t.Fatalf("suite %x: key update kept the secret or IV", suite)
		}
	}
}

func TestUnprotectReservedBits(t *testing.T) {
	client, _ := InitialKeys(rfcDCID)
	hdr, _ := AppendShortHeader(nil, ShortHeader{DCID: rfcDCID}, 9, 1)
	hdr[0] |= 0x08 // a reserved bit
	pkt, _ := client.Protect(nil, hdr, []byte{1, 0, 0, 0}, 9, 0)
	_, err := client.Unprotect(pkt, 1+len(rfcDCID), 8, 0)
	if !errors.Is(err, &TransportError{Code: ProtocolViolation}) {
		t.Fatalf("err %v, want PROTOCOL_VIOLATION", err)
	}
}

func TestProtectRejectsShortPayload(t *testing.T) {
	client, _ := InitialKeys(rfcDCID)
	hdr, _ := AppendShortHeader(nil, ShortHeader{}, 1, 1)
	if _, err := client.Protect(nil, hdr, []byte{1, 0}, 1, 0); err == nil {
		t.Fatal("no error for a payload too short to sample")
	}
}

// protectVector builds the header of an RFC 9001 Appendix A packet with
// AppendLongHeader, protects the payload and checks both against the RFC's
// bytes (testdata/rfc9001_<name>_header.hex and _packet.hex).
func protectVector(t *testing.T, k *Keys, lh LongHeader, pn uint64, pnLen int, payload []byte, name string) []byte {
	t.Helper()
	hdr, err := AppendLongHeader(nil, lh, pn, pnLen, len(payload))
	if err != nil {
		t.Fatal(err)
	}
	if want := hextest.Read(t, "rfc9001_"+name+"_header.hex"); !bytes.Equal(hdr, want) {
		t.Fatalf("header %x\nwant   %x", hdr, want)
	}
	pkt, err := k.Protect(nil, hdr, payload, pn, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := hextest.Read(t, "rfc9001_"+name+"_packet.hex")
	if !bytes.Equal(pkt, want) {
		t.Fatalf("protected packet differs at byte %d of %d", firstDiff(pkt, want), len(want))
	}
	// In place, with and without room for the tag: the same bytes.
	for _, room := range []int{0, 16} {
		buf := make([]byte, 0, len(hdr)+len(payload)+room)
		buf = append(append(buf, hdr...), payload...)
		inPlace, err := k.ProtectInPlace(buf, len(hdr), pn, 0)
		if err != nil || !bytes.Equal(inPlace, want) {
			t.Fatalf("in place (room %d): differs at byte %d (%v)", room, firstDiff(inPlace, want), err)
		}
		if room == 16 && &inPlace[0] != &buf[0] {
			t.Fatal("in place with room for the tag reallocated")
		}
	}
	return want
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// RFC 9001 Appendix A.4: the Retry packet answering the client Initial.
func TestRetryRFC9001(t *testing.T) {
	retry := hextest.Unhex(t, "ff000000010008f067a5502a4262b5746f6b656e04a265ba2eff4d829058fb3f0f2496ba")
	h, _, err := ParseHeader(retry, 0)
	if err != nil || h.Type != PacketRetry || string(h.Token) != "token" || !bytes.Equal(h.SCID, hextest.Unhex(t, "f067a5502a4262b5")) {
		t.Fatalf("ParseHeader: %+v %v", h, err)
	}
	if !VerifyRetry(retry, rfcDCID) {
		t.Fatal("the RFC's Retry does not verify")
	}
	if VerifyRetry(retry, rfcDCID[:7]) {
		t.Fatal("verified against another connection ID")
	}
	retry[10] ^= 1
	if VerifyRetry(retry, rfcDCID) {
		t.Fatal("a changed Retry verifies")
	}
}
