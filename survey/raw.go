package survey

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

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
	// health, when set, hears of receive-queue drops and lag.
	health *health
}

type rawSock[K comparable] struct {
	conn   *net.IPConn
	src    netip.Addr
	dmx    *demux[K]
	health *health
	// watermark (Unix ns): every packet that reached the socket before it
	// has been read and handed to its probe; advanced wakes verdicts
	// waiting for it.
	watermark atomic.Int64
	mu        sync.Mutex
	advanced  chan struct{}
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
	s := &rawSock[K]{conn: conn, src: src, dmx: newDemux[K](), health: rp.health}
	s.watermark.Store(time.Now().UnixNano())
	enableRxTimestamps(conn)
	if rp.socks == nil {
		rp.socks = map[probe.Family]*rawSock[K]{}
	}
	rp.socks[f] = s
	parse := rp.parser(f)
	go receive(conn, rxHandler{
		packet: func(pkt []byte, from netip.Addr, at, now time.Time) {
			if s.health != nil {
				s.health.recvLag(now.Sub(at))
			}
			if k, msg, ok := parse(pkt, from); ok {
				s.dmx.deliver(k, msg, at)
			}
		},
		empty: s.drainedUntil,
		drops: func(n uint64, from, to time.Time) {
			if s.health != nil {
				s.health.lostDuring(from, to, n, true)
			}
		},
		fill: func(f float64) {
			if s.health != nil {
				s.health.queueFill(f)
			}
		},
	})
	return s, nil
}

// drainedUntil advances the watermark.
func (s *rawSock[K]) drainedUntil(t time.Time) {
	s.watermark.Store(t.UnixNano())
	s.mu.Lock()
	if s.advanced != nil {
		close(s.advanced)
		s.advanced = nil
	}
	s.mu.Unlock()
}

// drained waits until every reply that reached the socket before deadline
// has been handed to its probe; false when that took more than
// maxVerdictWait (the host is overloaded) or ctx ended.
func (s *rawSock[K]) drained(ctx context.Context, deadline time.Time) bool {
	dl := deadline.UnixNano()
	var tm *time.Timer
	for s.watermark.Load() < dl {
		s.mu.Lock()
		if s.advanced == nil {
			s.advanced = make(chan struct{})
		}
		ch := s.advanced
		s.mu.Unlock()
		if s.watermark.Load() >= dl {
			break
		}
		if tm == nil {
			tm = time.NewTimer(time.Until(deadline.Add(maxVerdictWait)))
			defer tm.Stop()
		}
		select {
		case <-ch:
		case <-tm.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// rxHandler receives what a socket's receive loop reads: each packet with
// its kernel arrival time and the time it is processed; empty(t) each time
// the queue was found empty (every arrival before t has been read); the
// receive queue's drops, which happened in (from, to]; and, while it has
// a backlog, how full it is (0..1).
type rxHandler struct {
	packet func(pkt []byte, from netip.Addr, at, now time.Time)
	empty  func(t time.Time)
	drops  func(n uint64, from, to time.Time)
	fill   func(f float64)
}

// rxTick is how often an idle receive loop looks at its queue, so the
// watermark (and with it the verdicts waiting on it) keeps advancing.
const rxTick = 10 * time.Millisecond

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
	build            func(b []byte, src netip.Addr, k K) []byte // appends the packet to b
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
	var buf [64]byte
	pkt := p.build(buf[:0], s.src, k)
	sent := sentNow()
	if _, err := s.conn.WriteToIP(pkt, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
		done()
		if hostRefused(err) && s.health != nil {
			s.health.sendFailed(sent)
		}
		return donePending{Status: classifyErr(err), Err: fmt.Errorf("send %s: %w", p.pktName, err), HostSuspect: hostRefused(err)}
	}
	return &replyPending{w: w, sent: sent, bytes: len(pkt) + ipHeader(dst), replyBytes: p.replyBytes, done: done, drained: s.drained}
}

// hostRefused says a send failed because the host ran out of buffers: the
// probe never left, which says nothing about the target.
func hostRefused(err error) bool {
	return errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOMEM)
}
