package mpquic

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"slices"

	"golang.org/x/crypto/chacha20"
	"golang.org/x/crypto/chacha20poly1305"
)

const (
	tagLen    = 16 // every QUIC v1 AEAD has a 16-byte tag
	sampleLen = 16 // header protection sample (RFC 9001 §5.4.2)
)

// initialSaltV1 is QUIC version 1's Initial salt (RFC 9001 §5.2).
var initialSaltV1 = []byte{0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17,
	0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f, 0x0a}

// ErrDecryptionFailed is an AEAD open failure: RFC 9001 §5.5 has the packet
// dropped, never answered with an error.
var ErrDecryptionFailed = errors.New("packet decryption failed")

// HKDFExpandLabel is TLS 1.3's HKDF-Expand-Label (RFC 8446 §7.1) with an
// empty context, as QUIC uses it (RFC 9001 §5.1).
func HKDFExpandLabel(h func() hash.Hash, secret []byte, label string, length int) []byte {
	full := "tls13 " + label
	info := make([]byte, 0, 4+len(full))
	info = binary.BigEndian.AppendUint16(info, uint16(length))
	info = append(info, byte(len(full)))
	info = append(info, full...)
	info = append(info, 0) // context length
	out, err := hkdf.Expand(h, secret, string(info), length)
	if err != nil {
		panic("mpquic: HKDF-Expand-Label: " + err.Error()) // only for lengths > 255*hash size
	}
	return out
}

// Keys protect or remove protection from packets in one direction at one
// encryption level: the AEAD, its IV and the header protection key. Like a
// cipher.AEAD's buffers, a Keys is used by one goroutine at a time (a
// connection's send or receive loop): it keeps scratch space so that
// protecting a packet allocates nothing.
type Keys struct {
	v2     bool // QUIC version 2's labels (version2.go)
	suite  uint16
	hash   func() hash.Hash
	secret []byte
	aead   cipher.AEAD
	iv     [12]byte
	hpAES  cipher.Block
	hpKey  []byte // ChaCha20 header protection key

	nonceBuf [12]byte
	maskBuf  [16]byte
}

func suiteParams(suite uint16) (h func() hash.Hash, keyLen int, err error) {
	switch suite {
	case tls.TLS_AES_128_GCM_SHA256:
		return sha256.New, 16, nil
	case tls.TLS_AES_256_GCM_SHA384:
		return sha512.New384, 32, nil
	case tls.TLS_CHACHA20_POLY1305_SHA256:
		return sha256.New, 32, nil
	}
	return nil, 0, fmt.Errorf("mpquic: unsupported cipher suite 0x%04x", suite)
}

// NewKeys derives the packet protection keys from a TLS traffic secret
// (RFC 9001 §5.1): "quic key", "quic iv", "quic hp".
func NewKeys(suite uint16, secret []byte) (*Keys, error) {
	return newKeysVersion(suite, secret, Version1)
}

func newKeysVersion(suite uint16, secret []byte, version uint32) (*Keys, error) {
	h, keyLen, err := suiteParams(suite)
	if err != nil {
		return nil, err
	}
	k := &Keys{suite: suite, hash: h, v2: version == Version2}
	if err := k.setSecret(secret, keyLen); err != nil {
		return nil, err
	}
	hp := HKDFExpandLabel(h, secret, k.label("hp"), keyLen)
	if suite == tls.TLS_CHACHA20_POLY1305_SHA256 {
		k.hpKey = hp
	} else if k.hpAES, err = aes.NewCipher(hp); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *Keys) setSecret(secret []byte, keyLen int) error {
	key := HKDFExpandLabel(k.hash, secret, k.label("key"), keyLen)
	copy(k.iv[:], HKDFExpandLabel(k.hash, secret, k.label("iv"), 12))
	k.secret = secret
	if k.suite == tls.TLS_CHACHA20_POLY1305_SHA256 {
		a, err := chacha20poly1305.New(key)
		k.aead = a
		return err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return err
	}
	k.aead, err = cipher.NewGCM(block)
	return err
}

