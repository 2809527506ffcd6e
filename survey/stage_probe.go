package survey

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/mptester/mptester/probe"
	"github.com/mptester/mptester/survey/internal/rawprobe"
	"github.com/mptester/mptester/survey/list"
)

// Resolution and probing overlap: each resolved address is queued for
// probing from every path as soon as the first domain resolves to it, so
// the run takes about as long as its probes (004's hping3 runs resolved
// first, then probed for days). The domains and resolution paths a probe
// record lists are only final once resolution ends, so records finished
// before that are held and written then.

// Per probe path state of an address (pathRec.state).
const (
	targetNone       uint8 = iota
	targetQueued           // probed, or being probed
	targetDone             // measured in the run being resumed
	targetOverBudget       // skipped: --max-bytes of the probe path spent
)

// Limits of the compact per-address state.
const (
	maxPaths   = 16              // an address's resolution paths are bits of a uint16
	maxDomains = list.MaxDomains // domain indexes share a uint32 with a path index
)

// setResult records address number ai's result from probe path pi.
// Callers hold r.mu.
func (r *runner) setResult(ai int32, pi int, tr TargetResult) {
	rec := r.addrs.load(ai)
	f := resSet
	if tr.Responsive {
		f |= resResponsive
	}
	if tr.HostOverloaded {
		f |= resOverloaded
	}
	rec.path[pi].flags, rec.path[pi].medianMs = f, float32(tr.MedianMs)
	r.addrs.store(ai, &rec)
}

// result is address number ai's result from probe path pi, if probed.
func (r *runner) result(ai int32, pi int) (TargetResult, bool) {
	x := r.addrs.load(ai).path[pi]
	if x.flags&resSet == 0 {
		return TargetResult{}, false
	}
	return TargetResult{Responsive: x.flags&resResponsive != 0, MedianMs: float64(x.medianMs), HostOverloaded: x.flags&resOverloaded != 0}, true
}

// target is one address to probe from one path.
type target struct {
	addr netip.Addr
	ai   int32 // number in runner.addrs
	pi   uint8 // index of the probe path in runner.names
}

// heldRecord is a probe record finished while resolution still ran, with
// which paths were valid when it finished.
type heldRecord struct {
	t     target
	rec   ProbeRecord
	valid []bool
}

// addResolved indexes the addresses domain di resolved to on path rpi and
// queues the targets they create.
func (r *runner) addResolved(rpi, di int, addrs []netip.Addr) {
	mapped := r.unsynthesize(rpi, addrs)
	synth := !slices.Equal(mapped, addrs)
	addrs = mapped
	var queue []queuedTarget
	r.mu.Lock()
	if synth {
		r.synthDoms[rpi]++
	}
	for j, a := range addrs {
		if slices.Contains(addrs[:j], a) {
			continue // listed twice in one answer
		}
		idx, _ := r.addrs.insert(a)
		if idx < 0 {
			continue // the run ends with r.addrs.err
		}
		ai := r.addrs.load(idx)
		r.doms.Add(idx, uint32(rpi)<<24|uint32(di))
		if ai.on&(1<<rpi) != 0 {
			continue // not new on this resolution path: nothing more to count
		}
		ai.on |= 1 << rpi
		rp := r.names[rpi]
		for pi, pp := range r.names {
			if why := r.cfg.Policy.Check(r.paths[pp], r.paths[rp], a); why != "" {
				r.skipped[skipKey{pp, rp, why}]++
				continue
			}
			switch ai.path[pi].state {
			case targetNone:
				if _, done := r.results[pp][a]; done {
					ai.path[pi].state = targetDone
					continue
				}
				ai.path[pi].state = targetQueued
				queue = append(queue, queued(target{ai: idx, pi: uint8(pi)}))
			case targetOverBudget:
				r.skipped[skipKey{pp, rp, SkipMaxBytes}]++
			}
		}
		r.addrs.store(idx, &ai)
	}
	r.mu.Unlock()
	r.probeStage.grow(len(queue) * r.cfg.Count)
	r.queue.push(queue)
}

// unsynthesize maps the AAAA answers a DNS64 synthesized on resolution
// path rpi to their IPv4 addresses (Policy.Unsynthesize): the server is
// the IPv4 one, probed directly from paths with IPv4 and through the
// translator from the others. Not in an IPv6-only survey (--family 6),
// which probes IPv6 addresses only.
func (r *runner) unsynthesize(rpi int, addrs []netip.Addr) []netip.Addr {
	if len(r.cfg.Policy.NAT64) == 0 || r.cfg.Family == probe.Family6 {
		return addrs
	}
	rp := r.names[rpi]
	var out []netip.Addr
	for i, a := range addrs {
		m := r.cfg.Policy.Unsynthesize(rp, a)
		if m != a && out == nil {
			out = slices.Clone(addrs[:i])
		}
		if out != nil {
			out = append(out, m)
		}
	}
	if out == nil {
		return addrs
	}
	return out
}

