package rawprobe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
// receive timestamps; its receive queue drained by the probe loop (a
// receive goroutine outside Linux); and a table of probe
// slots. A probe's slot index travels in its packet (the SYN's sequence
// number, the echo request's sequence number) with a random 16-bit token, so a
// reply finds its probe by index, checked against the slot's destination,
// ports and token: no map, no lock held across a send, nothing allocated
// per probe.
type rawProber struct {
	path  probe.Path
	proto string // probe.ListenRaw's protocol: "tcp" or "icmp"
	hint  string // appended to an open error: what to do about it
	codec rawCodec
	// health, when set, hears of receive-queue drops and lag.
	health HostMonitor

	mu    sync.Mutex // socks, slots, free, done, wake
	socks map[probe.Family]*rawSock
	slots []rawSlot
	free  []uint32
	done  []uint32 // answered slots not yet handed to Answered()
	wake  func()
	// Scratch of SendBatch (one caller at a time: the event loop, or
	// Probe under sendMu).
	sendMu sync.Mutex
	out    []rawOut
}

// The survey's loop finds a Batch by a type assertion: the compiler
// checks here that the raw engines are one.
var _ Batch = (*rawProber)(nil)

// rawCodec is a method's packet format.
type rawCodec interface {
	// build appends the probe packet of slot s (index idx) to b.
	build(b []byte, src netip.Addr, s *rawSlot, idx uint32) []byte
	// match reads a reply: the slot it claims, the token, ports and
	// answer to check against that slot; false: not a reply to us.
	match(pkt []byte, v6 bool) (idx, token uint32, sport, dport uint16, kind AnswerKind, ok bool)
	// sport picks a probe's source port; 0: the method has no ports.
	sport() uint16
	// replyBytes is what the host sends by itself because of an answer
	// (the kernel's RST to a SYN-ACK).
	replyBytes(k AnswerKind, dst netip.Addr) int
	pktName() string
}

// maxSlots: a slot index has 16 bits in the packet.
const maxSlots = 1 << 16

// Slot states.
const (
	slotFree uint8 = iota
	slotPending
	slotAnswered
)

type rawSlot struct {
	dst          netip.Addr
	sock         *rawSock
	sent, at     int64 // Unix ns; at: the reply's kernel time
	cookie       uint64
	token        uint32
	sport, dport uint16
	state        uint8
	kind         AnswerKind
	waiter       chan struct{} // Probe's; nil for the event loop's probes
}

// rawOut is one packet of a batch being sent.
type rawOut struct {
	req  int // index in the batch
	sock *rawSock
	dst  netip.Addr
	pkt  [64]byte
	n    int
	sent time.Time
	err  error
}

type rawSock struct {
	conn   rawConn
	rx     rxDrainer // nil: a receive goroutine reads the socket
	src    netip.Addr
	v6     bool
	health HostMonitor
	// watermark (Unix ns): every packet that reached the socket before it
	// has been read and handed to its probe.
	watermark atomic.Int64
}

func (rp *rawProber) sock(ctx context.Context, f probe.Family) (*rawSock, error) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if s := rp.socks[f]; s != nil {
		return s, nil
	}
	conn, src, err := openRaw(ctx, rp.path, f, rp.proto)
	if err != nil {
		return nil, fmt.Errorf("open raw %s socket on %s (%s): %w", strings.ToUpper(rp.proto), rp.path.Name, rp.hint, err)
	}
	s := &rawSock{conn: conn, src: src, v6: f == probe.Family6, health: rp.health}
	s.watermark.Store(time.Now().UnixNano())
	enableRxTimestamps(conn)
	if rp.socks == nil {
		rp.socks = map[probe.Family]*rawSock{}
	}
	rp.socks[f] = s
	s.rx = startRx(conn, rxHandler{
		packet: func(pkt []byte, from netip.Addr, at, now time.Time) {
			if s.health != nil {
				s.health.RecvLag(now.Sub(at))
			}
			rp.deliver(s, pkt, from, at)
		},
		empty: func(t time.Time) { s.watermark.Store(t.UnixNano()) },
		drops: func(n uint64, from, to time.Time) {
			if s.health != nil {
				s.health.LostDuring(from, to, n, true)
			}
		},
		fill: func(f float64) {
			if s.health != nil {
				s.health.QueueFill(f)
			}
		},
	})
	return s, nil
}

