package survey

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mptester/mptester/survey/internal/rawprobe"
)

// The probing stage is one event loop. One goroutine wakes on
// one timer, about every batchProbes probes at the current rate (tick): it
// sends every probe whose turn has come (spacing and rate) in one batch
// per engine, reads the replies that
// reached the engines' sockets meanwhile (on Linux the loop drains them
// itself; elsewhere receive goroutines queue them), and gives a verdict to each
// probe whose deadline has passed. Per-target state lives in slices
// indexed by job; the probes in flight are a FIFO in send order, which is
// deadline order since every probe has the same timeout. A goroutine per
// target woken by its own timers cost ~9.5 context switches and ~100 µs of
// CPU per probe (docs/benchmarks.md); engines that cannot send in batches
// (tcp-connect, test fakes) still get a goroutine per probe.

// sendTick is the longest sleep between two sends, and between two reads
// of the sockets while probes are in flight.
const sendTick = 10 * time.Millisecond

// The loop sleeps at least long enough for about batchProbes sends to
// come due at the current rate, between minTick and sendTick: the probes
// due within it go back to back. Fixed 10 ms batches were bursts of
// rate×10 ms (50 at 5,000/s), which overflow a short interface queue (a
// TUN's, a NIC's ring) where paced packets would not, and waking per
// batchProbes keeps the cost per probe of a wake-up the same at any rate.
const (
	batchProbes = 8
	minTick     = time.Millisecond
)

// tick is the loop's shortest sleep at rate probes/s (0: unlimited).
func tick(rate float64) time.Duration {
	if rate <= 0 {
		return minTick
	}
	return min(max(time.Duration(batchProbes*float64(time.Second)/rate), minTick), sendTick)
}

// probeJob is one target being probed (one attempt at a time).
type probeJob struct {
	t        target
	pr       int // index in loop.engines
	attempt  int
	reserved int64 // bytes taken from the path's budget
	sent     int64 // bytes sent, all attempts
	n, final int   // probes of this attempt sent, and with a verdict
	// gen changes with every attempt and every reuse of the job's index,
	// so a verdict due to an earlier one (a stale FIFO entry) is ignored.
	gen uint16
}

// probeRes is one probe's outcome, compactly; status 0: no verdict yet.
type probeRes struct {
	sent, rtt int64 // Unix ns, ns
	bytes     int32
	kind      uint8 // index in answerKinds
	status    uint8 // index in probeStatuses
	suspect   bool
}

var (
	answerKinds   = []AnswerKind{AnswerNone, AnswerSynAck, AnswerRST, AnswerConnect, AnswerEchoReply}
	probeStatuses = []ProbeStatus{"", ProbeSuccess, ProbeTimeout, ProbeUnreachable, ProbeCancelled, ProbeError}
)

func codeOf[T comparable](xs []T, x T) uint8 {
	for i, y := range xs {
		if y == x {
			return uint8(i)
		}
	}
	return uint8(len(xs) - 1)
}

// inflight is a probe of a batch engine waiting for its deadline.
type inflight struct {
	deadline int64
	cookie   uint64
	slot     uint32
	pr       int
}

// dueJob is a job whose next probe may go at `at` (Unix ns).
type dueJob struct {
	at  int64
	job uint32
}

type goDone struct {
	cookie uint64
	res    Result
}

type probeLoop struct {
	ctx     context.Context // an ended run records no more targets
	r       *runner
	engines []Engine
	batch   []rawprobe.Batch // nil where engines[i] is not one
	byPath  []int            // engine index per runner path index, -1: none
	count   int
	jobs    []probeJob
	res     []probeRes // count per job
	free    []uint32
	live    int
	due     []dueJob // min-heap on at
	fifo    []inflight
	head    int // fifo[head:] are in flight
	reqs    [][]rawprobe.Req
	answers []rawprobe.Answer
	errs    map[uint64]error // rare: errors of probes, for the debug log
	// wake is signalled by goroutine probes and, while wantWake, by the
	// receive loops when an answer is queued.
	wake     chan struct{}
	wantWake atomic.Bool
	mu       sync.Mutex // gdone
	gdone    []goDone
	gwg      sync.WaitGroup
	perProbe func(netip.Addr) int
	paused   bool // logged that MaxHeld paused probing
	// waitHost: jobs without an answer whose verdict waits for the host's
	// counters to be read past their last deadline (health samples them
	// every healthWindow; reading them on demand cost ~130 µs a time).
	waitHost []uint32
}

