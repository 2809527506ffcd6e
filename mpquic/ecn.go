package mpquic

import "time"

// ECN (RFC 9000 §13.4, RFC 9002 §7.1, Appendix B.7). Each path marks its
// datagrams ECT(0) while it tests ECN and once it is validated; each packet
// number space counts the codepoints of the packets it received and its
// ACK frames report them (ACK_ECN, PATH_ACK_ECN). The counts the peer
// reports validate the path (§13.4.2.1): a path that clears the marks
// (bleached) or alters them (mangled) stops being marked; on a validated
// path an increase of the CE count is a congestion signal, at most one
// window reduction per round trip like a loss (Sender.OnCE).

// ECN codepoints: the two low bits of the IPv4 TOS or IPv6 traffic class
// byte (RFC 3168 §5).
const (
	ecnNotECT byte = 0
	ecnECT1   byte = 1
	ecnECT0   byte = 2
	ecnCE     byte = 3
	ecnMask   byte = 3
)

// ECNState is where a path's ECN validation stands.
type ECNState int

const (
	// ECNNotTried: the path never marked (ECN disabled, or the socket can
	// neither mark nor read the field: other platforms, wrapped sockets).
	ECNNotTried ECNState = iota
	// ECNTesting: marked packets sent, none of them acknowledged yet.
	ECNTesting
	// ECNValidated: the peer's counts matched what the path carried; the
	// path keeps marking and CE marks reduce its window.
	ECNValidated
	// ECNBleached: marked packets were acknowledged but the peer saw no
	// ECT or CE (a middlebox or the peer cleared the field, or the peer
	// does not report counts); the path stops marking.
	ECNBleached
	// ECNMangled: the counts were inconsistent with what was sent (ECT(1)
	// that we never send, more marks than marked packets, fewer than the
	// marked packets acknowledged, counts going down), or every test
	// packet was lost; the path stops marking.
	ECNMangled
)

func (s ECNState) String() string {
	switch s {
	case ECNTesting:
		return "testing"
	case ECNValidated:
		return "validated"
	case ECNBleached:
		return "bleached"
	case ECNMangled:
		return "mangled"
	}
	return "not-tried"
}

// failed reports whether validation failed (the path no longer marks).
func (s ECNState) failed() bool { return s == ECNBleached || s == ECNMangled }

// ecnTestPackets is how many packets a path marks before its first
// validation (RFC 9000 §13.4.2.1 suggests the first ten): a path that
// drops marked packets then loses ten, not the connection.
const ecnTestPackets = 10

// pathECN is one path's ECN state.
type pathECN struct {
	state    ECNState
	capable  bool   // the socket marks and reads the field (enableECN)
	testSent int    // packets marked while testing
	testLost int    // of them, declared lost
	out      byte   // the codepoint of what sendOnPath is sending now
	ce       uint64 // CE marks the peer reported on this path's packets
	ceEvents uint64 // window reductions those caused
}

// mark is the codepoint of the path's next datagrams.
func (e *pathECN) mark() byte {
	switch {
	case !e.capable:
		return ecnNotECT
	case e.state == ECNValidated:
		return ecnECT0
	case (e.state == ECNNotTried || e.state == ECNTesting) && e.testSent < ecnTestPackets:
		return ecnECT0
	}
	return ecnNotECT
}

// onSent counts a packet sent with the current codepoint.
func (e *pathECN) onSent() {
	if e.out == ecnNotECT {
		return
	}
	if e.state == ECNNotTried {
		e.state = ECNTesting
	}
	if e.state == ECNTesting {
		e.testSent++
	}
}

// onLost counts a marked packet lost: all ten test packets lost is a path
// that drops marked packets (§13.4.2.1).
func (e *pathECN) onLost() {
	if e.state != ECNTesting {
		return
	}
	e.testLost++
	if e.testLost >= ecnTestPackets {
		e.state = ECNMangled
	}
}

// ecnVerdict judges one ACK frame of a space that raised the largest
// acknowledged packet (§13.4.2.1: only those may fail validation): prev
// are the space's counts before it, got the frame's (nil: an ACK frame
// without counts), newlyECT how many packets sent with ECT(0) it newly
// acknowledges, sentECT how many the space sent so marked. It returns the
// outcome (ECNTesting: no verdict, nothing marked newly acknowledged) and
// the increase of the CE count.
func ecnVerdict(prev ECNCounts, got *ECNCounts, newlyECT int, sentECT uint64) (ECNState, uint64) {
	if got == nil {
		if newlyECT > 0 {
			return ECNBleached, 0
		}
		return ECNTesting, 0
	}
	switch {
	case got.ECT0 < prev.ECT0 || got.ECT1 < prev.ECT1 || got.CE < prev.CE:
		return ECNMangled, 0
	case got.ECT1 > 0: // we never send ECT(1)
		return ECNMangled, 0
	case got.ECT0+got.CE > sentECT:
		return ECNMangled, 0
	}
	ce := got.CE - prev.CE
	inc := got.ECT0 - prev.ECT0 + ce
	switch {
	case newlyECT == 0:
		return ECNTesting, ce
	case inc == 0:
		return ECNBleached, 0
	case inc < uint64(newlyECT):
		return ECNMangled, 0
	}
	return ECNValidated, ce
}

// onAckECN validates path sp.path with an ACK frame's counts and takes an
// increase of the CE count as a congestion signal (RFC 9002 §B.7: the
// recovery period starts from the largest newly acknowledged packet's
// send time).
func (c *Conn) onAckECN(sp *pnSpace, got *ECNCounts, newlyECT int, largestSent time.Time, now time.Time) {
	e := &sp.path.ecn
	if e.state == ECNNotTried || e.state.failed() {
		return
	}
	defer c.ecnChanged(sp.path, e.state, now)
	verdict, ce := ecnVerdict(sp.peerECN, got, newlyECT, sp.ectSent)
	if verdict.failed() {
		e.state = verdict
		return
	}
	if got != nil {
		sp.peerECN = *got
	}
	if verdict == ECNValidated {
		e.state = ECNValidated
	}
	e.ce += ce
	if ce > 0 && e.state == ECNValidated {
		reduced := sp.path.cc.OnCE(largestSent, now)
		if reduced {
			e.ceEvents++
		}
		if c.testCE != nil {
			c.testCE(largestSent, now, reduced)
		}
	}
}

// ecnChanged traces a path's ECN state leaving old.
func (c *Conn) ecnChanged(p *path, old ECNState, now time.Time) {
	if c.qlog != nil && p.ecn.state != old {
		c.qlog.ecnUpdated(now, p.id, old, p.ecn.state)
	}
}

// ackECN is the counts an ACK frame of sp reports: nil until a packet
// with an ECN codepoint arrived (an ACK frame, not ACK_ECN).
func (sp *pnSpace) ackECN() *ECNCounts {
	r := &sp.ecnRecv
	if r[ecnECT0] == 0 && r[ecnECT1] == 0 && r[ecnCE] == 0 {
		return nil
	}
	return &ECNCounts{ECT0: r[ecnECT0], ECT1: r[ecnECT1], CE: r[ecnCE]}
}
