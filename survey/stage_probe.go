package survey

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Resolution and probing overlap: each resolved address is queued for
// probing from every path as soon as the first domain resolves to it, so
// the run takes about as long as its probes (004's hping3 runs resolved
// first, then probed for days). The domains and resolution paths a probe
// record lists are only final once resolution ends, so records finished
// before that are held and written then.

// Per probe path state of an address.
const (
	targetNone       uint8 = iota
	targetQueued           // probed, or being probed
	targetDone             // measured in the run being resumed
	targetOverBudget       // skipped: --max-bytes of the probe path spent
)

// addrInfo is what the run knows of one resolved address: per resolution
// path the indexes of the domains that resolved to it, and per probe path
// its target's state. Indexes are into runner.names.
type addrInfo struct {
	doms  [][]int32
	state []uint8
}

// target is one address to probe from one path.
type target struct {
	probe string
	pi    int // index of probe in runner.names
	addr  netip.Addr
	info  *addrInfo
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
	var queue []target
	r.mu.Lock()
	for _, a := range addrs {
		ai := r.addrs[a]
		if ai == nil {
			ai = &addrInfo{doms: make([][]int32, len(r.names)), state: make([]uint8, len(r.names))}
			r.addrs[a] = ai
		}
		l := ai.doms[rpi]
		if len(l) > 0 && l[len(l)-1] == int32(di) {
			continue // listed twice in one answer
		}
		ai.doms[rpi] = append(l, int32(di))
		if len(l) > 0 {
			continue // not new on this resolution path: nothing more to count
		}
		rp := r.names[rpi]
		for pi, pp := range r.names {
			if why := r.cfg.Policy.Check(r.paths[pp], r.paths[rp], a); why != "" {
				r.skipped[skipKey{pp, rp, why}]++
				continue
			}
			switch ai.state[pi] {
			case targetNone:
				if _, done := r.results[pp][a]; done {
					ai.state[pi] = targetDone
					continue
				}
				ai.state[pi] = targetQueued
				queue = append(queue, target{probe: pp, pi: pi, addr: a, info: ai})
			case targetOverBudget:
				r.skipped[skipKey{pp, rp, SkipMaxBytes}]++
			}
		}
	}
	r.mu.Unlock()
	r.probeStage.grow(len(queue) * r.cfg.Count)
	r.queue.push(queue)
}

// resolvesOf lists the resolution paths whose cell t belongs to (the
// policy allows probing it from t's path), in path order, and the domains
// that resolved to t's address on them, in list order. Callers hold r.mu.
func (r *runner) resolvesOf(t target) (resolves, domains []string) {
	var idx []int32
	for rpi, doms := range t.info.doms {
		if len(doms) == 0 {
			continue
		}
		rp := r.names[rpi]
		if r.cfg.Policy.Check(r.paths[t.probe], r.paths[rp], t.addr) != "" {
			continue
		}
		resolves = append(resolves, rp)
		idx = append(idx, doms...)
	}
	// A CDN address can serve thousands of domains: sort and compact
	// rather than a quadratic membership test.
	slices.Sort(idx)
	for _, di := range slices.Compact(idx) {
		domains = append(domains, r.cfg.Domains[di].Name)
	}
	return resolves, domains
}

// targetQueue is an unbounded FIFO: resolution never waits for probing.
type targetQueue struct {
	mu     sync.Mutex
	items  []target
	closed bool
	wake   chan struct{}
}

func newTargetQueue() *targetQueue { return &targetQueue{wake: make(chan struct{}, 1)} }

func (q *targetQueue) push(ts []target) {
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

// pop returns the next target; false once the queue is closed and empty
// or ctx is done.
func (q *targetQueue) pop(ctx context.Context) (target, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			t := q.items[0]
			q.items[0] = target{}
			q.items = q.items[1:]
			if len(q.items) == 0 {
				q.items = nil // let the drained backing array go
			}
			q.mu.Unlock()
			return t, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return target{}, false
		}
		select {
		case <-q.wake:
		case <-ctx.Done():
			return target{}, false
		}
	}
}