// dest is where t's probes go: its address, or the address synthesized
// for it under its probe path's NAT64 prefix.
func (r *runner) dest(t target) netip.Addr {
	if d, ok := r.cfg.Policy.ViaNAT64(r.paths[r.probePath(t)], t.addr); ok {
		return d
	}
	return t.addr
}

// probePath is the name of t's probe path.
func (r *runner) probePath(t target) string { return r.names[t.pi] }

// resolvesOf lists the resolution paths whose cell t belongs to (the
// policy allows probing it from t's path), in path order, and the domains
// that resolved to t's address on them, in list order. Callers hold r.mu.
func (r *runner) resolvesOf(t target) (resolves, domains []string) {
	on := r.addrs.load(t.ai).on // resolution paths the address is known on
	pp := r.probePath(t)
	for rpi, rp := range r.names {
		if on&(1<<rpi) != 0 && r.cfg.Policy.Check(r.paths[pp], r.paths[rp], t.addr) == "" {
			resolves = append(resolves, rp)
		}
	}
	if !r.doms.Sealed() {
		return resolves, nil // still resolving: the domains are not final
	}
	var idx []int32
	for _, d := range r.doms.Get(t.ai, nil) {
		if rpi := int(d >> 24); r.cfg.Policy.Check(r.paths[pp], r.paths[r.names[rpi]], t.addr) == "" {
			idx = append(idx, int32(d&(maxDomains-1)))
		}
	}
	// A CDN address can serve thousands of domains: sort and compact
	// rather than a quadratic membership test.
	slices.Sort(idx)
	for _, di := range slices.Compact(idx) {
		domains = append(domains, r.list.Name(int(di)))
	}
	return resolves, domains
}

// targetResult is the result of probing a from probe path pi: this run's,
// else the resumed run's. Callers hold r.mu or run after probing.
func (r *runner) targetResult(pi int, a netip.Addr) (TargetResult, bool) {
	if idx, ok := r.addrs.get(a); ok {
		if tr, ok := r.result(idx, pi); ok {
			return tr, true
		}
	}
	tr, ok := r.results[r.names[pi]][a]
	return tr, ok
}

// targetQueue is an unbounded FIFO: resolution never waits for probing.
// It holds a target as its address number and path index packed in 4
// bytes (a target is 32): at 100K domains the queue holds ~125K targets
// while resolution outruns probing, 4 MB of the live heap's 16 MB peak.
type targetQueue struct {
	mu     sync.Mutex
	items  []queuedTarget
	closed bool
	wake   chan struct{}
}

// queuedTarget is a target's address number << 4 | its path index
// (maxPaths is 16): 2^28 addresses, far above the ~1.5M a top-1M list
// resolves to.
type queuedTarget uint32

func queued(t target) queuedTarget { return queuedTarget(uint32(t.ai)<<4 | uint32(t.pi)) }

func (q queuedTarget) ai() int32 { return int32(q >> 4) }
func (q queuedTarget) pi() uint8 { return uint8(q & 0xf) }

func newTargetQueue() *targetQueue { return &targetQueue{wake: make(chan struct{}, 1)} }

func (q *targetQueue) push(ts []queuedTarget) {
	if len(ts) == 0 {
		return
	}
	q.mu.Lock()
	q.items = append(q.items, ts...)
	q.mu.Unlock()
	q.signal()
}

// close says no more targets will come.
func (q *targetQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *targetQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// tryPop returns the next target without waiting; closed: no more will
// come.
func (q *targetQueue) tryPop() (t queuedTarget, ok, closed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) > 0 {
		t = q.items[0]
		q.items = q.items[1:]
		if len(q.items) == 0 {
			q.items = nil // let the drained backing array go
		}
		return t, true, false
	}
	return 0, false, q.closed
}

// popTarget returns the next queued target with its address.
func (r *runner) popTarget() (t target, ok, closed bool) {
	q, ok, closed := r.queue.tryPop()
	if !ok {
		return target{}, false, closed
	}
	r.mu.Lock()
	a := r.addrs.addr(q.ai())
	r.mu.Unlock()
	return target{addr: a, ai: q.ai(), pi: q.pi()}, true, false
}

// newEngines opens a engine per path; a path without one is warned about
// and its targets are not probed.
func (r *runner) newEngines(ctx context.Context) map[string]Engine {
	engines := map[string]Engine{}
	for _, name := range r.names {
		connectCap := r.cfg.ConnectCap
		if connectCap <= 0 {
			connectCap = rawprobe.DefaultConnectCap
		}
		p, err := rawprobe.New(ctx, r.cfg.Method, r.paths[name], rawprobe.Options{ConnectCap: min(connectCap, r.cfg.Timeout), Health: r.health})
		if err != nil {
			r.log.Warn("cannot probe from path", "path", name, "err", err)
			r.failed.Store(true)
			continue
		}
		engines[name] = p
	}
	return engines
}