// A cookie names a probe: its job's generation, index and probe number.
func (l *probeLoop) cookieOf(ji uint32, i int) uint64 {
	return uint64(l.jobs[ji].gen)<<48 | uint64(ji)<<16 | uint64(i)
}

func splitCookie(c uint64) (ji uint32, i int, gen uint16) {
	return uint32(c >> 16), int(c & 0xffff), uint16(c >> 48)
}

// current says whether cookie names a probe of its job's attempt.
func (l *probeLoop) current(cookie uint64) bool {
	ji, _, gen := splitCookie(cookie)
	return l.jobs[ji].gen == gen
}

// probeLoop probes queued targets, at most MaxInFlight at once, until the
// queue is closed and drained or ctx is done.
func (r *runner) probeLoop(ctx context.Context, engines map[string]Engine) {
	l := &probeLoop{ctx: ctx, r: r, count: r.cfg.Count, wake: make(chan struct{}, 1), errs: map[uint64]error{}, perProbe: r.bytesPerProbe()}
	for _, name := range r.names {
		pr := engines[name]
		if pr == nil {
			l.byPath = append(l.byPath, -1)
			continue
		}
		l.byPath = append(l.byPath, len(l.engines))
		l.engines = append(l.engines, pr)
		bp, _ := pr.(rawprobe.Batch)
		l.batch = append(l.batch, bp)
		if bp != nil {
			bp.OnAnswer(l.signalIfWanted)
		}
	}
	l.reqs = make([][]rawprobe.Req, len(l.engines))
	defer l.stop(ctx)
	tm := time.NewTimer(time.Hour)
	defer tm.Stop()
	for {
		now := time.Now()
		l.collect()
		l.expire(now)
		l.hostKnown()
		if ctx.Err() != nil {
			return
		}
		closed, heldFull := l.admit(now)
		next := l.send(ctx, now)
		if closed && l.live == 0 {
			return
		}
		if l.head < len(l.fifo) {
			// Probes in flight: read the sockets at least every sendTick
			// (a reply read later would count as receive lag, the health
			// monitor's sign of overload), and at the head's deadline.
			d := min(l.fifo[l.head].deadline, now.Add(sendTick).UnixNano())
			if d <= now.UnixNano() { // waiting for a socket's watermark
				d = now.Add(rawprobe.RxPoll).UnixNano()
			}
			if next == 0 || d < next {
				next = d
			}
		}
		if len(l.waitHost) > 0 {
			if d := now.Add(sendTick).UnixNano(); next == 0 || d < next {
				next = d
			}
		}
		// Answers matter at once only when they free room for targets
		// waiting or end the run; else the next send collects them.
		l.wantWake.Store(len(l.due) == 0 || l.live >= r.cfg.MaxInFlight)
		var qwake, resolved <-chan struct{}
		switch {
		case heldFull:
			resolved = r.resolvedCh
		case l.live < r.cfg.MaxInFlight && !closed:
			qwake = r.queue.wake
		}
		var tc <-chan time.Time
		if next != 0 {
			tm.Reset(max(time.Duration(next-now.UnixNano()), tick(r.lim.Rate())))
			tc = tm.C
		}
		select {
		case <-tc:
		case <-l.wake:
		case <-qwake:
		case <-resolved:
		case <-ctx.Done():
		}
		tm.Stop()
	}
}

func (l *probeLoop) signalIfWanted() {
	if l.wantWake.Load() {
		l.signal()
	}
}

