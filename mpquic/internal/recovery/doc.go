// Package recovery is QUIC loss recovery per RFC 9002, apart from the
// connection that drives it: RTTStats estimates a path's round-trip time
// from ACKs (§5: min_rtt, smoothed_rtt and rttvar, with the peer's
// ack_delay capped at max_ack_delay once the handshake is confirmed);
// History is one packet number space's sent packets awaiting
// acknowledgment, which an ACK frame's ranges remove (Appendix A.7) and
// loss detection by packet and time threshold declares lost (§6.1,
// Appendix A.10); and the probe timeout period with its exponential
// backoff (§6.2, Appendix A.8) is computed here from a path's RTT. Timers,
// what a lost frame means and sending stay with the connection (mpquic),
// which holds an RTTStats per path and a History per packet number space.
package recovery
