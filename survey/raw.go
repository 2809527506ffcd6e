package survey

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"

	"github.com/mptester/mptester/probe"
)

// rawProber is what tcp-syn and icmp share: one raw socket per family,
// bound to the path by probe.ListenRaw and opened on first use with kernel
// receive timestamps; one receive loop per socket handing the replies it
// recognizes to the waiting probe (demux); and the register-send step of a
// probe. K identifies the probe a reply answers.
type rawProber[K comparable] struct {
	path  probe.Path
	proto string // probe.ListenRaw's protocol: "tcp" or "icmp"
	hint  string // appended to an open error: what to do about it
	// parser returns a receive loop's parse function (one per loop, so it
	// may reuse decoding state): the key of the probe a packet answers and
	// the message that probe's check sees; false drops the packet.
	parser func(f probe.Family) func(pkt []byte, from netip.Addr) (K, any, bool)

	mu    sync.Mutex
	socks map[probe.Family]*rawSock[K]
}

type rawSock[K comparable] struct {
	conn *net.IPConn
	src  netip.Addr
	dmx  *demux[K]
}

func (rp *rawProber[K]) sock(ctx context.Context, f probe.Family) (*rawSock[K], error) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if s := rp.socks[f]; s != nil {
		return s, nil
	}
	conn, src, err := probe.ListenRaw(ctx, rp.path, f, rp.proto)
	if err != nil {
		return nil, fmt.Errorf("open raw %s socket on %s (%s): %w", strings.ToUpper(rp.proto), rp.path.Name, rp.hint, err)
	}
	s := &rawSock[K]{conn: conn, src: src, dmx: newDemux[K]()}
	enableRxTimestamps(conn)
	if rp.socks == nil {
		rp.socks = map[probe.Family]*rawSock[K]{}
	}
	rp.socks[f] = s
	go s.recvLoop(rp.parser(f))
	return s, nil
}

func (s *rawSock[K]) recvLoop(parse func([]byte, netip.Addr) (K, any, bool)) {
	buf, oob := make([]byte, 1500), make([]byte, oobSize)
	for {
		pkt, from, at, err := readStamped(s.conn, buf, oob)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return // closed
		}
		if k, msg, ok := parse(pkt, from); ok {
			s.dmx.deliver(k, msg, at)
		}
	}
}

func (rp *rawProber[K]) Close() error {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	for f, s := range rp.socks {
		s.conn.Close()
		delete(rp.socks, f)
	}
	return nil
}

// rawPacket describes one probe to send: next yields candidate keys until
// one is not in use (8 tries), check accepts its reply, build makes the
// packet for the key, replyBytes (optional) counts what the host sends
// by itself in answer to a reply; keyName and pktName word the errors.
type rawPacket[K comparable] struct {
	next             func() K
	check            func(any) (AnswerKind, bool)
	build            func(src netip.Addr, k K) ([]byte, error)
	replyBytes       func(AnswerKind) int
	keyName, pktName string
}

// send registers the probe, sends its packet to dst and returns at once.
func (rp *rawProber[K]) send(ctx context.Context, dst netip.Addr, p rawPacket[K]) Pending {
	s, err := rp.sock(ctx, probe.FamilyOf(dst))
	if err != nil {
		return donePending{Status: ProbeError, Err: err}
	}
	var w *waiter
	var k K
	for range 8 {
		k = p.next()
		var ok bool
		if w, ok = s.dmx.register(k, p.check); ok {
			break
		}
	}
	if w == nil {
		return donePending{Status: ProbeError, Err: fmt.Errorf("no free %s towards %s", p.keyName, dst)}
	}
	done := func() { s.dmx.unregister(k) }
	pkt, err := p.build(s.src, k)
	if err != nil {
		done()
		return donePending{Status: ProbeError, Err: err}
	}
	sent := sentNow()
	if _, err := s.conn.WriteToIP(pkt, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
		done()
		return donePending{Status: classifyErr(err), Err: fmt.Errorf("send %s: %w", p.pktName, err)}
	}
	return &replyPending{w: w, sent: sent, bytes: len(pkt) + ipHeader(dst), replyBytes: p.replyBytes, done: done}
}
