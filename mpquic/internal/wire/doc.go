// Package wire holds QUIC's wire formats, pure functions of bytes with no
// connection state: variable-length integers (RFC 9000 §16), packet number
// encoding and decoding (§17.1, Appendix A.2-A.3), long and short headers,
// coalesced packets, Retry and Version Negotiation layouts (§12.2, §17),
// every RFC 9000 frame (§19) and the multipath frames of
// draft-ietf-quic-multipath-21 with the per-packet-type rule of §12.4
// Table 3, transport parameters (§18) with initial_max_path_id, and the
// transport error codes (§20.1) as *TransportError, which carries what a
// CONNECTION_CLOSE must send. Packet protection is not here (mpquic's
// protection.go). mpquic exports these names as its own.
package wire