// NextKeys returns the keys after a key update (RFC 9001 §6.1): a new secret
// from "quic ku", new AEAD key and IV, and the same header protection key.
func (k *Keys) NextKeys() (*Keys, error) {
	_, keyLen, _ := suiteParams(k.suite)
	n := &Keys{v2: k.v2, suite: k.suite, hash: k.hash, hpAES: k.hpAES, hpKey: k.hpKey}
	next := HKDFExpandLabel(k.hash, k.secret, k.label("ku"), k.hash().Size())
	if err := n.setSecret(next, keyLen); err != nil {
		return nil, err
	}
	return n, nil
}

// InitialKeys derives both directions' Initial keys from the client's first
// Destination Connection ID (RFC 9001 §5.2).
func InitialKeys(dcid []byte) (client, server *Keys) {
	return InitialKeysVersion(dcid, Version1)
}

// InitialKeysVersion is InitialKeys for a version: 1, or 2 with its own
// salt (RFC 9369 §3.3.1).
func InitialKeysVersion(dcid []byte, version uint32) (client, server *Keys) {
	salt := initialSaltV1
	if version == Version2 {
		salt = initialSaltV2
	}
	initial, err := hkdf.Extract(sha256.New, dcid, salt)
	if err != nil {
		panic("mpquic: HKDF-Extract: " + err.Error())
	}
	c := HKDFExpandLabel(sha256.New, initial, "client in", 32)
	s := HKDFExpandLabel(sha256.New, initial, "server in", 32)
	client, _ = newKeysVersion(tls.TLS_AES_128_GCM_SHA256, c, version)
	server, _ = newKeysVersion(tls.TLS_AES_128_GCM_SHA256, s, version)
	return client, server
}

// clientInitialKeys is InitialKeys' client half only (what a listener
// needs to check a client's first Initial).
func clientInitialKeys(dcid []byte) *Keys {
	k, _ := NewKeys(tls.TLS_AES_128_GCM_SHA256, HKDFExpandLabel(sha256.New, initialSecret(dcid), "client in", 32))
	return k
}

func initialSecret(dcid []byte) []byte {
	initial, err := hkdf.Extract(sha256.New, dcid, initialSaltV1)
	if err != nil {
		panic("mpquic: HKDF-Extract: " + err.Error())
	}
	return initial
}

// nonce forms the AEAD nonce: the IV XOR the path-and-packet-number, i.e.
// the path ID in bytes 0-3 and the packet number in bytes 4-11
// (draft-ietf-quic-multipath-21 §"Nonce Calculation"). Path 0 (and every
// packet without multipath) gives exactly RFC 9001 §5.3's nonce.
func (k *Keys) nonce(pathID uint32, pn uint64) []byte {
	n := k.nonceBuf[:]
	binary.BigEndian.PutUint32(n[0:4], binary.BigEndian.Uint32(k.iv[0:4])^pathID)
	binary.BigEndian.PutUint64(n[4:12], binary.BigEndian.Uint64(k.iv[4:12])^pn)
	return n
}

// mask computes the 5-byte header protection mask from a 16-byte sample
// (RFC 9001 §5.4.3 AES, §5.4.4 ChaCha20).
func (k *Keys) mask(sample []byte) [5]byte {
	var m [5]byte
	if k.hpAES != nil {
		k.hpAES.Encrypt(k.maskBuf[:], sample)
		copy(m[:], k.maskBuf[:5])
		return m
	}
	c, err := chacha20.NewUnauthenticatedCipher(k.hpKey, sample[4:16])
	if err != nil {
		panic("mpquic: chacha20: " + err.Error()) // key and nonce sizes are fixed
	}
	c.SetCounter(binary.LittleEndian.Uint32(sample[0:4]))
	clear(k.maskBuf[:5])
	c.XORKeyStream(k.maskBuf[:5], k.maskBuf[:5])
	copy(m[:], k.maskBuf[:5])
	return m
}

