package probe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// The resolver is event-driven: a lookup is state (a lookupRun and its
// queries), not a goroutine. A query's attempt is sent on the shared
// socket of its server, its answer is handed over by the socket's reader
// (matched by query ID, checked against the question), its timeout is a
// timer. A survey keeps hundreds of lookups in flight per path; a
// goroutine for each held 11.5 MB of stacks at 1M domains.

// udpMux is one UDP socket per server, bound to the path, shared by every
// query to that server. A socket per query cost a socket, a bind, a
// connect and a close each, a fifth of the resolver's CPU. The
// socket closes itself after muxIdle without queries. Guarded by
// Resolver.mu.
type udpMux struct {
	conn     net.Conn // nil while closed
	waiters  map[uint16]*pendingQuery
	inflight int             // attempts holding one of the server's slots
	queue    []*pendingQuery // attempts waiting for a slot, oldest first

	// The adaptive window (ResolverOptions.Adaptive): how many attempts
	// may hold a slot, grown while answers come back as fast as the
	// fastest seen, without more SERVFAILs or losses than usual, cut on
	// the opposite. An attempt unanswered for lossDelay is presumed lost:
	// it gives its slot back (it loads the server no more; a name that is
	// never answered must not hold a slot for its whole timeout), keeps
	// its timer and still takes a late answer.
	//
	// One name's silence is not the server's: a name that is never
	// answered is a steady small share of the first attempts presumed
	// lost, and no retry of it is ever answered. Only a rise of that
	// share (many queries lost at once), a name answering a retry after
	// its attempt timed out, late answers, a rising RTT or rising
	// SERVFAILs cut the window.
	win            float64
	peak           float64
	minRTT, srtt   time.Duration
	minAt          time.Time     // when minRTT was seen
	lost           int           // attempts presumed lost, not holding a slot
	sent           []sentAttempt // attempts in the order sent
	sweep          *time.Timer
	sweepAt        time.Time // when sweep fires; zero when idle
	lastCut        time.Time
	lastAnswer     time.Time
	missAnswered   time.Time // when a name that timed out here was last answered (here or elsewhere)
	timeouts       int       // attempts that timed out
	cuts           [cutReasons]int
	sfFast, sfSlow float64 // SERVFAILs per answer: recent and long-run averages
	lsFast, lsSlow float64 // first attempts presumed lost per first attempt ended: the same
}

type sentAttempt struct {
	pq  *pendingQuery
	gen int
}

const muxIdle = 2 * time.Second

// muxRcvBuf holds a burst of a resolver cap's worth of answers.
const muxRcvBuf = 4 << 20

// errMuxMismatch: the answer carrying our ID is for another question.
var errMuxMismatch = errors.New("answer does not match the question")

// Query states, guarded by Resolver.mu.
const (
	qIdle   = iota // between attempts
	qQueued        // waiting for a slot at its server
	qSent          // on the wire, a waiter with a timer
	qTCP           // truncated over UDP, asked again over TCP (holds its slot)
	qDone
)

// lookupRun is one lookup in flight.
type lookupRun struct {
	r       *Resolver
	ctx     context.Context
	name    string
	fqdn    string // name as asked
	start   time.Time
	queries []pendingQuery  // qs[:n]: A and/or AAAA
	qs      [2]pendingQuery // the queries' storage: one allocation a lookup
	left    int             // queries not done; guarded by r.mu
	stop    func() bool
	done    func(Lookup)
}

// pendingQuery is one A or AAAA query of a lookup, through its attempts.
type pendingQuery struct {
	l *lookupRun
	// wire is the query packed once; an attempt writes its ID into the
	// first two bytes (a lookup in flight holds these ~50 bytes, not a
	// dns.Msg, and an attempt packs nothing).
	wire    []byte
	packErr error // the name cannot be asked: every attempt fails with it
	qtype   uint16
	q       Query
	first   int // server of the first attempt
	start   time.Time
	bytes   int64
	addrs   []netip.Addr
	chain   []string

	// Guarded by r.mu.
	state  int
	server int    // of the current attempt
	id     uint16 // of the current attempt
	gen    int    // attempt number, so that a stale timer does nothing
	timer  *time.Timer
	sentAt time.Time // of the current attempt
	lost   bool      // the current attempt is presumed lost: it holds no slot
	missed int       // server of the last attempt that timed out; -1: none
	graced bool      // the current attempt's late timer was given its grace
	// hostChecked: the current attempt was asked about (HostLost) when
	// it was presumed lost.
	hostChecked bool
	// hostLost: a counted attempt may have been lost by the host (no
	// more could be added).
	hostLost bool
}