// deliver hands a packet that answers a pending probe to it.
func (rp *rawProber) deliver(s *rawSock, pkt []byte, from netip.Addr, at time.Time) {
	idx, token, sport, dport, kind, ok := rp.codec.match(pkt, s.v6)
	if !ok {
		return
	}
	rp.mu.Lock()
	if int(idx) >= len(rp.slots) {
		rp.mu.Unlock()
		return
	}
	sl := &rp.slots[idx]
	if sl.state != slotPending || sl.sock != s || sl.token != token || sl.sport != sport || sl.dport != dport || sl.dst != from {
		rp.mu.Unlock()
		return
	}
	sl.state, sl.at, sl.kind = slotAnswered, at.UnixNano(), kind
	var wake func()
	if sl.waiter != nil {
		close(sl.waiter)
	} else {
		if len(rp.done) == 0 {
			wake = rp.wake
		}
		rp.done = append(rp.done, idx)
	}
	rp.mu.Unlock()
	if wake != nil {
		wake()
	}
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

// rawConn is an open raw socket.
type rawConn interface {
	syscall.Conn
	Close() error
}

// rxDrainer is a socket's receive queue the caller drains (Linux).
type rxDrainer interface{ drain() }

// rxTick is how often a receive goroutine (other systems) looks at its
// idle queue, so the watermark (and with it the verdicts waiting on it)
// keeps advancing; RxPoll is how soon the probe loop looks again at a
// socket whose watermark a verdict waits for.
const (
	rxTick = 10 * time.Millisecond
	RxPoll = 4 * time.Millisecond
)

// Poll drains the sockets' receive queues (where the caller does that)
// into the slots. Called by the probe loop at each wake-up.
func (rp *rawProber) Poll() {
	var qs [2]rxDrainer
	n := 0
	rp.mu.Lock()
	for _, s := range rp.socks {
		if s.rx != nil && n < len(qs) {
			qs[n] = s.rx
			n++
		}
	}
	rp.mu.Unlock()
	for _, q := range qs[:n] {
		q.drain()
	}
}

// Close closes the sockets, outside rp.mu: closing waits for a receive
// loop's read to return, and that read may be waiting for rp.mu.
func (rp *rawProber) Close() error {
	rp.mu.Lock()
	socks := rp.socks
	rp.socks = nil
	rp.mu.Unlock()
	for _, s := range socks {
		s.conn.Close()
	}
	return nil
}

func (rp *rawProber) OnAnswer(f func()) {
	rp.mu.Lock()
	rp.wake = f
	rp.mu.Unlock()
}

// alloc takes a free slot for a probe of dst; false when all are in use.
// Callers hold rp.mu.
func (rp *rawProber) alloc(s *rawSock, dst netip.Addr, dport uint16, cookie uint64, waiter chan struct{}) (uint32, bool) {
	var idx uint32
	switch {
	case len(rp.free) > 0:
		idx = rp.free[len(rp.free)-1]
		rp.free = rp.free[:len(rp.free)-1]
	case len(rp.slots) < maxSlots:
		idx = uint32(len(rp.slots))
		rp.slots = append(rp.slots, rawSlot{})
	default:
		return 0, false
	}
	sport := rp.codec.sport()
	if sport == 0 {
		dport = 0 // a method without ports (icmp)
	}
	rp.slots[idx] = rawSlot{dst: dst, sock: s, cookie: cookie, token: rand.Uint32() & 0xffff, sport: sport, dport: dport,
		state: slotPending, waiter: waiter}
	return idx, true
}

// release frees slot idx. Callers hold rp.mu.
func (rp *rawProber) release(idx uint32) {
	rp.slots[idx] = rawSlot{}
	rp.free = append(rp.free, idx)
}

// SendBatch registers and sends every probe of reqs.
func (rp *rawProber) SendBatch(ctx context.Context, reqs []Req) {
	rp.sendMu.Lock()
	defer rp.sendMu.Unlock()
	rp.sendLocked(ctx, reqs, nil)
}

func (rp *rawProber) sendLocked(ctx context.Context, reqs []Req, waiter chan struct{}) {
	out := rp.out[:0]
	for i := range reqs {
		q := &reqs[i]
		q.Dst = q.Dst.Unmap()
		s, err := rp.sock(ctx, probe.FamilyOf(q.Dst))
		if err != nil {
			q.Done, q.Res = true, Result{Status: ProbeError, Err: err}
			continue
		}
		rp.mu.Lock()
		idx, ok := rp.alloc(s, q.Dst, q.Port, q.Cookie, waiter)
		if ok {
			o := rawOut{req: i, sock: s, dst: q.Dst}
			o.n = len(rp.codec.build(o.pkt[:0], s.src, &rp.slots[idx], idx))
			out = append(out, o)
		}
		rp.mu.Unlock()
		if !ok {
			q.Done, q.Res = true, Result{Status: ProbeError, Err: fmt.Errorf("all %d probe slots in use", maxSlots)}
			continue
		}
		q.Slot = idx
	}
	writeBatch(out)
	rp.mu.Lock()
	for _, o := range out {
		q := &reqs[o.req]
		q.Sent = o.sent
		if o.err != nil {
			rp.release(q.Slot)
			refused := hostRefused(o.err)
			if refused && rp.health != nil {
				rp.health.SendFailed(o.sent)
			}
			q.Done, q.Res = true, Result{Status: classifyErr(o.err), Err: fmt.Errorf("send %s: %w", rp.codec.pktName(), o.err), HostSuspect: refused}
			continue
		}
		rp.slots[q.Slot].sent = o.sent.UnixNano()
	}
	rp.mu.Unlock()
	rp.out = out[:0]
}

// Answered hands over the Answered probes, freeing their slots.
func (rp *rawProber) Answered(dst []Answer) []Answer {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	for _, idx := range rp.done {
		dst = append(dst, rp.answer(idx))
		rp.release(idx)
	}
	rp.done = rp.done[:0]
	return dst
}

// answer of slot idx. Callers hold rp.mu.
func (rp *rawProber) answer(idx uint32) Answer {
	sl := &rp.slots[idx]
	return Answer{Cookie: sl.cookie, Sent: time.Unix(0, sl.sent), At: time.Unix(0, sl.at), Kind: sl.kind,
		Bytes: ProbeBytes(sl.dst) + rp.codec.replyBytes(sl.kind, sl.dst)}
}

// ProbeBytes is the size of a probe packet with its IP header (a SYN
// with one option and an echo request with 16 bytes of data: 24).
func ProbeBytes(dst netip.Addr) int { return 24 + IPHeader(dst) }

func (rp *rawProber) Expire(idx uint32, deadline, now time.Time) (Result, bool) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	sl := &rp.slots[idx]
	if sl.state != slotPending {
		return Result{}, false // answered: Answered() will hand it over
	}
	drained := sl.sock.watermark.Load() >= deadline.UnixNano()
	if !drained && now.Before(deadline.Add(MaxVerdictWait)) {
		return Result{}, false
	}
	res := Result{Status: ProbeTimeout, Err: context.DeadlineExceeded, Bytes: ProbeBytes(sl.dst), HostSuspect: !drained}
	rp.release(idx)
	return res, true
}

