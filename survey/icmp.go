package survey

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/mptester/mptester/probe"
)

// icmpProber sends ICMP echo requests from a raw socket bound to the path
// (rawProber). pro-bing is not used: its InterfaceName only sets the
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
	proto := 1
	if f == probe.Family6 {
		proto = 58
	}
	return func(pkt []byte, from netip.Addr) (icmpKey, any, bool) {
		m, err := icmp.ParseMessage(proto, pkt)
		if err != nil || (m.Type != ipv4.ICMPTypeEchoReply && m.Type != ipv6.ICMPTypeEchoReply) {
			return icmpKey{}, nil, false
		}
		e, ok := m.Body.(*icmp.Echo)
		if !ok || uint16(e.ID) != ip.id {
			return icmpKey{}, nil, false
		}
		return icmpKey{addr: from, seq: uint16(e.Seq)}, nil, true
	}
}

func echoReply(any) (AnswerKind, bool) { return AnswerEchoReply, true }

func (ip *icmpProber) Probe(ctx context.Context, t Target) Result {
	return resultWithin(ctx, ip.Start(ctx, t))
}

// Start sends one echo request and returns at once.
func (ip *icmpProber) Start(ctx context.Context, t Target) Pending {
	dst := t.Addr.Unmap()
	var typ icmp.Type = ipv4.ICMPTypeEcho
	if probe.FamilyOf(dst) == probe.Family6 {
		typ = ipv6.ICMPTypeEchoRequest
	}
	return ip.send(ctx, dst, rawPacket[icmpKey]{
		next:  func() icmpKey { return icmpKey{addr: dst, seq: uint16(ip.seq.Add(1))} },
		check: echoReply,
		build: func(_ netip.Addr, k icmpKey) ([]byte, error) {
			msg := icmp.Message{Type: typ, Body: &icmp.Echo{ID: int(ip.id), Seq: int(k.seq), Data: make([]byte, 16)}}
			return msg.Marshal(nil) // the kernel computes the ICMPv6 checksum
		},
		keyName: "ICMP sequence", pktName: "echo request",
	})
}