// Start looks name up for family fam (A, AAAA or both; the queries go out
// together, so a dead name costs one timeout, not two) and calls done with
// the result from another goroutine, exactly once. A cancelled ctx ends
// the lookup at once with DNSError.
func (r *Resolver) Start(ctx context.Context, name string, fam Family, done func(Lookup)) {
	l := &lookupRun{r: r, ctx: ctx, name: name, fqdn: dns.Fqdn(name), start: time.Now(), done: done}
	qts := qtypes(fam)
	l.queries = l.qs[:len(qts)]
	for i, qt := range qts {
		pq := &l.queries[i]
		*pq = pendingQuery{l: l, qtype: qt, q: Query{QType: dns.TypeToString[qt]},
			first: int(r.next.Add(1)), start: l.start, missed: -1}
		pq.wire, pq.packErr = packQuery(l.fqdn, qt)
	}
	l.left = len(l.queries)
	// Under r.mu: with ctx already done, cancel runs at once in another
	// goroutine, and it (and the finish that calls stop) takes r.mu first.
	r.mu.Lock()
	l.stop = context.AfterFunc(ctx, l.cancel)
	r.mu.Unlock()
	for i := range l.queries {
		pq := &l.queries[i]
		r.launch(pq)
	}
}

// Lookup resolves name for family fam and waits for the answer.
func (r *Resolver) Lookup(ctx context.Context, name string, fam Family) Lookup {
	ch := make(chan Lookup, 1)
	r.Start(ctx, name, fam, func(l Lookup) { ch <- l })
	return <-ch
}

// launch starts pq's next attempt, or queues it behind its server's cap.
func (r *Resolver) launch(pq *pendingQuery) {
	if err := pq.l.ctx.Err(); err != nil {
		r.finish(pq, nil, err)
		return
	}
	r.mu.Lock()
	if pq.state != qIdle {
		r.mu.Unlock() // cancelled meanwhile
		return
	}
	i := (pq.first + pq.q.Attempts) % len(r.servers)
	if pq.q.Attempts == 0 {
		i = r.answeringLocked(i)
		pq.first = i
	}
	pq.q.Attempts++
	pq.q.Server, pq.server = r.servers[i], i
	mx := &r.muxes[i]
	// A retry replaces its own timed-out attempt: it goes at once (its
	// timer exact), the window only holding new queries back.
	if mx.inflight >= r.windowLocked(mx) && !(r.opts.Adaptive && pq.q.Attempts > 1) {
		pq.state = qQueued
		mx.queue = append(mx.queue, pq)
		r.mu.Unlock()
		return
	}
	mx.inflight++
	var failed []failedQuery
	if err := r.sendLocked(pq); err != nil {
		failed = append(r.releaseLocked(i, true), failedQuery{pq, err})
	}
	r.mu.Unlock()
	r.finishFailed(failed)
}

type failedQuery struct {
	pq  *pendingQuery
	err error
}

func (r *Resolver) finishFailed(fs []failedQuery) {
	for _, f := range fs {
		r.finish(f.pq, nil, f.err)
	}
}

// sendLocked sends pq's attempt on its server's socket (opened if closed)
// and arms its timeout. pq holds a slot. On error pq is idle.
func (r *Resolver) sendLocked(pq *pendingQuery) error {
	i := pq.server
	mx := &r.muxes[i]
	if mx.conn == nil {
		conn, err := dialResolver(pq.l.ctx, r.path, "udp", r.servers[i].String())
		if err != nil {
			pq.state = qIdle
			return err
		}
		// Every answer from this server arrives on this one socket.
		if sc, ok := conn.(syscall.Conn); ok {
			RaiseReceiveBuffer(sc, muxRcvBuf)
		}
		mx.conn, mx.waiters = conn, map[uint16]*pendingQuery{}
		go r.read(mx, conn)
	}
	var id uint16
	for {
		id = uint16(rand.Uint32())
		if _, busy := mx.waiters[id]; !busy {
			break
		}
	}
	if pq.packErr != nil {
		pq.state = qIdle
		return pq.packErr
	}
	b := pq.wire
	binary.BigEndian.PutUint16(b, id)
	n := int64(len(b)) + overhead("udp", r.servers[i].Addr())
	r.opts.Bytes.Add(n)
	pq.bytes += n
	// Dated before the write: a goroutine descheduled after it would
	// date the attempt late and make its round trip look short (a false
	// fastest RTT would stop the window's growth for minRTTFor).
	sentAt := time.Now()
	if _, err := mx.conn.Write(b); err != nil {
		pq.state = qIdle
		return err
	}
	mx.waiters[id] = pq
	pq.id, pq.state = id, qSent
	pq.gen++
	gen := pq.gen
	pq.sentAt, pq.lost, pq.graced, pq.hostChecked = sentAt, false, false, false
	pq.timer = time.AfterFunc(r.opts.Timeout, func() { r.timedOut(pq, gen) })
	if r.opts.Adaptive {
		mx.sent = append(mx.sent, sentAttempt{pq, gen})
		r.armSweepLocked(i, pq.sentAt)
	}
	return nil
}

