package mpquic

// QUIC version 2 (RFC 9369): version 1 with its own Initial salt, key
// derivation labels, Retry integrity key and long-header type bits
// (internal/wire), so that middleboxes do not ossify on version 1's. A
// client dials it with Config.Version; a Listener answers each client in
// the version of its first Initial, or moves it to another it offers
// (compatible version negotiation, versionneg.go).

// initialSaltV2 is QUIC version 2's Initial salt (RFC 9369 §3.3.1).
var initialSaltV2 = []byte{0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93,
	0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb, 0xf9, 0xbd, 0x2e, 0xd9}

// Version 2's Retry integrity key and nonce (RFC 9369 §3.3.3).
var (
	retryKeyV2   = [16]byte{0x8f, 0xb4, 0xb0, 0x1b, 0x56, 0xac, 0x48, 0xe2, 0x60, 0xfb, 0xcb, 0xce, 0xad, 0x7c, 0xcc, 0x92}
	retryNonceV2 = [12]byte{0xd8, 0x69, 0x69, 0xbc, 0x2d, 0x7c, 0x6d, 0x99, 0x90, 0xef, 0xb0, 0x4a}
)

// label is a packet protection key derivation label: "quic key" and so
// on for version 1, "quicv2 key" for version 2 (RFC 9369 §3.3.2).
func (k *Keys) label(l string) string {
	if k.v2 {
		return "quicv2 " + l
	}
	return "quic " + l
}

// supportedVersion: a version we speak.
func supportedVersion(v uint32) bool { return v == Version1 || v == Version2 }

// initialOpensV2 is the listener's check of a version 2 client's first
// Initial (initialCheck is version 1's): it decrypts under the keys its
// destination ID gives. Version 2 clients are few: no fast path.
func initialOpensV2(pkt []byte, h Header) bool {
	client, _ := InitialKeysVersion(h.DCID, Version2)
	return opens(client, pkt, h)
}