// Protect appends to dst the protected packet made of header (from
// AppendLongHeader or AppendShortHeader, ending with the packet number) and
// the plaintext payload, for packet number pn on the given path (RFC 9001
// §5.3, §5.4). The payload must be long enough for the header protection
// sample: packet number length + payload >= 4 bytes. payload must not lie
// in dst's spare capacity; to build a packet in one buffer use
// ProtectInPlace.
func (k *Keys) Protect(dst, header, payload []byte, pn uint64, pathID uint32) ([]byte, error) {
	pnLen, err := checkProtect(header, len(payload))
	if err != nil {
		return dst, err
	}
	start := len(dst)
	out := append(dst, header...)
	out = k.aead.Seal(out, k.nonce(pathID, pn), payload, out[start:])
	k.protectHeader(out[start:], len(header)-pnLen, pnLen)
	return out, nil
}

// ProtectInPlace protects pkt, which holds the header (ending with the
// packet number) in its first hdrLen bytes and the plaintext payload after
// it, without copying the payload: the result is pkt extended by the AEAD
// tag (allocated only if pkt lacks 16 bytes of spare capacity).
func (k *Keys) ProtectInPlace(pkt []byte, hdrLen int, pn uint64, pathID uint32) ([]byte, error) {
	if hdrLen < 0 || hdrLen > len(pkt) {
		return pkt, fmt.Errorf("mpquic: header length %d of a %d-byte packet", hdrLen, len(pkt))
	}
	pnLen, err := checkProtect(pkt[:hdrLen], len(pkt)-hdrLen)
	if err != nil {
		return pkt, err
	}
	pkt = slices.Grow(pkt, k.aead.Overhead()) // Seal must not allocate elsewhere
	sealed := k.aead.Seal(pkt[hdrLen:hdrLen], k.nonce(pathID, pn), pkt[hdrLen:], pkt[:hdrLen])
	pkt = pkt[:hdrLen+len(sealed)]
	k.protectHeader(pkt, hdrLen-pnLen, pnLen)
	return pkt, nil
}

func checkProtect(header []byte, payloadLen int) (pnLen int, err error) {
	if len(header) == 0 {
		return 0, errors.New("mpquic: empty header")
	}
	pnLen = int(header[0]&3) + 1
	if len(header)-pnLen < 1 {
		return 0, errors.New("mpquic: header shorter than its packet number")
	}
	if pnLen+payloadLen < 4 {
		return 0, fmt.Errorf("mpquic: payload of %d bytes too short for header protection (pad it)", payloadLen)
	}
	return pnLen, nil
}

// protectHeader masks the first byte's low bits and the packet number of a
// sealed packet (RFC 9001 §5.4.1).
func (k *Keys) protectHeader(pkt []byte, pnOffset, pnLen int) {
	m := k.mask(pkt[pnOffset+4 : pnOffset+4+sampleLen])
	if pkt[0]&0x80 != 0 {
		pkt[0] ^= m[0] & 0x0f
	} else {
		pkt[0] ^= m[0] & 0x1f
	}
	for i := 0; i < pnLen; i++ {
		pkt[pnOffset+i] ^= m[1+i]
	}
}

// Opened is a packet whose protection was removed.
type Opened struct {
	FirstByte byte   // unprotected: key phase, packet number length
	PN        uint64 // the full packet number
	HeaderLen int    // header length including the packet number
	Payload   []byte // the plaintext frames, aliasing the packet
}

// KeyPhase is a short header's key phase bit (RFC 9001 §6).
func (o Opened) KeyPhase() bool { return o.FirstByte&0x80 == 0 && o.FirstByte&0x04 != 0 }

// Unprotect removes header and packet protection from packet in place
// (RFC 9001 §5.4, §5.3). pnOffset comes from ParseHeader; largest is the
// largest packet number received in the packet's number space (-1 if none)
// and pathID the path whose space it is. On ErrDecryptionFailed the packet
// is to be dropped (RFC 9001 §5.5); its bytes are then undefined (the AEAD
// clears its output), so a receiver picks the keys from the key phase bit
// before calling, as RFC 9001 §6.3 has it, rather than trying several.
// Non-zero reserved bits after a successful decryption are a connection
// error of type PROTOCOL_VIOLATION (RFC 9000 §17.2, §17.3.1).
func (k *Keys) Unprotect(packet []byte, pnOffset int, largest int64, pathID uint32) (Opened, error) {
	o, err := k.UnprotectHeader(packet, pnOffset, largest)
	if err != nil {
		return o, err
	}
	return k.Open(packet, o, pathID)
}

