package survey

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

// Prober sends single probes from one path (blackbox_exporter style). The
// caller's ctx deadline is the probe timeout. Probers are safe for
// concurrent use and share one receive loop per socket.
type Prober interface {
	Probe(ctx context.Context, t Target) Result
	Close() error
}

// batchProber is a Prober the survey's event loop drives directly (the
// raw tcp-syn and icmp probers): it hands over every probe due at one
// wake-up, the prober sends them with as few system calls as the OS
// allows, and its receive loops queue the answers for the loop's next
// wake-up. No goroutine, channel or timer per probe or per target.
type batchProber interface {
	Prober
	// sendBatch sends reqs (one non-blocking sendmsg each) and fills in
	// each one's outcome.
	sendBatch(ctx context.Context, reqs []probeReq)
	// poll reads the replies that reached the prober's sockets (where
	// the caller's wake-ups do that rather than a receive goroutine).
	poll()
	// answered appends the probes answered since the last call.
	answered(dst []probeAnswer) []probeAnswer
	// expire is called once a probe's deadline has passed without an
	// answer: final once its socket's receive loop has read everything
	// that arrived before the deadline (a late loop delays the verdict
	// instead of turning a reply into a timeout), or once that took more
	// than maxVerdictWait (then the probe is HostSuspect).
	expire(slot uint32, deadline, now time.Time) (res Result, final bool)
	// onAnswer sets what a receive loop calls after queueing an answer.
	onAnswer(func())
}

// probeReq is one probe for sendBatch: its target and the caller's
// cookie, and what became of it.
type probeReq struct {
	dst    netip.Addr
	port   uint16
	cookie uint64
	// Filled in by sendBatch: the probe's slot and send time, or, when it
	// could not be sent, its final result (done).
	slot uint32
	sent time.Time
	done bool
	res  Result
}

// probeAnswer is an answered probe: its cookie, what answered and when
// (kernel time), its send time and the bytes it cost.
type probeAnswer struct {
	cookie   uint64
	sent, at time.Time
	kind     AnswerKind
	bytes    int
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
