package survey

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mptester/mptester/probe"
)

// Target is one probe destination.
type Target struct {
	Addr netip.Addr
	Port int
}

// Result of one probe.
type Result struct {
	Kind   AnswerKind
	RTT    time.Duration
	Status ProbeStatus
	Err    error
	Bytes  int // bytes this probe put on the wire (IP packets we sent)
	// HostSuspect: the answer may have been lost by this host (a send
	// refused for lack of buffers, a receive loop too late to tell).
	HostSuspect bool
}

// Prober sends single probes from one path (blackbox_exporter style). The
// caller's ctx deadline is the probe timeout. Probers are safe for
// concurrent use and share one receive loop per socket.
type Prober interface {
	Probe(ctx context.Context, t Target) Result
	Close() error
}

// Pending is a probe on the wire. Result waits for its answer until
// deadline; an answer that arrived after the deadline is a timeout, so a
// late call to Result changes nothing (replies carry their own time).
type Pending interface {
	Result(ctx context.Context, deadline time.Time) Result
}

// Starter is implemented by probers that can send without waiting: one
// goroutine then drives every probe of a target, instead of a goroutine,
// a context and a timer per probe in flight.
type Starter interface {
	Start(ctx context.Context, t Target) Pending
}

// start sends one probe with pr, asynchronously when pr cannot.
func start(ctx context.Context, pr Prober, t Target, timeout time.Duration) Pending {
	if s, ok := pr.(Starter); ok {
		return s.Start(ctx, t)
	}
	ch := make(chan Result, 1)
	go func() {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		ch <- pr.Probe(pctx, t)
	}()
	return chanPending(ch)
}

// donePending is a probe that ended at once (it could not be sent).
type donePending Result

func (d donePending) Result(context.Context, time.Time) Result { return Result(d) }

// chanPending is a probe run by its own goroutine.
type chanPending chan Result

func (c chanPending) Result(ctx context.Context, _ time.Time) Result {
	select {
	case r := <-c:
		return r
	case <-ctx.Done():
		return Result{Status: classifyErr(ctx.Err()), Err: ctx.Err()}
	}
}

// replyPending waits for the reply a receive loop hands to its waiter.
type replyPending struct {
	w     *waiter
	sent  time.Time
	bytes int
	// replyBytes is what the host sends on its own because of an answer
	// (the kernel's RST to a SYN-ACK): it leaves the path too.
	replyBytes func(AnswerKind) int
	done       func() // unregisters the waiter
	// drained waits until the receive loop has read every reply that
	// arrived before the deadline (false: it could not within
	// maxVerdictWait), so a late loop delays the verdict, not changes it.
	drained func(ctx context.Context, deadline time.Time) bool
}

func (p *replyPending) Result(ctx context.Context, deadline time.Time) Result {
	defer p.done()
	ok := func(r reply) Result {
		b := p.bytes
		if p.replyBytes != nil {
			b += p.replyBytes(r.kind)
		}
		if r.at.After(deadline) {
			return Result{Status: ProbeTimeout, Err: context.DeadlineExceeded, Bytes: b}
		}
		return Result{Kind: r.kind, RTT: r.at.Sub(p.sent), Status: ProbeSuccess, Bytes: b}
	}
	select {
	case r := <-p.w.ch:
		return ok(r)
	default:
	}
	if d := time.Until(deadline); d > 0 {
		tm := getTimer(d)
		defer putTimer(tm)
		select {
		case r := <-p.w.ch:
			return ok(r)
		case <-tm.C:
		case <-ctx.Done():
			return Result{Status: classifyErr(ctx.Err()), Err: ctx.Err(), Bytes: p.bytes}
		}
	}
	drained := p.drained == nil || p.drained(ctx, deadline)
	select {
	case r := <-p.w.ch:
		return ok(r)
	default:
	}
	if ctx.Err() != nil {
		return Result{Status: classifyErr(ctx.Err()), Err: ctx.Err(), Bytes: p.bytes}
	}
	return Result{Status: ProbeTimeout, Err: context.DeadlineExceeded, Bytes: p.bytes, HostSuspect: !drained}
}

// resultWithin is Probe for a Starter: the deadline is ctx's, if any.
func resultWithin(ctx context.Context, p Pending) Result {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(24 * time.Hour)
	}
	return p.Result(ctx, dl)
}

// ProberOptions configure a prober.
type ProberOptions struct {
	// ConnectCap bounds a tcp-connect attempt below the kernel's first SYN
	// retransmission (initial RTO 1 s), so a retransmitted SYN never shows
	// up as a long RTT.
	ConnectCap time.Duration
	// health hears of what the prober sees of host overload; nil: nobody.
	health *health
}

// NewProberFunc builds a prober bound to path p.
type NewProberFunc func(ctx context.Context, p probe.Path, opts ProberOptions) (Prober, error)

// Methods is the registry of probe methods.
var Methods = map[string]NewProberFunc{
	"tcp-syn":     newSynProber,
	"tcp-connect": newConnectProber,
	"icmp":        newICMPProber,
}

// MethodNames lists the registry, sorted.
func MethodNames() []string {
	var ns []string
	for n := range Methods {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

// NewProber looks method up in the registry.
func NewProber(ctx context.Context, method string, p probe.Path, opts ProberOptions) (Prober, error) {
	f, ok := Methods[method]
	if !ok {
		return nil, fmt.Errorf("unknown probe method %q (want one of %s)", method, strings.Join(MethodNames(), ", "))
	}
	return f(ctx, p, opts)
}

// demux hands replies read by a socket's single receive loop to the probe
// waiting for them.
type demux[K comparable] struct {
	mu      sync.Mutex
	waiters map[K]*waiter
}

type waiter struct {
	check func(any) (AnswerKind, bool) // does this reply answer the probe?
	ch    chan reply
}

type reply struct {
	kind AnswerKind
	at   time.Time
}

func newDemux[K comparable]() *demux[K] { return &demux[K]{waiters: map[K]*waiter{}} }

// register returns false when k is already waited on.
func (d *demux[K]) register(k K, check func(any) (AnswerKind, bool)) (*waiter, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, busy := d.waiters[k]; busy {
		return nil, false
	}
	w := &waiter{check: check, ch: make(chan reply, 1)}
	d.waiters[k] = w
	return w, true
}

func (d *demux[K]) unregister(k K) {
	d.mu.Lock()
	delete(d.waiters, k)
	d.mu.Unlock()
}

func (d *demux[K]) deliver(k K, msg any, at time.Time) {
	d.mu.Lock()
	w := d.waiters[k]
	if w != nil {
		if kind, ok := w.check(msg); ok {
			delete(d.waiters, k)
			w.ch <- reply{kind: kind, at: at}
		}
	}
	d.mu.Unlock()
}
