package survey

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"

	"github.com/mptester/mptester/probe"
)

// icmpProber sends ICMP echo requests from a raw socket bound to the path
// (rawProber), built and read by hand (packets.go). pro-bing is not used: its InterfaceName only sets the
// outgoing ifindex (IP_PKTINFO), it offers no socket Control hook for our
// one binding place, and it opens a socket and goroutines per target
// (docs/architecture.md).
type icmpProber struct {
	rawProber[icmpKey]
	id  uint16
	seq atomic.Uint32
}

type icmpKey struct {
	addr netip.Addr
	seq  uint16
}

func newICMPProber(_ context.Context, p probe.Path, opts ProberOptions) (Prober, error) {
	ip := &icmpProber{id: uint16(rand.Uint32())}
	ip.rawProber = rawProber[icmpKey]{path: p, proto: "icmp", health: opts.health, hint: "needs root or CAP_NET_RAW", parser: ip.parser}
	return ip, nil
}

// parser accepts echo replies carrying our identifier.
func (ip *icmpProber) parser(f probe.Family) func([]byte, netip.Addr) (icmpKey, any, bool) {
	v6 := f == probe.Family6
	return func(pkt []byte, from netip.Addr) (icmpKey, any, bool) {
		id, seq, ok := parseEchoReply(pkt, v6)
		if !ok || id != ip.id {
			return icmpKey{}, nil, false
		}
		return icmpKey{addr: from, seq: seq}, nil, true
	}
}

func echoReply(any) (AnswerKind, bool) { return AnswerEchoReply, true }

func (ip *icmpProber) Probe(ctx context.Context, t Target) Result {
	return resultWithin(ctx, ip.Start(ctx, t))
}

// Start sends one echo request and returns at once.
func (ip *icmpProber) Start(ctx context.Context, t Target) Pending {
	dst := t.Addr.Unmap()
	v6 := probe.FamilyOf(dst) == probe.Family6
	return ip.send(ctx, dst, rawPacket[icmpKey]{
		next:    func() icmpKey { return icmpKey{addr: dst, seq: uint16(ip.seq.Add(1))} },
		check:   echoReply,
		build:   func(b []byte, _ netip.Addr, k icmpKey) []byte { return appendEcho(b, v6, ip.id, k.seq) },
		keyName: "ICMP sequence", pktName: "echo request",
	})
}