func (l *probeLoop) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// admit starts queued targets while there is room; closed: the queue is
// closed and empty; heldFull: waiting for resolution to end (MaxHeld).
func (l *probeLoop) admit(now time.Time) (closed, heldFull bool) {
	r := l.r
	for l.live < r.cfg.MaxInFlight {
		if l.heldFull() {
			return false, true
		}
		t, ok, cl := r.popTarget()
		if !ok {
			return cl, false
		}
		pri := l.byPath[t.pi]
		if pri < 0 {
			r.probeStage.grow(-l.count)
			continue
		}
		pp := r.probePath(t)
		reserved := int64(l.count * l.perProbe(r.dest(t)))
		if limit := r.cfg.MaxBytes[pp]; limit > 0 && r.bytes[pp].Load()+reserved > limit {
			r.overBudget(t)
			continue
		}
		// Reserve the budget now so targets in flight cannot overrun it.
		r.bytes[pp].Add(reserved)
		var ji uint32
		if n := len(l.free); n > 0 {
			ji = l.free[n-1]
			l.free = l.free[:n-1]
		} else {
			ji = uint32(len(l.jobs))
			l.jobs = append(l.jobs, probeJob{})
			l.res = append(l.res, make([]probeRes, l.count)...)
		}
		l.jobs[ji] = probeJob{t: t, pr: pri, reserved: reserved, gen: l.jobs[ji].gen + 1}
		l.live++
		l.push(dueJob{at: now.UnixNano(), job: ji})
	}
	return false, false
}

// heldFull: while resolution runs, one more target could take the held
// records past MaxHeld (only when they cannot be spilled).
func (l *probeLoop) heldFull() bool {
	r := l.r
	r.mu.Lock()
	defer r.mu.Unlock()
	full := !r.resolved && r.held.capped() && r.held.inMemory()+l.live >= r.cfg.MaxHeld
	if full && !l.paused {
		l.paused = true
		r.log.Info("probing paused until resolution ends", "held_records", r.cfg.MaxHeld)
	}
	return full
}

// send sends every probe due by now that the rate allows, and returns
// when the next one is due (Unix ns; 0: none).
func (l *probeLoop) send(ctx context.Context, now time.Time) int64 {
	r := l.r
	nowNs := now.UnixNano()
	var next int64
	lagged := false
	for len(l.due) > 0 && l.due[0].at <= nowNs {
		slot, ok := r.lim.take(now)
		if !ok {
			next = slot.UnixNano()
			break
		}
		if !lagged {
			// The first slot taken is the earliest: the wake-up's lag.
			r.health.sendLag(now.Sub(slot))
			lagged = true
		}
		ji := l.pop().job
		j := &l.jobs[ji]
		i := j.n
		j.n++
		r.probes.Add(1)
		cookie := l.cookieOf(ji, i)
		tg := Target{Addr: r.dest(j.t), Port: r.cfg.Port}
		if l.batch[j.pr] != nil {
			l.reqs[j.pr] = append(l.reqs[j.pr], rawprobe.Req{Dst: tg.Addr, Port: uint16(tg.Port), Cookie: cookie})
			continue
		}
		l.res[int(ji)*l.count+i].sent = nowNs
		if j.n < l.count {
			l.push(dueJob{at: nowNs + int64(r.cfg.Spacing), job: ji})
		}
		pr := l.engines[j.pr]
		l.gwg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
			res := pr.Probe(pctx, tg)
			cancel()
			l.mu.Lock()
			l.gdone = append(l.gdone, goDone{cookie, res})
			l.mu.Unlock()
			l.signal()
		})
	}
	for pi, reqs := range l.reqs {
		if len(reqs) == 0 {
			continue
		}
		l.batch[pi].SendBatch(ctx, reqs)
		for _, q := range reqs {
			ji, i, _ := splitCookie(q.Cookie)
			sent := q.Sent
			if sent.IsZero() {
				sent = now
			}
			l.res[int(ji)*l.count+i].sent = sent.UnixNano()
			if j := &l.jobs[ji]; j.n < l.count {
				l.push(dueJob{at: sent.UnixNano() + int64(r.cfg.Spacing), job: ji})
			}
			if q.Done {
				l.finish(q.Cookie, q.Res)
				continue
			}
			l.fifo = append(l.fifo, inflight{deadline: sent.Add(r.cfg.Timeout).UnixNano(), cookie: q.Cookie, slot: q.Slot, pr: pi})
		}
		clear(reqs)
		l.reqs[pi] = reqs[:0]
	}
	if next == 0 && len(l.due) > 0 {
		next = l.due[0].at
	}
	return next
}

