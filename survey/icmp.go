package survey

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/mptester/mptester/probe"
)

// icmpProber sends ICMP echo requests from a raw socket bound to the path
// by probe.Path.Control. pro-bing is not used: its InterfaceName only sets
// the outgoing ifindex (IP_PKTINFO), it offers no socket Control hook for
// our one binding place, and it opens a socket and goroutines per target.
type icmpProber struct {
	path  probe.Path
	id    uint16
	seq   atomic.Uint32
	mu    sync.Mutex
	socks map[probe.Family]*icmpSock
}

type icmpKey struct {
	addr netip.Addr
	seq  uint16
}

type icmpSock struct {
	conn *net.IPConn
	f    probe.Family
	dmx  *demux[icmpKey]
}

func newICMPProber(_ context.Context, p probe.Path, _ ProberOptions) (Prober, error) {
	return &icmpProber{path: p, id: uint16(rand.Uint32()), socks: map[probe.Family]*icmpSock{}}, nil
}

func (ip *icmpProber) sock(ctx context.Context, f probe.Family) (*icmpSock, error) {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	if s := ip.socks[f]; s != nil {
		return s, nil
	}
	conn, _, err := probe.ListenRaw(ctx, ip.path, f, "icmp")
	if err != nil {
		return nil, fmt.Errorf("open raw ICMP socket on %s (needs root or CAP_NET_RAW): %w", ip.path.Name, err)
	}
	s := &icmpSock{conn: conn, f: f, dmx: newDemux[icmpKey]()}
	enableRxTimestamps(s.conn)
	ip.socks[f] = s
	go s.recvLoop(ip.id)
	return s, nil
}

func (s *icmpSock) recvLoop(id uint16) {
	buf, oob := make([]byte, 1500), make([]byte, oobSize)
	proto := 1
	if s.f == probe.Family6 {
		proto = 58
	}
	for {
		pkt, a, at, err := readStamped(s.conn, buf, oob)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return
		}
		m, err := icmp.ParseMessage(proto, pkt)
		if err != nil || (m.Type != ipv4.ICMPTypeEchoReply && m.Type != ipv6.ICMPTypeEchoReply) {
			continue
		}
		e, ok := m.Body.(*icmp.Echo)
		if !ok || uint16(e.ID) != id {
			continue
		}
		s.dmx.deliver(icmpKey{addr: a, seq: uint16(e.Seq)}, nil, at)
	}
}

func (ip *icmpProber) Close() error {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	for f, s := range ip.socks {
		s.conn.Close()
		delete(ip.socks, f)
	}
	return nil
}

func echoReply(any) (AnswerKind, bool) { return AnswerEchoReply, true }

func (ip *icmpProber) Probe(ctx context.Context, t Target) Result {
	return resultWithin(ctx, ip.Start(ctx, t))
}

// Start sends one echo request and returns at once.
func (ip *icmpProber) Start(ctx context.Context, t Target) Pending {
	dst := t.Addr.Unmap()
	f := probe.FamilyOf(dst)
	s, err := ip.sock(ctx, f)
	if err != nil {
		return donePending{Status: ProbeError, Err: err}
	}
	var w *waiter
	var seq uint16
	for range 8 {
		seq = uint16(ip.seq.Add(1))
		var ok bool
		if w, ok = s.dmx.register(icmpKey{addr: dst, seq: seq}, echoReply); ok {
			break
		}
	}
	if w == nil {
		return donePending{Status: ProbeError, Err: fmt.Errorf("no free ICMP sequence towards %s", dst)}
	}
	done := func() { s.dmx.unregister(icmpKey{addr: dst, seq: seq}) }
	var typ icmp.Type = ipv4.ICMPTypeEcho
	if f == probe.Family6 {
		typ = ipv6.ICMPTypeEchoRequest
	}
	msg := icmp.Message{Type: typ, Body: &icmp.Echo{ID: int(ip.id), Seq: int(seq), Data: make([]byte, 16)}}
	b, err := msg.Marshal(nil) // the kernel computes the ICMPv6 checksum
	if err != nil {
		done()
		return donePending{Status: ProbeError, Err: err}
	}
	sent := sentNow()
	if _, err := s.conn.WriteToIP(b, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
		done()
		return donePending{Status: classifyErr(err), Err: fmt.Errorf("send echo request: %w", err)}
	}
	return &replyPending{w: w, sent: sent, bytes: len(b) + ipHeader(dst), done: done}
}