// releaseLocked ends an attempt at server i (held: it held a slot, it
// was not presumed lost) and gives free slots to the oldest queued
// attempts; it returns the attempts that could not be sent.
func (r *Resolver) releaseLocked(i int, held bool) []failedQuery {
	mx := &r.muxes[i]
	if held {
		mx.inflight--
	}
	return r.fillLocked(i)
}

// heldLocked ends pq's attempt's claim on a slot: whether it held one.
func (r *Resolver) heldLocked(pq *pendingQuery) bool {
	if pq.lost {
		pq.lost = false
		r.muxes[pq.server].lost--
		return false
	}
	return true
}

// fillLocked sends queued attempts at server i while it has free slots.
func (r *Resolver) fillLocked(i int) []failedQuery {
	mx := &r.muxes[i]
	var failed []failedQuery
	for mx.inflight < r.windowLocked(mx) && len(mx.queue) > 0 {
		pq := mx.queue[0]
		mx.queue[0] = nil
		mx.queue = mx.queue[1:]
		if err := pq.l.ctx.Err(); err != nil {
			pq.state = qIdle
			failed = append(failed, failedQuery{pq, err})
			continue
		}
		mx.inflight++
		if err := r.sendLocked(pq); err != nil {
			mx.inflight--
			failed = append(failed, failedQuery{pq, err})
		}
	}
	if len(mx.queue) == 0 {
		mx.queue = nil // let the backing array go after a burst
		if mx.inflight < r.windowLocked(mx) {
			select { // room for more lookups
			case r.room <- struct{}{}:
			default:
			}
		}
	}
	return failed
}

// timedOut ends attempt gen of pq without an answer: the next server is
// tried while retries are left. An attempt whose answer the host may
// have lost (ResolverOptions.HostLost) does not count as one.
func (r *Resolver) timedOut(pq *pendingQuery, gen int) {
	now := time.Now()
	r.mu.Lock()
	if pq.state != qSent || pq.gen != gen {
		r.mu.Unlock()
		return
	}
	// A timer that fired well after its deadline: the resolver did not
	// run then, and an answer that came in time may wait unread in the
	// socket. The reader gets as long again (once) to hand it over.
	if late := now.Sub(pq.sentAt.Add(r.opts.Timeout)); late > lateTimer && !pq.graced {
		pq.graced = true
		pq.timer = time.AfterFunc(min(late, r.opts.Timeout), func() { r.timedOut(pq, gen) })
		r.mu.Unlock()
		return
	}
	suspect := false
	if r.opts.HostLost != nil && !pq.hostChecked {
		// A host loss from its send until its answer was due (two
		// smoothed round trips, at most the loss delay after which the
		// sweep presumes it lost, the server's doing) may have been this
		// query or its answer. Asked without r.mu: it may read the host's
		// counters.
		sent, due := pq.sentAt, r.answerDueLocked(&r.muxes[pq.server])
		r.mu.Unlock()
		suspect = r.opts.HostLost(sent, sent.Add(due))
		r.mu.Lock()
		if pq.state != qSent || pq.gen != gen {
			r.mu.Unlock()
			return
		}
	}
	if suspect {
		if pq.q.HostRetries < MaxHostRetries {
			pq.q.HostRetries++
		} else {
			pq.hostLost = true
		}
	}
	mx := &r.muxes[pq.server]
	if mx.waiters[pq.id] == pq {
		delete(mx.waiters, pq.id)
	}
	pq.state = qIdle
	held := r.heldLocked(pq)
	r.timeoutLocked(pq.server)
	pq.missed = pq.server
	failed := r.releaseLocked(pq.server, held)
	retry := pq.q.Attempts-pq.q.HostRetries <= r.opts.Retries
	if !retry {
		pq.q.HostSuspect = pq.hostLost
	}
	r.mu.Unlock()
	r.finishFailed(failed)
	if retry && pq.l.ctx.Err() == nil {
		r.launch(pq)
		return
	}
	r.finish(pq, nil, fmt.Errorf("no answer from %s within %v: %w", pq.q.Server, r.opts.Timeout, os.ErrDeadlineExceeded))
}