// collect takes the answers queued by receive loops and goroutine probes.
func (l *probeLoop) collect() {
	timeout := l.r.cfg.Timeout
	for _, bp := range l.batch {
		if bp == nil {
			continue
		}
		bp.Poll()
		l.answers = bp.Answered(l.answers[:0])
		for _, a := range l.answers {
			res := Result{Kind: a.Kind, RTT: a.At.Sub(a.Sent), Status: ProbeSuccess, Bytes: a.Bytes}
			if a.At.After(a.Sent.Add(timeout)) {
				// It came after the probe's own deadline: a timeout.
				res = Result{Status: ProbeTimeout, Err: context.DeadlineExceeded, Bytes: a.Bytes}
			}
			l.finish(a.Cookie, res)
		}
	}
	l.mu.Lock()
	done := l.gdone
	l.gdone = nil
	l.mu.Unlock()
	for _, d := range done {
		l.finish(d.cookie, d.res)
	}
}

// expire gives their verdict to the probes whose deadline has passed.
func (l *probeLoop) expire(now time.Time) {
	nowNs := now.UnixNano()
	for l.head < len(l.fifo) {
		e := l.fifo[l.head]
		if e.deadline > nowNs {
			break
		}
		ji, i, _ := splitCookie(e.cookie)
		if l.current(e.cookie) && l.res[int(ji)*l.count+i].status == 0 {
			res, final := l.batch[e.pr].Expire(e.slot, time.Unix(0, e.deadline), now)
			if !final {
				break // a receive loop is behind: later verdicts wait too
			}
			l.finish(e.cookie, res)
		}
		l.head++
	}
	if l.head == len(l.fifo) {
		l.fifo, l.head = l.fifo[:0], 0
	} else if l.head > 4096 && l.head*2 > len(l.fifo) {
		n := copy(l.fifo, l.fifo[l.head:])
		l.fifo, l.head = l.fifo[:n], 0
	}
}

// finish records one probe's verdict; the job ends with its last one.
func (l *probeLoop) finish(cookie uint64, res Result) {
	if !l.current(cookie) {
		return
	}
	ji, i, _ := splitCookie(cookie)
	j := &l.jobs[ji]
	p := &l.res[int(ji)*l.count+i]
	if p.status != 0 {
		return
	}
	status := res.Status
	if status == "" {
		status = ProbeSuccess
	}
	*p = probeRes{sent: p.sent, rtt: int64(res.RTT), bytes: int32(res.Bytes), kind: codeOf(answerKinds, res.Kind),
		status: codeOf(probeStatuses, status), suspect: res.HostSuspect}
	if res.Err != nil && status != ProbeTimeout && status != ProbeSuccess {
		l.errs[cookie] = res.Err
	}
	j.sent += int64(res.Bytes)
	j.final++
	l.r.probeStage.add(1)
	if j.final == l.count && l.ctx.Err() == nil {
		l.jobDone(ji)
	}
}

// results of job ji's attempt as Results.
func (l *probeLoop) results(ji uint32) []Result {
	out := make([]Result, l.count)
	for i, p := range l.res[int(ji)*l.count : int(ji+1)*l.count] {
		out[i] = Result{Kind: answerKinds[p.kind], RTT: time.Duration(p.rtt), Status: probeStatuses[p.status],
			Bytes: int(p.bytes), HostSuspect: p.suspect}
		if len(l.errs) > 0 {
			c := l.cookieOf(ji, i)
			out[i].Err = l.errs[c]
			delete(l.errs, c)
		}
	}
	return out
}

