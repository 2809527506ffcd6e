// Package congestion is a QUIC path's congestion control, in bytes: a
// Sender holds the window, slow start with HyStart++ (RFC 9406), recovery
// periods and the reduction on a congestion event (RFC 9002 §7, §7.3,
// §7.8), and a pacer (§7.7); how the window shrinks on a congestion event
// and grows in congestion avoidance is its Controller's, the interface
// that CUBIC (RFC 9438), New Reno (RFC 9002 §7.3.3) and the coupled Linked
// Increases Algorithm of RFC 6356 (LIA, for multipath) implement. It knows
// nothing of packets or frames: the connection tells it what was sent,
// acknowledged and lost.
package congestion