// answered takes an answer that carried pq's current ID.
func (r *Resolver) answered(pq *pendingQuery, id uint16, b []byte) {
	resp := new(dns.Msg)
	if err := resp.Unpack(b); err != nil || !pq.asked(resp, id) {
		// Not ours after all (spoofed, or a late answer to an earlier
		// query that had this ID): keep waiting.
		r.mu.Lock()
		if pq.state != qSent || pq.id != id {
			r.mu.Unlock()
			return
		}
		mx := &r.muxes[pq.server]
		if _, busy := mx.waiters[id]; !busy {
			mx.waiters[id] = pq
			r.mu.Unlock()
			return
		}
		pq.timer.Stop()
		pq.state = qIdle
		failed := r.releaseLocked(pq.server, r.heldLocked(pq))
		r.mu.Unlock()
		r.finishFailed(failed)
		r.finish(pq, nil, fmt.Errorf("%w (and its ID is taken again)", errMuxMismatch))
		return
	}
	r.mu.Lock()
	if pq.state != qSent || pq.id != id {
		r.mu.Unlock()
		return
	}
	pq.timer.Stop()
	late := pq.lost
	held := r.heldLocked(pq)
	now := time.Now()
	r.adaptLocked(pq.server, now, now.Sub(pq.sentAt), pq.q.Attempts == 1, late, resp.Rcode == dns.RcodeServerFailure)
	if pq.missed >= 0 && r.opts.Adaptive {
		// The name answers: the attempt that timed out was lost.
		mx := &r.muxes[pq.missed]
		mx.missAnswered = now
		r.cutLocked(mx, now, CutLoss)
	}
	if resp.Truncated {
		if !held {
			r.muxes[pq.server].inflight++ // over TCP it holds a slot again
		}
		pq.state = qTCP // keeps its slot
		r.mu.Unlock()
		go r.overTCP(pq)
		return
	}
	pq.state = qIdle
	failed := r.releaseLocked(pq.server, held)
	r.mu.Unlock()
	r.finishFailed(failed)
	r.finish(pq, resp, nil)
}

// overTCP asks a truncated question again over TCP. An exchange that
// timed out while the host lost packets or stalled (HostLost) is asked
// again, like a UDP attempt the host may have lost.
func (r *Resolver) overTCP(pq *pendingQuery) {
	pq.q.TCP = true
	var resp *dns.Msg
	var err error
	for {
		t0 := time.Now()
		resp, err = r.exchangeOn(pq.l.ctx, "tcp", pq.q.Server, pq.msg(), &pq.bytes)
		if err == nil || !isTimeout(err) || pq.l.ctx.Err() != nil || r.opts.HostLost == nil || !r.opts.HostLost(t0, time.Now()) {
			break
		}
		r.mu.Lock()
		more := pq.q.HostRetries < MaxHostRetries
		if more {
			pq.q.HostRetries++
			pq.q.Attempts++
		} else {
			pq.hostLost = true
			pq.q.HostSuspect = true
		}
		r.mu.Unlock()
		if !more {
			break
		}
	}
	r.mu.Lock()
	pq.state = qIdle
	failed := r.releaseLocked(pq.server, true)
	r.mu.Unlock()
	r.finishFailed(failed)
	r.finish(pq, resp, err)
}

// cancel ends every query of l that is still waiting, with ctx's error.
func (l *lookupRun) cancel() {
	r := l.r
	var ended []*pendingQuery
	var failed []failedQuery
	r.mu.Lock()
	for i := range l.queries {
		pq := &l.queries[i]
		mx := &r.muxes[pq.server]
		switch pq.state {
		case qSent:
			pq.timer.Stop()
			if mx.waiters[pq.id] == pq {
				delete(mx.waiters, pq.id)
			}
			failed = append(failed, r.releaseLocked(pq.server, r.heldLocked(pq))...)
		case qQueued:
			mx.queue = slices.DeleteFunc(mx.queue, func(x *pendingQuery) bool { return x == pq })
		case qIdle:
		default:
			continue // over TCP: the exchange honours ctx; done: nothing to do
		}
		pq.state = qIdle
		ended = append(ended, pq)
	}
	r.mu.Unlock()
	r.finishFailed(failed)
	for _, pq := range ended {
		r.finish(pq, nil, l.ctx.Err())
	}
}

