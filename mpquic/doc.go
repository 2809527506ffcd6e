// Package mpquic is mptester's own QUIC version 1 stack with the IETF
// multipath extension, written from RFC 9000 (transport), RFC 9001 (TLS and
// packet protection) and draft-ietf-quic-multipath-21, the last draft before
// RFC 10069 (November 2026). Its code points are IANA's permanent ones
// (registered 2026-03-30, as a third-party copy of the registry shows; the
// RFC's own IANA section was not readable here): initial_max_path_id 0x3e,
// PATH_ACK 0x3e-0x3f, PATH_ABANDON 0x3e75 ... PATH_CIDS_BLOCKED 0x3e7c, and
// the path error codes 0x3e, 0x3e75-0x3e77.
//
// The wire layer (internal/wire; mpquic exports its names as its own):
//   - variable-length integers and packet numbers (RFC 9000 §16, §17.1, A.2, A.3)
//   - long and short headers, coalesced packets, Version Negotiation (§17)
//   - every RFC 9000 frame and the draft's multipath frames, with the
//     per-packet-type rule of RFC 9000 §12.4 Table 3 (errors are *TransportError
//     carrying the code a CONNECTION_CLOSE must send)
//   - transport parameters (§18) with initial_max_path_id
//   - in mpquic itself, packet and header protection (RFC 9001 §5): Initial secrets,
//     AES-128-GCM and ChaCha20-Poly1305, and the multipath nonce that puts the
//     path ID into the AEAD nonce (draft §"Nonce Calculation")
//
// On it, QUIC v1 connections (Dial, Listen; conn.go, send.go, stream.go):
// the handshake over crypto/tls.QUICConn, streams with flow control, RFC
// 9002 loss recovery (RTT, sent-packet history, loss detection and PTO in
// internal/recovery) with CUBIC (RFC 9438), HyStart++ (RFC 9406) and
// pacing (internal/congestion, beside New Reno and LIA), key update
// (keyupdate.go), stateless reset (reset.go), anti-amplification per path
// (amplification.go) and qlog traces (qlog.go); and multipath
// (multipath.go, connid.go) when both sides send initial_max_path_id:
// per-path connection IDs, packet number spaces, ACKs (PATH_ACK), RTT,
// loss recovery and CUBIC (uncoupled), Conn.AddPath with path validation,
// a lowest-RTT scheduler with backup paths and reinjection off a
// potentially failed path, PATH_ABANDON, PATH_STATUS_*, MAX_PATH_ID and
// PATHS_BLOCKED. Without multipath, a client moves its one path to a new
// socket with Conn.Migrate (migrate.go: RFC 9000 §9.2, an unused connection
// ID, path validation), and a server follows a client's move or NAT
// rebinding (path.go).
//
// Retry both ways (retry.go): a client follows one Retry (RFC 9000
// §17.2.5); a Listener sends Retries with stateless, expiring tokens bound
// to the client's address when Config.RequireRetry asks, or by itself
// above a half-open count or handshake rate (listener.go), and it creates
// connection state only for Initials that decrypt. A Listener sends a
// session ticket once a handshake completes, so a client with a
// tls.Config.ClientSessionCache resumes (RFC 9001 §4.6); with
// Config.Allow0RTT the ticket allows early data, which DialEarly sends in
// 0-RTT packets (zerortt.go). QUIC version 2 (RFC 9369, version2.go):
// a client dials it with Config.Version; compatible version negotiation
// (RFC 9368, versionneg.go): version_information both ways, a client
// offering Config.Versions is moved by a Listener to the first it speaks,
// downgrades end in VERSION_NEGOTIATION_ERROR. A Version Negotiation
// packet is parsed so that a client fails cleanly. Unidirectional streams (unistream.go) carry HTTP/3's control
// and QPACK streams (package mpquic/h3). The package imports nothing from the rest of mptester but its own internal layers;
// patterns/transport wraps it.
package mpquic