// Probe sends one probe and waits for its answer or ctx's deadline (then
// for the receive loop to have read everything up to it).
func (rp *rawProber) Probe(ctx context.Context, t Target) Result {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(24 * time.Hour)
	}
	w := make(chan struct{})
	reqs := []Req{{Dst: t.Addr, Port: uint16(t.Port)}}
	rp.sendMu.Lock()
	rp.sendLocked(ctx, reqs, w)
	rp.sendMu.Unlock()
	q := reqs[0]
	if q.Done {
		return q.Res
	}
	tm := time.NewTimer(time.Until(deadline))
	defer tm.Stop()
	tk := time.NewTicker(time.Millisecond) // drains the sockets (Linux)
	defer tk.Stop()
	for {
		select {
		case <-w:
		case <-tk.C:
			rp.Poll()
			if now := time.Now(); now.Before(deadline) && ctx.Err() == nil {
				rp.mu.Lock()
				answered := rp.slots[q.Slot].state == slotAnswered
				rp.mu.Unlock()
				if !answered {
					continue
				}
			}
		case <-tm.C:
		case <-ctx.Done():
		}
		now := time.Now()
		rp.mu.Lock()
		sl := &rp.slots[q.Slot]
		if sl.state == slotAnswered {
			a := rp.answer(q.Slot)
			rp.release(q.Slot)
			rp.mu.Unlock()
			if a.At.After(deadline) {
				return Result{Status: ProbeTimeout, Err: context.DeadlineExceeded, Bytes: a.Bytes}
			}
			return Result{Kind: a.Kind, RTT: a.At.Sub(a.Sent), Status: ProbeSuccess, Bytes: a.Bytes}
		}
		rp.mu.Unlock()
		if res, final := rp.Expire(q.Slot, deadline, now); final || ctx.Err() != nil {
			if !final {
				rp.mu.Lock()
				rp.release(q.Slot)
				rp.mu.Unlock()
				return Result{Status: classifyErr(ctx.Err()), Err: ctx.Err(), Bytes: ProbeBytes(q.Dst)}
			}
			return res
		}
		if !now.Before(deadline) {
			tm.Reset(rxTick) // wait for the receive loop's watermark
		}
	}
}

// hostRefused says a send failed because the host ran out of buffers: the
// probe never left, which says nothing about the target.
func hostRefused(err error) bool {
	return errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOMEM)
}
