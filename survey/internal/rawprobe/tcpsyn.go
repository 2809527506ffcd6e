package rawprobe

import (
	"net/netip"
	"sync/atomic"
)

// Source ports come from above the default ephemeral range (32768-60999)
// so they do not collide with the host's own connections.
const (
	synPortBase  = 61000
	synPortCount = 65535 - synPortBase
)

// synCodec: a SYN's sequence number is token<<16 | slot index, so the
// acknowledgment number of a SYN-ACK or RST (RFC 793 §3.4: seq+1) names
// its probe.
type synCodec struct{ port atomic.Uint32 }

func (c *synCodec) sport() uint16 { return uint16(synPortBase + c.port.Add(1)%synPortCount) }

func (*synCodec) build(b []byte, src netip.Addr, s *rawSlot, idx uint32) []byte {
	return appendSYN(b, src, s.dst, s.sport, s.dport, s.token<<16|idx)
}

// match reads TCP headers (the raw socket sees every TCP packet to the
// host): a SYN-ACK or RST acknowledging one of our sequence numbers.
func (*synCodec) match(pkt []byte, _ bool) (idx, token uint32, sport, dport uint16, kind AnswerKind, ok bool) {
	h, ok := parseTCP(pkt)
	if !ok || h.flags&tcpACK == 0 {
		return 0, 0, 0, 0, "", false
	}
	switch {
	case h.flags&tcpRST != 0:
		kind = AnswerRST
	case h.flags&tcpSYN != 0:
		kind = AnswerSynAck
	default:
		return 0, 0, 0, 0, "", false
	}
	seq := h.ack - 1
	return seq & 0xffff, seq >> 16, h.dport, h.sport, kind, true
}

// The kernel knows no connection for a SYN-ACK and resets it.
func (*synCodec) replyBytes(k AnswerKind, dst netip.Addr) int {
	if k == AnswerSynAck {
		return IPTCPHeader(dst)
	}
	return 0
}

func (*synCodec) pktName() string { return "SYN" }