// finish ends pq with an answer or an error; the last query of a lookup
// to end calls its done.
func (r *Resolver) finish(pq *pendingQuery, resp *dns.Msg, err error) {
	l := pq.l
	r.mu.Lock()
	if pq.state == qDone {
		r.mu.Unlock()
		return // ended by another event (a cancellation, a late timer)
	}
	pq.state = qDone // from here on pq is this goroutine's alone
	r.mu.Unlock()
	q := &pq.q
	q.Time = time.Since(pq.start)
	switch {
	case err != nil && isTimeout(err):
		q.Status, q.Err = DNSTimeout, err
	case err != nil:
		if pe := l.ctx.Err(); pe != nil && !errors.Is(err, pe) {
			err = fmt.Errorf("%w (%v)", pe, err) // report the cancellation, whatever the attempt said
		}
		q.Status, q.Err = DNSError, err
	default:
		q.Status = rcodeStatus(resp.Rcode)
		if resp.Rcode == dns.RcodeSuccess {
			pq.addrs, pq.chain = answers(l.fqdn, pq.qtype, resp)
		}
	}
	r.mu.Lock()
	l.left--
	last, stop := l.left == 0, l.stop
	r.mu.Unlock()
	if last {
		stop()
		l.done(l.result())
	}
}

func (l *lookupRun) result() Lookup {
	n := 0
	for i := range l.queries {
		pq := &l.queries[i]
		n += len(pq.addrs)
	}
	// Sized once and deduplicated by a scan (a name has few addresses):
	// no map and no regrowth a lookup, less garbage for a survey under
	// its memory limit.
	out := Lookup{Name: l.name, Answers: make([]netip.Addr, 0, n), Queries: make([]Query, 0, len(l.queries))}
	for i := range l.queries {
		pq := &l.queries[i]
		out.Queries = append(out.Queries, pq.q)
		out.Bytes += pq.bytes
		if len(pq.chain) > len(out.CNAMEs) {
			out.CNAMEs = pq.chain
		}
		for _, x := range pq.addrs {
			if !slices.Contains(out.Answers, x) {
				out.Answers = append(out.Answers, x)
			}
		}
	}
	out.Time = time.Since(l.start)
	out.Status = lookupStatus(out.Queries, len(out.Answers) > 0)
	return out
}

// asked says whether a is an answer with ID id to pq's question.
func (pq *pendingQuery) asked(a *dns.Msg, id uint16) bool {
	if a.Id != id || len(a.Question) != 1 {
		return false
	}
	y := a.Question[0]
	return y.Qtype == pq.qtype && y.Qclass == dns.ClassINET && strings.EqualFold(pq.l.fqdn, y.Name)
}

// msg is pq's question as a message (for an exchange over TCP), with a
// fresh ID.
func (pq *pendingQuery) msg() *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(pq.l.fqdn, pq.qtype)
	m.SetEdns0(ednsSize, false)
	return m
}

// packQuery packs the query dns.Msg packs after SetQuestion(fqdn, qt)
// and SetEdns0(ednsSize, false), with ID 0: a header asking for
// recursion, one question of class IN, one OPT record
// (TestPackQueryAsMsg holds it to dns.Msg's packing).
func packQuery(fqdn string, qt uint16) ([]byte, error) {
	const hdr, opt = 12, 11
	b := make([]byte, hdr+len(fqdn)+2+4+opt)
	b[2] = 1  // RD
	b[5] = 1  // QDCOUNT
	b[11] = 1 // ARCOUNT
	off, err := dns.PackDomainName(fqdn, b, hdr, nil, false)
	if err != nil {
		return nil, fmt.Errorf("cannot ask %q: %w", fqdn, err)
	}
	binary.BigEndian.PutUint16(b[off:], qt)
	binary.BigEndian.PutUint16(b[off+2:], dns.ClassINET)
	off += 4
	// OPT: root name, type, UDP payload size as class, TTL 0, no data.
	b[off] = 0
	binary.BigEndian.PutUint16(b[off+1:], dns.TypeOPT)
	binary.BigEndian.PutUint16(b[off+3:], ednsSize)
	clear(b[off+5 : off+opt])
	return b[:off+opt], nil
}