// overBudget skips t for the byte budget, counting it in every cell it
// belongs to (and, through addResolved, in cells found later).
func (r *runner) overBudget(t target) {
	r.probeStage.grow(-r.cfg.Count)
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.addrs.load(t.ai)
	rec.path[t.pi].state = targetOverBudget
	r.addrs.store(t.ai, &rec)
	resolves, _ := r.resolvesOf(t)
	for _, rp := range resolves {
		r.skipped[skipKey{r.probePath(t), rp, SkipMaxBytes}]++
	}
}

// lowerBound is the shortest possible run for n probes: n/rate plus one
// timeout for the last answers.
func (r *runner) lowerBound(n int64) time.Duration {
	if r.cfg.Rate <= 0 {
		return r.cfg.Timeout
	}
	return time.Duration(float64(n)/r.cfg.Rate*float64(time.Second)) + r.cfg.Timeout
}

// bytesPerProbe is the most one probe can put on the path, reserved from
// the budget before it is sent (the engines report what was really sent).
func (r *runner) bytesPerProbe() func(netip.Addr) int {
	return func(a netip.Addr) int {
		switch r.cfg.Method {
		case "tcp-syn":
			return rawprobe.IPHeader(a) + 24 + rawprobe.IPTCPHeader(a) // SYN, and the kernel's RST to a SYN-ACK
		case "icmp":
			return rawprobe.IPHeader(a) + 24
		}
		return rawprobe.SynBytes(a) + 2*(rawprobe.IPTCPHeader(a)+rawprobe.TCPTimestampOpt)
	}
}

// maxReprobes is how many times a target that got no answer while the
// host was overloaded is probed again (each time after reprobePause, at
// the rate the health monitor has lowered meanwhile) before its record is
// marked host_overloaded instead.
const (
	maxReprobes  = 3
	reprobePause = time.Second
)

// validity says, per path, whether it is still unchanged.
func (r *runner) validity() []bool {
	v := make([]bool, len(r.names))
	for i, n := range r.names {
		v[i] = r.watch.valid(n)
	}
	return v
}

// complete fills in what only the finished resolution knows: the cells'
// resolution paths and the domains; and whether every path involved was
// still unchanged when the probes ended. Callers hold r.mu.
func (r *runner) complete(rec *ProbeRecord, t target, valid []bool) {
	rec.ResolvePaths, rec.Domains = r.resolvesOf(t)
	rec.ResolvePath = rec.ResolvePaths[0]
	rec.Valid = valid[t.pi]
	for _, rp := range rec.ResolvePaths {
		rec.Valid = rec.Valid && valid[slices.Index(r.names, rp)]
	}
}

// resolutionDone writes the probe records held until now; later ones are
// written as they finish.
func (r *runner) resolutionDone() {
	r.mu.Lock()
	sealErr := r.doms.Seal(r.addrs.len())
	r.resolved = true
	close(r.resolvedCh)
	held := r.held
	r.held = newHeldStore(held.q.NoFile)
	r.mu.Unlock()
	count := 0
	r.failRun(sealErr)
	err := held.drain(func(h heldRecord) {
		r.mu.Lock()
		r.complete(&h.rec, h.t, h.valid)
		r.mu.Unlock()
		r.write(h.rec)
		count++
	})
	r.failRun(err)
	r.log.Info("probe records held until resolution ended", "count", count)
}

func (r *runner) record(t target, results []Result) ProbeRecord {
	rec := ProbeRecord{Type: "probe", ProbePath: r.probePath(t), Address: t.addr, Method: r.cfg.Method, RTTsMs: []float64{}}
	if d := r.dest(t); d != t.addr {
		rec.Route, rec.Dest, rec.NAT64Prefix = RouteViaNAT64, d, r.cfg.Policy.NAT64[rec.ProbePath]
	}
	if r.cfg.Method != "icmp" {
		rec.Port = r.cfg.Port
	}
	for _, res := range results {
		if res.Status == ProbeCancelled || (res.Status == "" && res.Kind == AnswerNone) {
			continue
		}
		if res.Status != ProbeError || res.Bytes > 0 {
			rec.Sent++
		}
		if res.Kind != AnswerNone {
			rec.Received++
			rec.RTTsMs = append(rec.RTTsMs, msOf(res.RTT))
			if rec.Answer == AnswerNone {
				rec.Answer = res.Kind
			}
			if rec.Answers == nil {
				rec.Answers = map[string]int{}
			}
			rec.Answers[string(res.Kind)]++
			continue
		}
		if res.Status != ProbeTimeout && res.Status != ProbeSuccess {
			if rec.Errors == nil {
				rec.Errors = map[string]int{}
			}
			rec.Errors[string(res.Status)]++
			r.log.Debug("probe failed", "path", r.probePath(t), "addr", t.addr, "err", res.Err)
		}
	}
	rec.ProbeStats = statsOf(rec.RTTsMs)
	rec.Responsive = rec.answered()
	return rec
}
