// Package emu is the userspace path emulator of the lab: it moves raw IP
// packets between two packet devices (TUN fds) adding one-way delay,
// jitter, loss (independent or Gilbert-Elliott bursts), a rate limit with a
// tail-drop queue, per-target extra delay and per-path unreachable prefixes.
// The lab kernel has no netem, so tc cannot do this.
//
// Each direction of a Link has a reader goroutine that stamps the arrival
// time and decides the fate and deliver time of each packet, and a writer
// goroutine locked to its OS thread that sleeps (ppoll on an eventfd with
// 1 ns timer slack on Linux, then a short spin) until the head of a
// deliver-time heap is due. Go timers alone add ~0.7 ms per hop.
//
// Process-wide effects, both to keep timing under load (see
// docs/benchmarks.md): the reader (for TUN fds) and writer threads ask for
// SCHED_FIFO priority RealtimePriority (silently not when unprivileged),
// and each running Link raises GOMAXPROCS by 4 (ReserveProcs).
package emu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Direction of a packet on a path.
type Direction int

const (
	Up   Direction = iota // client -> internet
	Down                  // internet -> client
)

func (d Direction) String() string {
	switch d {
	case Up:
		return "up"
	case Down:
		return "down"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// Params of one direction of a path. A packet's one-way delay is its wait
// in the rate queue plus its serialization time (size*8/RateBps) plus Delay
// plus jitter (and the target's extra delay on Up packets), like a real
// link: queue, then transmission, then propagation. Random loss happens
// before the queue, so lost packets take no capacity.
type Params struct {
	Delay      time.Duration   // one-way
	Jitter     time.Duration   // uniform in [-Jitter, +Jitter]; never reorders (FIFO per direction)
	Loss       float64         // 0..1 independent random loss
	GE         *GilbertElliott // optional burst loss; when set it replaces Loss
	RateBps    int64           // bits/s; 0 = unlimited
	QueueBytes int             // tail-drop limit of the rate queue; 0 = DefaultQueueBytes(p)
	ECN        ECN             // bleach or CE-mark the packets the queue admits (ecn.go)
}

// GilbertElliott is a two-state burst loss model. P: good->bad and R:
// bad->good transition probabilities per packet; LossGood/LossBad: loss
// probability in each state. With LossGood=0, LossBad=1 the mean loss
// burst is 1/R packets and the mean loss rate P/(P+R).
type GilbertElliott struct{ P, R, LossGood, LossBad float64 }

// LossRate is the stationary loss probability of the model.
func (g GilbertElliott) LossRate() float64 {
	if g.P+g.R == 0 {
		return g.LossGood
	}
	pb := g.P / (g.P + g.R)
	return (1-pb)*g.LossGood + pb*g.LossBad
}

// MaxInFlight caps the packets held per direction (delay line plus rate
// queue) so a huge delay cannot eat unbounded memory; excess is tail-dropped.
const MaxInFlight = 1 << 16

// DefaultQueueBytes is the tail-drop limit used when Params.QueueBytes is
// 0: the bytes sent in max(100 ms, 2*Delay) at the rate, at least 64 KiB and
// at most 64 MiB. About half a bandwidth-delay product or more, so a bulk
// TCP (CUBIC) flow can keep the link busy.
func DefaultQueueBytes(p Params) int {
	if p.RateBps <= 0 {
		return 0
	}
	span := max(100*time.Millisecond, 2*p.Delay)
	b := float64(p.RateBps) / 8 * span.Seconds()
	return int(min(max(b, 64<<10), 64<<20))
}

func (p Params) String() string {
	s := fmt.Sprintf("delay=%v jitter=%v loss=%g%%", p.Delay, p.Jitter, p.Loss*100)
	if p.GE != nil {
		s += fmt.Sprintf(" ge=%g,%g,%g,%g", p.GE.P, p.GE.R, p.GE.LossGood, p.GE.LossBad)
	}
	if p.RateBps > 0 {
		s += fmt.Sprintf(" rate=%dbit queue=%db", p.RateBps, p.queueLimit())
	}
	if p.ECN != (ECN{}) {
		s += " ecn=" + p.ECN.String()
	}
	return s
}

func (p Params) queueLimit() int {
	if p.QueueBytes > 0 {
		return p.QueueBytes
	}
	return DefaultQueueBytes(p)
}

// Stats of one link.
type Stats struct {
	Up, Down DirStats
}

// Dir returns the stats of one direction.
func (s Stats) Dir(d Direction) DirStats {
	if d == Down {
		return s.Down
	}
	return s.Up
}

// DirStats counts the packets of one direction.
type DirStats struct {
	PacketsIn, BytesIn        uint64
	Delivered, BytesDelivered uint64
	DropLoss                  uint64 // random or Gilbert-Elliott loss
	DropQueue                 uint64 // rate queue full (or MaxInFlight)
	DropOverflow              uint64 // of DropQueue: MaxInFlight, the emulator's own limit
	DropBlock                 uint64 // Block prefix
	DropDown                  uint64 // link down on arrival or at delivery
	DropInvalid               uint64 // not an IPv4/IPv6 packet
	DropMTU                   uint64 // larger than SetMTU's limit (silently: no ICMP)
	WriteErrs                 uint64 // the output device refused the packet
	// DropDevice: packets the input device's queue dropped before the
	// emulator read them (the TUN's tx_dropped: the emulator fell behind).
	// The lab fills it (Lab.Status); Up counts the client's TUN, Down the
	// internet side's.
	DropDevice uint64
	// Lateness of the writer (actual write time minus scheduled deliver
	// time) over the most recent LatenessSamples packets.
	Lateness Lateness
	// LateOver1ms, LateOver10ms and LateOver100ms count, over the whole
	// run, the packets delivered later than that after their scheduled
	// time: the lab's own error, which a test must tell apart from the
	// measuring tool's.
	LateOver1ms, LateOver10ms, LateOver100ms uint64
	// Activity: when the direction last carried packets and data.
	Activity Activity
	// ECNBleached and ECNMarkedCE count the packets whose ECN field
	// Params.ECN cleared or set to CE.
	ECNBleached, ECNMarkedCE uint64
}

// LabLoss is what the emulator itself lost or delayed by more than late
// in this direction: overflows it was not asked to emulate (MaxInFlight),
// output write errors, its input device's drops (DropDevice), and deliveries later than late (rounded down to
// one of the LateOver thresholds, so it may count more, never fewer).
func (s DirStats) LabLoss(late time.Duration) uint64 {
	n := s.DropOverflow + s.WriteErrs + s.DropDevice
	switch {
	case late >= 100*time.Millisecond:
		n += s.LateOver100ms
	case late >= 10*time.Millisecond:
		n += s.LateOver10ms
	default:
		n += s.LateOver1ms
	}
	return n
}

// LatenessSamples is how many recent lateness samples each direction keeps.
const LatenessSamples = 8192

// Lateness summarises recent lateness samples.
type Lateness struct {
	N                int
	Median, P99, Max time.Duration
}

// Link emulates one path between two packet devices (TUN fds,
// IFF_TUN|IFF_NO_PI: raw IPv4/IPv6 packets).
type Link struct {
	name             string
	client, internet io.ReadWriteCloser
	epoch            time.Time
	dirs             [2]*direction
	down             atomic.Bool
	mtu              atomic.Int64             // 0: no limit
	targets          addrTable[time.Duration] // extra delay by Up destination
	blocks           addrTable[struct{}]

	started   atomic.Bool
	closing   atomic.Bool
	closed    chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// NewLink returns a link between the client and internet devices. Packets
// read from client go Up and are written to internet, and the reverse.
// seed makes loss and jitter reproducible.
func NewLink(name string, client, internet io.ReadWriteCloser, seed int64) *Link {
	l := &Link{name: name, client: client, internet: internet, epoch: time.Now(), closed: make(chan struct{})}
	l.dirs[Up] = newDirection(l, Up, client, internet, uint64(seed))
	l.dirs[Down] = newDirection(l, Down, internet, client, uint64(seed)^0x9e3779b97f4a7c15)
	return l
}

// Name of the link.
func (l *Link) Name() string { return l.name }

// now is the link clock: monotonic nanoseconds since NewLink.
func (l *Link) now() int64 { return int64(time.Since(l.epoch)) }

// Run moves packets until ctx is done, Close is called, or a device fails.
// It closes both devices before returning. It returns nil after ctx or
// Close, the device error otherwise. A Link runs once.
func (l *Link) Run(ctx context.Context) error {
	if !l.started.CompareAndSwap(false, true) {
		return fmt.Errorf("link %s: Run called twice or after Close", l.name)
	}
	defer reserveProcs()()
	defer holdLowLatency()()
	errc := make(chan error, 4)
	var wg sync.WaitGroup
	for _, d := range l.dirs {
		wg.Add(2)
		go func() { defer wg.Done(); errc <- d.readLoop() }()
		go func() { defer wg.Done(); errc <- d.writeLoop() }()
	}
	var err error
	select {
	case <-ctx.Done():
	case <-l.closed:
	case err = <-errc:
		if l.closing.Load() {
			err = nil // a device closed under a reader by Close
		}
	}
	l.Close()
	wg.Wait()
	for _, d := range l.dirs {
		d.w.close()
		d.rw.close()
	}
	if err != nil {
		return fmt.Errorf("link %s: %w", l.name, err)
	}
	return nil
}

// ReserveProcs makes each running Link raise GOMAXPROCS by 4 (restored
// when the last Link stops). Each Link has 4 locked threads (a reader and
// a writer per direction), mostly asleep in syscalls; one waking up needs a
// free P to run Go code; with every P busy it waits for the Go scheduler, which
// on a loaded 2-core host took 2..40 ms (measured) and ruined the timing.
var ReserveProcs = true

var procs struct {
	sync.Mutex
	links, base int
}

func reserveProcs() (release func()) {
	if !ReserveProcs {
		return func() {}
	}
	procs.Lock()
	defer procs.Unlock()
	if procs.links == 0 {
		procs.base = runtime.GOMAXPROCS(0)
	}
	procs.links++
	runtime.GOMAXPROCS(procs.base + 4*procs.links)
	return func() {
		procs.Lock()
		defer procs.Unlock()
		procs.links--
		runtime.GOMAXPROCS(procs.base + 4*procs.links)
	}
}

// Close stops Run and closes both devices. Safe to call more than once.
func (l *Link) Close() error {
	l.closeOnce.Do(func() {
		l.closing.Store(true)
		close(l.closed)
		for _, d := range l.dirs {
			d.w.wake()
			d.rw.wake()
		}
		l.closeErr = errors.Join(l.client.Close(), l.internet.Close())
		for _, d := range l.dirs {
			d.w.wake()
		}
		if l.started.CompareAndSwap(false, true) { // never ran: nobody else releases the waiters
			for _, d := range l.dirs {
				d.w.close()
				d.rw.close()
			}
		}
	})
	return l.closeErr
}

// Set replaces the parameters of one direction; safe at run time.
func (l *Link) Set(dir Direction, p Params) {
	if p.GE != nil {
		ge := *p.GE
		p.GE = &ge
	}
	p.Loss = clamp01(p.Loss)
	p.Delay = max(p.Delay, 0)
	p.Jitter = max(p.Jitter, 0)
	p.RateBps = max(p.RateBps, 0)
	p.QueueBytes = max(p.QueueBytes, 0)
	l.dirs[dir&1].params.Store(&p)
}

// Params returns the parameters of one direction.
func (l *Link) Params(dir Direction) Params {
	p := *l.dirs[dir&1].params.Load()
	if p.GE != nil {
		ge := *p.GE
		p.GE = &ge
	}
	return p
}

// SetDown drops everything both ways while down, including packets
// already in flight when they come due.
func (l *Link) SetDown(down bool) { l.down.Store(down) }

// SetMTU drops packets longer than mtu bytes (IP header included) both
// ways without telling the sender: a path-MTU black hole (ICMP Packet
// Too Big / Fragmentation Needed filtered). mtu <= 0 removes the limit.
func (l *Link) SetMTU(mtu int) { l.mtu.Store(int64(max(mtu, 0))) }

// MTU returns SetMTU's limit (0: none).
func (l *Link) MTU() int { return int(l.mtu.Load()) }

// Down reports whether the link is down.
func (l *Link) Down() bool { return l.down.Load() }

// SetTargetDelay adds extra delay once per round trip, on Up packets whose
// destination is in prefix (the longest matching prefix wins). extra <= 0
// removes the entry. Packets with different extra delays may overtake each
// other (the extra is beyond the access path); the path itself stays FIFO.
func (l *Link) SetTargetDelay(prefix netip.Prefix, extra time.Duration) {
	if extra <= 0 {
		l.targets.del(prefix)
		return
	}
	l.targets.set(prefix, extra)
}

// TargetDelay returns the extra delay applied to Up packets to addr.
func (l *Link) TargetDelay(addr netip.Addr) time.Duration {
	d, _ := l.targets.lookup(addr.Unmap())
	return d
}

// Block drops packets to (Up) and from (Down) prefix on this link only.
func (l *Link) Block(prefix netip.Prefix) { l.blocks.set(prefix, struct{}{}) }

// Unblock removes a prefix given to Block.
func (l *Link) Unblock(prefix netip.Prefix) { l.blocks.del(prefix) }

// Blocked reports whether addr is blocked on this link.
func (l *Link) Blocked(addr netip.Addr) bool {
	_, ok := l.blocks.lookup(addr.Unmap())
	return ok
}

// Stats returns a snapshot of the counters.
func (l *Link) Stats() Stats {
	return Stats{Up: l.dirs[Up].stats(), Down: l.dirs[Down].stats()}
}

func clamp01(f float64) float64 {
	if !(f > 0) { // also NaN
		return 0
	}
	return min(f, 1)
}