// UnprotectHeader removes only header protection, in place (RFC 9001
// §5.4): the returned Opened has FirstByte, PN and HeaderLen but no Payload
// yet. A 1-RTT receiver reads the key phase bit from it to pick the keys
// for Open (RFC 9001 §6.3); every key phase shares the header protection key.
func (k *Keys) UnprotectHeader(packet []byte, pnOffset int, largest int64) (Opened, error) {
	var o Opened
	if pnOffset < 1 || len(packet) < pnOffset+4+sampleLen {
		return o, invalid("packet of %d bytes too short to sample at %d", len(packet), pnOffset+4)
	}
	m := k.mask(packet[pnOffset+4 : pnOffset+4+sampleLen])
	long := packet[0]&0x80 != 0
	first := packet[0]
	if long {
		first ^= m[0] & 0x0f
	} else {
		first ^= m[0] & 0x1f
	}
	pnLen := int(first&3) + 1
	var truncated uint64
	for i := 0; i < pnLen; i++ {
		packet[pnOffset+i] ^= m[1+i]
		truncated = truncated<<8 | uint64(packet[pnOffset+i])
	}
	packet[0] = first
	return Opened{FirstByte: first, PN: DecodePacketNumber(largest, truncated, 8*pnLen), HeaderLen: pnOffset + pnLen}, nil
}

// Open decrypts, in place, a packet whose header UnprotectHeader opened.
func (k *Keys) Open(packet []byte, o Opened, pathID uint32) (Opened, error) {
	ct := packet[o.HeaderLen:]
	pt, err := k.aead.Open(ct[:0], k.nonce(pathID, o.PN), ct, packet[:o.HeaderLen])
	if err != nil {
		return o, ErrDecryptionFailed
	}
	o.Payload = pt
	first := o.FirstByte
	if long := first&0x80 != 0; (long && first&0x0c != 0) || (!long && first&0x18 != 0) {
		return o, transportErr(ProtocolViolation, 0, "reserved header bits are 0x%02x", first)
	}
	return o, nil
}

// Overhead is the bytes protection adds to a payload (the AEAD tag).
func (k *Keys) Overhead() int { return k.aead.Overhead() }

// Retry integrity key and nonce of QUIC version 1 (RFC 9001 §5.8).
var (
	retryKeyV1   = [16]byte{0xbe, 0x0c, 0x69, 0x0b, 0x9f, 0x66, 0x57, 0x5a, 0x1d, 0x76, 0x6b, 0x54, 0xe3, 0x68, 0xc8, 0x4e}
	retryNonceV1 = [12]byte{0x46, 0x15, 0x99, 0xd3, 0x5d, 0x63, 0x2b, 0xf2, 0x23, 0x98, 0x25, 0xbb}
)

// VerifyRetry checks a Retry packet's integrity tag against the
// Destination Connection ID of the client's first Initial (RFC 9001 §5.8).
// mptester does not follow Retries, but a client must tell a forged one
// from a real one before failing on it.
func VerifyRetry(packet, originalDCID []byte) bool {
	return verifyRetryVersion(packet, originalDCID, Version1)
}

func verifyRetryVersion(packet, originalDCID []byte, version uint32) bool {
	if len(packet) < tagLen || len(originalDCID) > 255 {
		return false
	}
	gcm := retryAEAD(version)
	nonce := retryNonceV1
	if version == Version2 {
		nonce = retryNonceV2
	}
	body := packet[:len(packet)-tagLen]
	pseudo := make([]byte, 0, 1+len(originalDCID)+len(body))
	pseudo = append(append(append(pseudo, byte(len(originalDCID))), originalDCID...), body...)
	_, err := gcm.Open(nil, nonce[:], packet[len(body):], pseudo)
	return err == nil
}