// read hands answers to their queries until the socket fails or has been
// idle for muxIdle.
func (r *Resolver) read(mx *udpMux, conn net.Conn) {
	buf := make([]byte, 65535)
	for {
		conn.SetReadDeadline(time.Now().Add(muxIdle))
		n, err := conn.Read(buf)
		r.mu.Lock()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && len(mx.waiters) > 0 && mx.conn == conn {
				r.mu.Unlock()
				continue
			}
			if mx.conn == conn {
				mx.conn = nil // waiters left time out on their own
			}
			r.mu.Unlock()
			conn.Close()
			return
		}
		var pq *pendingQuery
		var id uint16
		if n >= 12 {
			id = binary.BigEndian.Uint16(buf)
			if pq = mx.waiters[id]; pq != nil {
				delete(mx.waiters, id)
			}
		}
		r.mu.Unlock()
		if pq != nil {
			r.answered(pq, id, buf[:n]) // unpacked before the next read
		}
	}
}

// Why a window was cut (ServerLoad.Cuts).
const (
	CutQueue    = iota // the smoothed RTT rose well above the fastest
	CutLate            // an answer came after its attempt was presumed lost
	CutLoss            // a name answered a retry: its earlier attempt was lost
	CutServFail        // SERVFAILs rose above their usual share
	CutDrops           // first attempts presumed lost rose above their usual share
	cutReasons
)

// The adaptive window's constants. The window starts small and grows by
// one slot per answer (doubling each round trip) while answers come back
// within minRTT*growRTT+growSlack, up to the cap; a cut keeps cutFactor
// of it, at most once per two smoothed round trips, and stops growth for
// as long. Growth stays multiplicative after a cut: linear growth would
// need hundreds of round trips to get back from one spurious cut, and the
// cap bounds the load.
const (
	initWindow = 32
	minWindow  = initWindow
	growRTT    = 1.5
	growSlack  = 10 * time.Millisecond
	cutFactor  = 0.7
	// Queueing: the smoothed RTT above minRTT*queueRTT+queueSlack.
	queueRTT   = 3
	queueSlack = 50 * time.Millisecond
	// Rising SERVFAILs (an overloaded resolver's answer) or losses: their
	// recent share (over ~32 answers; ~128 first attempts, as a handful of
	// never-answered names is presumed lost together after the answers
	// of the names sent with them) above twice the long-run one (~1,024)
	// plus riseSlack; names that always fail or are never answered are a
	// steady share, not a rise.
	riseSlack = 0.1
	// lossFloor is added to twice minRTT for the delay after which an
	// unanswered attempt is presumed lost.
	lossFloor = 100 * time.Millisecond
	// lateTimer: an attempt's timer firing this late means the resolver
	// did not run at its deadline.
	lateTimer = 50 * time.Millisecond
	// minRTTFor: minRTT is the fastest answer of about the last 2 s, so
	// that a host that got busier (its own CPU adds to every round trip)
	// is not read as a queue at the server for the rest of the run.
	minRTTFor = 2 * time.Second
)

// windowLocked is how many attempts may hold a slot at mx's server.
func (r *Resolver) windowLocked(mx *udpMux) int {
	if !r.opts.Adaptive {
		return max(r.opts.Cap, 1)
	}
	if mx.win == 0 {
		mx.win = float64(min(initWindow, max(r.opts.Cap, 1)))
		mx.peak = mx.win
	}
	return int(mx.win)
}

// adaptLocked feeds an answer from server i into its window: after rtt,
// late (after its attempt was presumed lost: queueing far beyond the
// usual round trip), servfail (its rcode).
func (r *Resolver) adaptLocked(i int, now time.Time, rtt time.Duration, first, late, servfail bool) {
	if !r.opts.Adaptive {
		return
	}
	mx := &r.muxes[i]
	r.windowLocked(mx)
	mx.lastAnswer = now
	if first && !late { // a late one was counted lost by the sweep
		r.firstEndedLocked(mx, now, false)
	}
	sf := 0.0
	if servfail {
		sf = 1
	}
	mx.sfFast += (sf - mx.sfFast) / 32
	mx.sfSlow += (sf - mx.sfSlow) / 1024
	if late {
		r.cutLocked(mx, now, CutLate)
		return
	}
	if mx.minRTT == 0 || rtt <= mx.minRTT || now.Sub(mx.minAt) > minRTTFor {
		mx.minRTT, mx.minAt = rtt, now
	}
	if mx.srtt == 0 {
		mx.srtt = rtt
	} else {
		mx.srtt += (rtt - mx.srtt) / 8
	}
	switch {
	case mx.sfFast > 2*mx.sfSlow+riseSlack:
		r.cutLocked(mx, now, CutServFail)
	case mx.srtt > time.Duration(queueRTT*float64(mx.minRTT))+queueSlack:
		r.cutLocked(mx, now, CutQueue)
	case rtt <= time.Duration(growRTT*float64(mx.minRTT))+growSlack && now.Sub(mx.lastCut) >= cutGap(mx):
		// No growth until a cut's cause has had a chance to recur: a
		// server that keeps losing queries is cut every cutGap and its
		// window falls, where doubling per round trip would outgrow the
		// cuts.
		mx.win = min(mx.win+1, float64(max(r.opts.Cap, 1)))
		mx.peak = max(mx.peak, mx.win)
	}
}

