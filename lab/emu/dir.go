package emu

import (
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// spinNs: the writer wakes this long before a deadline and spins the rest,
// hiding the wake-up latency of the kernel and the Go runtime.
var spinNs int64 = 30_000

type packet struct {
	at  int64 // deliver time on the link clock
	seq uint64
	buf *[]byte
	n   int
}

type direction struct {
	l      *Link
	dir    Direction
	src    io.Reader
	dst    io.Writer
	params atomic.Pointer[Params]
	w      waiter // wakes the writer
	rw     waiter // wakes the reader (fd devices)

	// reader-only state
	rng      *rand.Rand
	geBad    bool
	lastDep  int64 // when the rate queue finishes sending what it holds
	lastPath int64 // deliver time of the previous packet before target extra (FIFO)
	seq      uint64
	ectSeen  uint64 // ECN-capable packets admitted, for ECN.CEEvery

	mu         sync.Mutex
	q          []packet // min-heap by (at, seq)
	sleepUntil int64    // writer's wake time while it waits; -1 while it runs

	pktIn, bytesIn, delivered, bytesOut      atomic.Uint64
	dropLoss, dropQueue, dropBlock, dropDown atomic.Uint64
	dropInvalid, writeErrs, dropMTU          atomic.Uint64
	late1, late10, late100, dropOverflow     atomic.Uint64
	ecnBleached, ecnMarkedCE                 atomic.Uint64
	lateMu                                   sync.Mutex
	late                                     []int64
	lateNext                                 int
	act                                      activity
}

func newDirection(l *Link, dir Direction, src io.Reader, dst io.Writer, seed uint64) *direction {
	d := &direction{l: l, dir: dir, src: src, dst: dst, w: newWaiter(), rw: newWaiter(),
		rng: rand.New(rand.NewPCG(seed, uint64(dir)+1)), sleepUntil: -1}
	d.params.Store(&Params{})
	return d
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 2048); return &b }}