// jobDone records a target, or probes it again when it got no answer
// while the host may have lost it (health).
func (l *probeLoop) jobDone(ji uint32) {
	r := l.r
	j := &l.jobs[ji]
	if d := l.silentUntil(ji); d > 0 && !r.health.current(time.Unix(0, d)) {
		l.waitHost = append(l.waitHost, ji)
		return
	}
	t := j.t
	pp := r.probePath(t)
	results := l.results(ji)
	rec := r.record(t, results)
	rec.Reprobed = j.attempt
	if !rec.Responsive && l.hostSuspect(ji, results) {
		// No answer, and the host may have lost it: no verdict yet.
		if j.attempt == 0 {
			r.health.countReprobe()
		}
		more := int64(l.count * l.perProbe(r.dest(t)))
		if limit := r.cfg.MaxBytes[pp]; j.attempt == maxReprobes || (limit > 0 && r.bytes[pp].Load()+more > limit) {
			rec.HostOverloaded = true
			r.health.countMarked()
		} else {
			r.bytes[pp].Add(more)
			j.reserved += more
			j.attempt++
			j.n, j.final = 0, 0
			j.gen++
			clear(l.res[int(ji)*l.count : int(ji+1)*l.count])
			r.probeStage.grow(l.count)
			l.push(dueJob{at: time.Now().Add(reprobePause).UnixNano(), job: ji})
			return
		}
	}
	r.bytes[pp].Add(j.sent - j.reserved)
	rec.Bytes = j.sent
	l.jobs[ji] = probeJob{gen: j.gen + 1} // its FIFO entries are stale now
	clear(l.res[int(ji)*l.count : int(ji+1)*l.count])
	l.free = append(l.free, ji)
	l.live--
	valid := r.validity()
	r.mu.Lock()
	r.setResult(t.ai, int(t.pi), TargetResult{Responsive: rec.Responsive, MedianMs: rec.Median, HostOverloaded: rec.HostOverloaded})
	if !r.resolved {
		r.held.add(heldRecord{t, rec, valid})
		r.mu.Unlock()
		return
	}
	r.complete(&rec, t, valid)
	r.mu.Unlock()
	r.write(rec)
}

// silentUntil is the last deadline of job ji's probes when none was
// answered (0 when one was).
func (l *probeLoop) silentUntil(ji uint32) int64 {
	var last int64
	for _, p := range l.res[int(ji)*l.count : int(ji+1)*l.count] {
		if answerKinds[p.kind] != AnswerNone {
			return 0
		}
		last = max(last, p.sent+int64(l.r.cfg.Timeout))
	}
	return last
}

// hostKnown gives their verdict to the jobs that waited for the host's
// counters, once these are read past their deadlines.
func (l *probeLoop) hostKnown() {
	if len(l.waitHost) == 0 || l.ctx.Err() != nil {
		return
	}
	wait := l.waitHost
	l.waitHost = nil
	for _, ji := range wait {
		l.jobDone(ji) // waits again when still unknown
	}
	clear(wait)
}

// hostSuspect says whether an unanswered probe of job ji may owe its
// silence to this host rather than to the target (health).
func (l *probeLoop) hostSuspect(ji uint32, results []Result) bool {
	for i, res := range results {
		if res.Kind != AnswerNone {
			continue
		}
		sent := time.Unix(0, l.res[int(ji)*l.count+i].sent)
		if res.HostSuspect || l.r.health.suspect(sent, sent.Add(l.r.cfg.Timeout)) {
			return true
		}
	}
	return false
}

// stop ends the loop: goroutine probes are waited for and, when ctx
// ended, the targets still in flight give back the budget they did not
// use (they are not recorded: probed again on resume).
func (l *probeLoop) stop(ctx context.Context) {
	l.gwg.Wait()
	if ctx.Err() == nil {
		return
	}
	l.collect()
	for ji := range l.jobs {
		j := &l.jobs[ji]
		if j.n == 0 && j.final == 0 && j.attempt == 0 && j.reserved == 0 {
			continue // free
		}
		// Probes sent without a verdict cost their packet.
		for _, p := range l.res[ji*l.count : ji*l.count+j.n] {
			if p.status == 0 {
				j.sent += int64(rawprobe.ProbeBytes(l.r.dest(j.t)))
			}
		}
		l.r.bytes[l.r.probePath(j.t)].Add(j.sent - j.reserved)
	}
}

// The due heap, by time then job index.
func (l *probeLoop) less(a, b int) bool {
	x, y := l.due[a], l.due[b]
	return x.at < y.at || (x.at == y.at && x.job < y.job)
}

func (l *probeLoop) push(d dueJob) {
	l.due = append(l.due, d)
	for i := len(l.due) - 1; i > 0; {
		p := (i - 1) / 2
		if !l.less(i, p) {
			break
		}
		l.due[i], l.due[p] = l.due[p], l.due[i]
		i = p
	}
}

func (l *probeLoop) pop() dueJob {
	top := l.due[0]
	n := len(l.due) - 1
	l.due[0] = l.due[n]
	l.due = l.due[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && l.less(c+1, c) {
			c++
		}
		if !l.less(c, i) {
			break
		}
		l.due[i], l.due[c] = l.due[c], l.due[i]
		i = c
	}
	return top
}