// timeoutLocked: an attempt at server i timed out. Whether it was lost
// shows when a retry of the name is answered (answered cuts the window
// of the server that missed it); a name that never answers says nothing
// about the server, and neither does the end of a run, when only such
// names are left and the server answers nothing for a while.
func (r *Resolver) timeoutLocked(i int) {
	if !r.opts.Adaptive {
		return
	}
	mx := &r.muxes[i]
	r.windowLocked(mx)
	mx.timeouts++
}

// firstEndedLocked feeds a first attempt's end into mx's loss share:
// lost (presumed lost by the sweep) or answered. Retries are left out:
// they are of names already unanswered once, the never-answered ones
// among them, and at the end of a run they are all that is left.
func (r *Resolver) firstEndedLocked(mx *udpMux, now time.Time, lost bool) {
	x := 0.0
	if lost {
		x = 1
	}
	mx.lsFast += (x - mx.lsFast) / 128
	mx.lsSlow += (x - mx.lsSlow) / 1024
	if lost && mx.lsFast > 2*mx.lsSlow+riseSlack {
		r.cutLocked(mx, now, CutDrops)
	}
}

// silentLocked: server i has let attempts time out, answered nothing for
// a whole timeout, and a name it missed since was answered (by another
// server, or by it later): the server is mute, not only its names (e.g.
// an unreachable resolver of the path).
func (r *Resolver) silentLocked(i int, now time.Time) bool {
	mx := &r.muxes[i]
	return mx.timeouts > 0 && now.Sub(mx.lastAnswer) > r.opts.Timeout && !mx.missAnswered.Before(mx.lastAnswer)
}

// answeringLocked is the server for a first attempt: i, or after it the
// first that is not silent. A silent server's slots would go to attempts
// that only wait for their timeout; it still gets retries, and answering
// one makes it a server for first attempts again.
func (r *Resolver) answeringLocked(i int) int {
	if !r.opts.Adaptive {
		return i
	}
	now := time.Now()
	for k := range len(r.servers) {
		if j := (i + k) % len(r.servers); !r.silentLocked(j, now) {
			return j
		}
	}
	return i
}

func (r *Resolver) cutLocked(mx *udpMux, now time.Time, why int) {
	if !r.opts.Adaptive || now.Sub(mx.lastCut) < cutGap(mx) {
		return
	}
	mx.lastCut = now
	mx.win = max(mx.win*cutFactor, minWindow)
	mx.cuts[why]++
}

// answerDueLocked: an attempt's answer is due this long after its send.
func (r *Resolver) answerDueLocked(mx *udpMux) time.Duration {
	d := r.lossDelayLocked(mx)
	if mx.srtt > 0 {
		d = min(d, 2*mx.srtt)
	}
	return d
}

// cutGap: a window is cut at most once per two smoothed round trips (a
// cut shows in the answers a round trip later), and grows only as long
// after its last cut.
func cutGap(mx *udpMux) time.Duration { return 2 * max(mx.srtt, 10*time.Millisecond) }

// lossDelayLocked: an attempt unanswered this long is presumed lost.
func (r *Resolver) lossDelayLocked(mx *udpMux) time.Duration {
	d := r.opts.Timeout / 2
	if mx.srtt > 0 {
		d = min(d, max(3*mx.srtt, 2*mx.minRTT+lossFloor))
	}
	return d
}