// readLoop reads fd devices (TUN) on a locked thread with the writer's
// priority (readRaw) so a busy host delays arrival stamps as little as
// deliveries; other devices from a plain goroutine, as a locked one only
// adds Go scheduler hand-offs when woken by a channel.
func (d *direction) readLoop() error {
	if ok, err := d.readRaw(); ok {
		return err
	}
	buf := make([]byte, 65536)
	for {
		n, err := d.src.Read(buf)
		if err != nil {
			if d.l.closing.Load() || errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if n > 0 {
			d.handle(buf[:n], d.l.now())
		}
	}
}

// handle decides the fate of one packet that arrived at now.
func (d *direction) handle(pkt []byte, now int64) {
	n := len(pkt)
	d.pktIn.Add(1)
	d.bytesIn.Add(uint64(n))
	d.act.arrived(pkt, now)
	if d.l.down.Load() {
		d.dropDown.Add(1)
		return
	}
	src, dst, ok := ipAddrs(pkt)
	if !ok {
		d.dropInvalid.Add(1)
		return
	}
	if m := d.l.mtu.Load(); m > 0 && int64(n) > m {
		d.dropMTU.Add(1) // a path-MTU black hole: no Packet Too Big
		return
	}
	var extra time.Duration
	if d.dir == Up {
		if _, b := d.l.blocks.lookup(dst); b {
			d.dropBlock.Add(1)
			return
		}
		extra, _ = d.l.targets.lookup(dst)
	} else if _, b := d.l.blocks.lookup(src); b {
		d.dropBlock.Add(1)
		return
	}
	p := d.params.Load()
	if d.lose(p) {
		d.dropLoss.Add(1)
		return
	}
	dep := now
	if p.RateBps > 0 {
		rate := float64(p.RateBps)
		if d.lastDep > now {
			backlog := float64(d.lastDep-now) / 1e9 * rate / 8
			if backlog+float64(n) > float64(p.queueLimit()) {
				d.dropQueue.Add(1)
				return
			}
			dep = d.lastDep
		}
		dep += int64(float64(n) * 8e9 / rate)
		d.lastDep = dep
	}
	at := dep + int64(p.Delay)
	if p.Jitter > 0 {
		at += d.rng.Int64N(2*int64(p.Jitter)+1) - int64(p.Jitter)
	}
	at = max(at, dep, d.lastPath)
	d.lastPath = at
	at += int64(extra)

	var b *[]byte
	if n <= 2048 {
		b = bufPool.Get().(*[]byte)
	} else {
		s := make([]byte, n)
		b = &s
	}
	copy(*b, pkt)
	if p.ECN != (ECN{}) {
		d.applyECN((*b)[:n], p.ECN)
	}
	d.seq++
	d.push(packet{at: at, seq: d.seq, buf: b, n: n})
}

func (d *direction) lose(p *Params) bool {
	if g := p.GE; g != nil {
		var lost bool
		if d.geBad {
			lost = g.LossBad > 0 && d.rng.Float64() < g.LossBad
			if d.rng.Float64() < g.R {
				d.geBad = false
			}
		} else {
			lost = g.LossGood > 0 && d.rng.Float64() < g.LossGood
			if d.rng.Float64() < g.P {
				d.geBad = true
			}
		}
		return lost
	}
	return p.Loss > 0 && d.rng.Float64() < p.Loss
}

func (d *direction) push(p packet) {
	d.mu.Lock()
	if len(d.q) >= MaxInFlight {
		d.mu.Unlock()
		d.dropQueue.Add(1)
		d.dropOverflow.Add(1)
		bufPool.Put(p.buf)
		return
	}
	d.q = append(d.q, p)
	up(d.q, len(d.q)-1)
	wake := d.q[0].seq == p.seq && p.at < d.sleepUntil
	if wake {
		d.sleepUntil = -1 // one wake-up is enough
	}
	d.mu.Unlock()
	if wake {
		d.w.wake()
	}
}

func less(a, b *packet) bool { return a.at < b.at || a.at == b.at && a.seq < b.seq }

func up(q []packet, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !less(&q[i], &q[p]) {
			return
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func pop(q []packet) ([]packet, packet) {
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = packet{}
	q = q[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && less(&q[r], &q[l]) {
			m = r
		}
		if !less(&q[m], &q[i]) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	return q, top
}

// writeLoop runs on its own locked OS thread (see lockThread) and
// delivers packets when they come due.
func (d *direction) writeLoop() error {
	lockThread()
	var batch []packet
	for !d.l.closing.Load() {
		d.mu.Lock()
		now := d.l.now()
		if len(d.q) == 0 {
			d.sleepUntil = math.MaxInt64
			d.mu.Unlock()
			d.w.wait(-1)
			continue
		}
		head := d.q[0].at
		if head-now > spinNs {
			d.sleepUntil = head - spinNs
			d.mu.Unlock()
			d.w.wait(head - spinNs - now)
			continue
		}
		d.sleepUntil = -1
		if head > now {
			d.mu.Unlock()
			for d.l.now() < head {
			}
			continue
		}
		for len(d.q) > 0 && d.q[0].at <= now {
			var p packet
			d.q, p = pop(d.q)
			batch = append(batch, p)
		}
		d.mu.Unlock()
		for i := range batch {
			d.deliver(&batch[i])
			batch[i] = packet{}
		}
		batch = batch[:0]
	}
	return nil
}

func (d *direction) deliver(p *packet) {
	defer d.release(p.buf)
	if d.l.down.Load() {
		d.dropDown.Add(1)
		return
	}
	d.recordLate(d.l.now() - p.at)
	if _, err := d.dst.Write((*p.buf)[:p.n]); err != nil {
		d.writeErrs.Add(1)
		return
	}
	d.delivered.Add(1)
	d.bytesOut.Add(uint64(p.n))
	d.act.delivered((*p.buf)[:p.n], d.l.now())
}

func (d *direction) release(b *[]byte) {
	if cap(*b) == 2048 {
		*b = (*b)[:2048]
		bufPool.Put(b)
	}
}

func (d *direction) recordLate(ns int64) {
	switch {
	case ns > int64(100*time.Millisecond):
		d.late100.Add(1)
		fallthrough
	case ns > int64(10*time.Millisecond):
		d.late10.Add(1)
		fallthrough
	case ns > int64(time.Millisecond):
		d.late1.Add(1)
	}
	d.lateMu.Lock()
	if len(d.late) < LatenessSamples {
		d.late = append(d.late, ns)
	} else {
		d.late[d.lateNext] = ns
		d.lateNext = (d.lateNext + 1) % LatenessSamples
	}
	d.lateMu.Unlock()
}

func (d *direction) stats() DirStats {
	s := DirStats{
		PacketsIn: d.pktIn.Load(), BytesIn: d.bytesIn.Load(),
		Delivered: d.delivered.Load(), BytesDelivered: d.bytesOut.Load(),
		DropLoss: d.dropLoss.Load(), DropQueue: d.dropQueue.Load(), DropBlock: d.dropBlock.Load(),
		DropDown: d.dropDown.Load(), DropInvalid: d.dropInvalid.Load(), DropMTU: d.dropMTU.Load(), WriteErrs: d.writeErrs.Load(),
		DropOverflow: d.dropOverflow.Load(), LateOver1ms: d.late1.Load(), LateOver10ms: d.late10.Load(), LateOver100ms: d.late100.Load(),
		ECNBleached: d.ecnBleached.Load(), ECNMarkedCE: d.ecnMarkedCE.Load(),
	}
	d.lateMu.Lock()
	late := slices.Clone(d.late)
	d.lateMu.Unlock()
	s.Lateness = summarize(late)
	if d.l != nil {
		s.Activity = d.act.snapshot(d.l.epoch)
	}
	return s
}

// summarize sorts ns in place.
func summarize(ns []int64) Lateness {
	if len(ns) == 0 {
		return Lateness{}
	}
	slices.Sort(ns)
	q := func(f float64) time.Duration { return time.Duration(ns[int(f*float64(len(ns)-1))]) }
	return Lateness{N: len(ns), Median: q(0.5), P99: q(0.99), Max: time.Duration(ns[len(ns)-1])}
}
