package rawprobe

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
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

// Engine sends single probes from one path (blackbox_exporter style). The
// caller's ctx deadline is the probe timeout. Engines are safe for
// concurrent use and share one receive loop per socket.
type Engine interface {
	Probe(ctx context.Context, t Target) Result
	Close() error
}

// Batch is an Engine the survey's event loop drives directly (the
// raw tcp-syn and icmp engines): it hands over every probe due at one
// wake-up, the engine sends them with as few system calls as the OS
// allows, and its receive loops queue the answers for the loop's next
// wake-up. No goroutine, channel or timer per probe or per target.
type Batch interface {
	Engine
	// SendBatch sends reqs (one non-blocking sendmsg each) and fills in
	// each one's outcome.
	SendBatch(ctx context.Context, reqs []Req)
	// Poll reads the replies that reached the engine's sockets (where
	// the caller's wake-ups do that rather than a receive goroutine).
	Poll()
	// Answered appends the probes answered since the last call.
	Answered(dst []Answer) []Answer
	// Expire is called once a probe's deadline has passed without an
	// answer: final once its socket's receive loop has read everything
	// that arrived before the deadline (a late loop delays the verdict
	// instead of turning a reply into a timeout), or once that took more
	// than MaxVerdictWait (then the probe is HostSuspect).
	Expire(slot uint32, deadline, now time.Time) (res Result, final bool)
	// OnAnswer sets what a receive loop calls after queueing an answer.
	OnAnswer(func())
}

// Req is one probe for SendBatch: its target and the caller's
// cookie, and what became of it.
type Req struct {
	Dst    netip.Addr
	Port   uint16
	Cookie uint64
	// Filled in by SendBatch: the probe's slot and send time, or, when it
	// could not be sent, its final result (done).
	Slot uint32
	Sent time.Time
	Done bool
	Res  Result
}

// Answer is an answered probe: its cookie, what answered and when
// (kernel time), its send time and the bytes it cost.
type Answer struct {
	Cookie   uint64
	Sent, At time.Time
	Kind     AnswerKind
	Bytes    int
}

// Options configure an engine.
type Options struct {
	// ConnectCap bounds a tcp-connect attempt below the kernel's first SYN
	// retransmission (initial RTO 1 s), so a retransmitted SYN never shows
	// up as a long RTT.
	ConnectCap time.Duration
	// Health hears of what the engine sees of host overload; nil: nobody.
	Health HostMonitor
}

// NewFunc builds an engine bound to path p.
type NewFunc func(ctx context.Context, p probe.Path, opts Options) (Engine, error)

// Methods is the registry of probe methods.
var Methods = map[string]NewFunc{
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

// New looks method up in the registry.
func New(ctx context.Context, method string, p probe.Path, opts Options) (Engine, error) {
	f, ok := Methods[method]
	if !ok {
		return nil, fmt.Errorf("unknown probe method %q (want one of %s)", method, strings.Join(MethodNames(), ", "))
	}
	return f(ctx, p, opts)
}