// armSweepLocked makes sure server i's sweep runs when the oldest attempt
// sent at t would be presumed lost.
func (r *Resolver) armSweepLocked(i int, t time.Time) {
	mx := &r.muxes[i]
	at := t.Add(r.lossDelayLocked(mx))
	if !mx.sweepAt.IsZero() && !mx.sweepAt.After(at) {
		return
	}
	mx.sweepAt = at
	d := max(time.Until(at), time.Millisecond)
	if mx.sweep == nil {
		mx.sweep = time.AfterFunc(d, func() { r.sweep(i) })
		return
	}
	mx.sweep.Reset(d)
}

// sweep presumes the attempts at server i lost that have been unanswered
// for lossDelay: their slots go to queued attempts.
func (r *Resolver) sweep(i int) {
	r.mu.Lock()
	mx := &r.muxes[i]
	mx.sweepAt = time.Time{}
	now := time.Now()
	d := r.lossDelayLocked(mx)
	freed := false
	var check []sentAttempt
	for len(mx.sent) > 0 {
		s := mx.sent[0]
		if s.pq.state == qSent && s.pq.gen == s.gen && !s.pq.lost && s.pq.server == i {
			if now.Sub(s.pq.sentAt) < d {
				r.armSweepLocked(i, s.pq.sentAt)
				break
			}
			s.pq.lost = true
			mx.lost++
			mx.inflight--
			freed = true
			if s.pq.q.Attempts == 1 {
				r.firstEndedLocked(mx, now, true)
			}
			if r.opts.HostLost != nil {
				check = append(check, s)
			}
		}
		mx.sent[0] = sentAttempt{}
		mx.sent = mx.sent[1:]
	}
	if len(mx.sent) == 0 {
		mx.sent = nil
	}
	var failed []failedQuery
	if freed {
		failed = r.fillLocked(i)
	}
	r.mu.Unlock()
	r.finishFailed(failed)
	for _, s := range check {
		r.replaceIfHostLost(s.pq, s.gen)
	}
}

// replaceIfHostLost: attempt gen of pq, just presumed lost, was sent or
// due to be answered while the host lost packets (HostLost). It does not
// count, and its replacement goes out now rather than after its timeout:
// a name the host's losses touch costs a loss delay more, not a timeout.
// Its late answer is no longer taken (the replacement's is).
func (r *Resolver) replaceIfHostLost(pq *pendingQuery, gen int) {
	r.mu.Lock()
	if pq.state != qSent || pq.gen != gen {
		r.mu.Unlock()
		return
	}
	pq.hostChecked = true
	sent, due := pq.sentAt, r.answerDueLocked(&r.muxes[pq.server])
	r.mu.Unlock()
	if !r.opts.HostLost(sent, sent.Add(due)) { // may read the host's counters: without r.mu
		return
	}
	r.mu.Lock()
	if pq.state != qSent || pq.gen != gen {
		r.mu.Unlock()
		return
	}
	if pq.q.HostRetries >= MaxHostRetries {
		pq.hostLost = true // counted; its timer runs on
		r.mu.Unlock()
		return
	}
	pq.q.HostRetries++
	pq.timer.Stop()
	mx := &r.muxes[pq.server]
	if mx.waiters[pq.id] == pq {
		delete(mx.waiters, pq.id)
	}
	pq.state = qIdle
	failed := r.releaseLocked(pq.server, r.heldLocked(pq))
	r.mu.Unlock()
	r.finishFailed(failed)
	r.launch(pq)
}

// Backlog is the number of queries waiting for a slot at their server.
func (r *Resolver) Backlog() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for i := range r.muxes {
		n += len(r.muxes[i].queue)
	}
	return n
}

// Room signals (without blocking the resolver: one pending signal at
// most) when a server has a free slot and nothing queued.
func (r *Resolver) Room() <-chan struct{} { return r.room }

// ServerLoad is what the resolver asked of one server.
type ServerLoad struct {
	Server     netip.AddrPort
	Window     int             // slots now (the cap when not adaptive)
	PeakWindow int             // the largest window reached
	MinRTT     time.Duration   // the fastest answer
	SRTT       time.Duration   // smoothed RTT of the answers
	Cuts       [cutReasons]int // window cuts by reason (Cut*)
}

// Load reports each server's window.
func (r *Resolver) Load() []ServerLoad {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]ServerLoad, len(r.muxes))
	for i := range r.muxes {
		mx := &r.muxes[i]
		w := r.windowLocked(mx)
		out[i] = ServerLoad{Server: r.servers[i], Window: w, PeakWindow: max(int(mx.peak), w), MinRTT: mx.minRTT, SRTT: mx.srtt, Cuts: mx.cuts}
	}
	return out
}