// newProbers opens a prober per path; a path without one is warned about
// and its targets are not probed.
func (r *runner) newProbers(ctx context.Context) map[string]Prober {
	probers := map[string]Prober{}
	for _, name := range r.names {
		connectCap := r.cfg.ConnectCap
		if connectCap <= 0 {
			connectCap = defaultConnectCap
		}
		p, err := NewProber(ctx, r.cfg.Method, r.paths[name], ProberOptions{ConnectCap: min(connectCap, r.cfg.Timeout), health: r.health})
		if err != nil {
			r.log.Warn("cannot probe from path", "path", name, "err", err)
			r.failed.Store(true)
			continue
		}
		probers[name] = p
	}
	return probers
}

// probeLoop probes queued targets, at most MaxInFlight at once, until the
// queue is closed and drained or ctx is done.
func (r *runner) probeLoop(ctx context.Context, probers map[string]Prober) {
	perProbe := r.bytesPerProbe()
	sem := make(chan struct{}, r.cfg.MaxInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		t, ok := r.queue.pop(ctx)
		if !ok {
			return
		}
		pr := probers[t.probe]
		if pr == nil {
			r.probeStage.grow(-r.cfg.Count)
			continue
		}
		reserved := int64(r.cfg.Count * perProbe(t.addr))
		if limit := r.cfg.MaxBytes[t.probe]; limit > 0 && r.bytes[t.probe].Load()+reserved > limit {
			r.overBudget(t)
			continue
		}
		if !r.mayProbeAhead(ctx, len(sem)) {
			return
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		// Reserve the budget now so concurrent targets cannot overrun it.
		r.bytes[t.probe].Add(reserved)
		wg.Go(func() {
			defer func() { <-sem }()
			r.probeTarget(ctx, pr, t, reserved)
		})
	}
}

// mayProbeAhead waits, while resolution runs, until one more target cannot
// take the held records past MaxHeld; false if ctx ended first.
func (r *runner) mayProbeAhead(ctx context.Context, inFlight int) bool {
	r.mu.Lock()
	full := !r.resolved && len(r.held)+inFlight >= r.cfg.MaxHeld
	r.mu.Unlock()
	if !full {
		return true
	}
	r.log.Info("probing paused until resolution ends", "held_records", r.cfg.MaxHeld)
	select {
	case <-r.resolvedCh:
		return true
	case <-ctx.Done():
		return false
	}
}

// overBudget skips t for the byte budget, counting it in every cell it
// belongs to (and, through addResolved, in cells found later).
func (r *runner) overBudget(t target) {
	r.probeStage.grow(-r.cfg.Count)
	r.mu.Lock()
	defer r.mu.Unlock()
	t.info.state[t.pi] = targetOverBudget
	resolves, _ := r.resolvesOf(t)
	for _, rp := range resolves {
		r.skipped[skipKey{t.probe, rp, SkipMaxBytes}]++
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
// the budget before it is sent (the probers report what was really sent).
func (r *runner) bytesPerProbe() func(netip.Addr) int {
	return func(a netip.Addr) int {
		switch r.cfg.Method {
		case "tcp-syn":
			return ipHeader(a) + 24 + ipTCPHeader(a) // SYN, and the kernel's RST to a SYN-ACK
		case "icmp":
			return ipHeader(a) + 24
		}
		return synBytes(a) + 2*(ipTCPHeader(a)+tcpTimestampOpt)
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

func (r *runner) probeTarget(ctx context.Context, pr Prober, t target, reserved int64) {
	var sent int64
	var rec ProbeRecord
	for attempt := 0; ; attempt++ {
		results, sentAt := r.probeOnce(ctx, pr, t)
		for _, res := range results {
			sent += int64(res.Bytes)
		}
		if ctx.Err() != nil {
			r.bytes[t.probe].Add(sent - reserved)
			return // incomplete target: not recorded, probed again on resume
		}
		rec = r.record(t, results)
		rec.Reprobed = attempt
		if rec.Responsive || !r.hostSuspect(results, sentAt) {
			break
		}
		// No answer, and the host may have lost it: no verdict yet.
		if attempt == 0 {
			r.health.countReprobe()
		}
		more := int64(r.cfg.Count * r.bytesPerProbe()(t.addr))
		limit := r.cfg.MaxBytes[t.probe]
		if attempt == maxReprobes || (limit > 0 && r.bytes[t.probe].Load()+more > limit) || sleepUntil(ctx, time.Now().Add(reprobePause)) != nil {
			rec.HostOverloaded = true
			r.health.countMarked()
			break
		}
		r.bytes[t.probe].Add(more)
		reserved += more
		r.probeStage.grow(r.cfg.Count)
	}
	r.bytes[t.probe].Add(sent - reserved)
	rec.Bytes = sent
	valid := r.validity()
	r.mu.Lock()
	r.results[t.probe][t.addr] = TargetResult{Responsive: rec.Responsive, MedianMs: rec.Median, HostOverloaded: rec.HostOverloaded}
	if !r.resolved {
		r.held = append(r.held, heldRecord{t, rec, valid})
		r.mu.Unlock()
		return
	}
	r.complete(&rec, t, valid)
	r.mu.Unlock()
	r.write(rec)
}

// probeOnce sends every probe of t (spaced, paced), then collects the
// answers; each probe has Timeout from its own send. One goroutine per
// target, no goroutine or context per probe.
func (r *runner) probeOnce(ctx context.Context, pr Prober, t target) ([]Result, []time.Time) {
	results := make([]Result, r.cfg.Count)
	pend := make([]Pending, 0, r.cfg.Count)
	sentAt := make([]time.Time, 0, r.cfg.Count)
	var last time.Time
	for i := range r.cfg.Count {
		if i > 0 {
			if sleepUntil(ctx, last.Add(r.cfg.Spacing)) != nil {
				break
			}
		}
		slot := r.lim.Reserve()
		if sleepUntil(ctx, slot) != nil {
			break
		}
		last = time.Now()
		r.health.sendLag(last.Sub(slot))
		r.probes.Add(1)
		pend = append(pend, start(ctx, pr, Target{Addr: t.addr, Port: r.cfg.Port}, r.cfg.Timeout))
		sentAt = append(sentAt, last)
	}
	for i, p := range pend {
		results[i] = p.Result(ctx, sentAt[i].Add(r.cfg.Timeout))
		r.probeStage.add(1)
	}
	return results, sentAt
}

// hostSuspect says whether an unanswered probe of results may owe its
// silence to this host rather than to the target (health).
func (r *runner) hostSuspect(results []Result, sentAt []time.Time) bool {
	for i, res := range results[:len(sentAt)] {
		if res.Kind != AnswerNone {
			continue
		}
		if res.HostSuspect || r.health.suspect(sentAt[i], sentAt[i].Add(r.cfg.Timeout)) {
			return true
		}
	}
	return false
}

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
	r.resolved = true
	close(r.resolvedCh)
	held := r.held
	r.held = nil
	for i := range held {
		r.complete(&held[i].rec, held[i].t, held[i].valid)
	}
	r.mu.Unlock()
	r.log.Info("probe records held until resolution ended", "count", len(held))
	for _, h := range held {
		r.write(h.rec)
	}
}

func (r *runner) record(t target, results []Result) ProbeRecord {
	rec := ProbeRecord{Type: "probe", ProbePath: t.probe, Address: t.addr, Method: r.cfg.Method, RTTsMs: []float64{}}
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
			r.log.Debug("probe failed", "path", t.probe, "addr", t.addr, "err", res.Err)
		}
	}
	rec.ProbeStats = statsOf(rec.RTTsMs)
	rec.Responsive = rec.answered()
	return rec
}
