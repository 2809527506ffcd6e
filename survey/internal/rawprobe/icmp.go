package rawprobe

import (
	"context"
	"math/rand/v2"
	"net/netip"

	"github.com/mptester/mptester/probe"
)

// icmpProber sends ICMP echo requests from a raw socket bound to the path
// (rawProber), built and read by hand (packets.go). pro-bing is not used: its InterfaceName only sets the
// outgoing ifindex (IP_PKTINFO), it offers no socket Control hook for our
// one binding place, and it opens a socket and goroutines per target
// (docs/architecture.md).
type icmpProber struct {
	rawProber
}

func newICMPProber(_ context.Context, p probe.Path, opts Options) (Engine, error) {
	return &icmpProber{rawProber{path: p, proto: "icmp", health: opts.Health, hint: "needs root or CAP_NET_RAW",
		codec: icmpCodec{id: uint16(rand.Uint32())}}}, nil
}

// icmpCodec: the identifier is the prober's, the sequence number the slot
// index and the data starts with the slot's token (RFC 792: the reply
// echoes identifier, sequence number and data).
type icmpCodec struct{ id uint16 }

func (icmpCodec) sport() uint16 { return 0 }

func (c icmpCodec) build(b []byte, _ netip.Addr, s *rawSlot, idx uint32) []byte {
	return appendEcho(b, s.dst.Is6(), c.id, uint16(idx), s.token)
}

// match accepts echo replies carrying our identifier.
func (c icmpCodec) match(pkt []byte, v6 bool) (idx, token uint32, sport, dport uint16, kind AnswerKind, ok bool) {
	id, seq, token, ok := parseEchoReply(pkt, v6)
	if !ok || id != c.id {
		return 0, 0, 0, 0, "", false
	}
	return uint32(seq), token, 0, 0, AnswerEchoReply, true
}

func (icmpCodec) replyBytes(AnswerKind, netip.Addr) int { return 0 }

func (icmpCodec) pktName() string { return "echo request" }
