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
// goroutine for each held 11.5 MB of stacks at 1M domains (issue 18).

// udpMux is one UDP socket per server, bound to the path, shared by every
// query to that server. A socket per query cost a socket, a bind, a
// connect and a close each, a fifth of the resolver's CPU (issue 18). The
// socket closes itself after muxIdle without queries. Guarded by
// Resolver.mu.
type udpMux struct {
	conn     net.Conn // nil while closed
	waiters  map[uint16]*pendingQuery
	inflight int             // attempts holding one of the server's Cap slots
	queue    []*pendingQuery // attempts waiting for a slot, oldest first
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
	start   time.Time
	queries []*pendingQuery
	left    int // queries not done; guarded by r.mu
	stop    func() bool
	done    func(Lookup)
}

// pendingQuery is one A or AAAA query of a lookup, through its attempts.
type pendingQuery struct {
	l     *lookupRun
	m     *dns.Msg
	q     Query
	first int // server of the first attempt
	start time.Time
	bytes int64
	addrs []netip.Addr
	chain []string

	// Guarded by r.mu.
	state  int
	server int    // of the current attempt
	id     uint16 // of the current attempt
	gen    int    // attempt number, so that a stale timer does nothing
	timer  *time.Timer
}

// Start looks name up for family fam (A, AAAA or both; the queries go out
// together, so a dead name costs one timeout, not two) and calls done with
// the result from another goroutine, exactly once. A cancelled ctx ends
// the lookup at once with DNSError.
func (r *Resolver) Start(ctx context.Context, name string, fam Family, done func(Lookup)) {
	l := &lookupRun{r: r, ctx: ctx, name: name, start: time.Now(), done: done}
	for _, qt := range qtypes(fam) {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), qt)
		m.SetEdns0(ednsSize, false)
		l.queries = append(l.queries, &pendingQuery{l: l, m: m, q: Query{QType: dns.TypeToString[qt]},
			first: int(r.next.Add(1)), start: l.start})
	}
	l.left = len(l.queries)
	l.stop = context.AfterFunc(ctx, l.cancel)
	for _, pq := range l.queries {
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
	pq.q.Attempts++
	pq.q.Server, pq.server = r.servers[i], i
	mx := &r.muxes[i]
	if mx.inflight >= max(r.opts.Cap, 1) {
		pq.state = qQueued
		mx.queue = append(mx.queue, pq)
		r.mu.Unlock()
		return
	}
	mx.inflight++
	var failed []failedQuery
	if err := r.sendLocked(pq); err != nil {
		failed = append(r.releaseLocked(i), failedQuery{pq, err})
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
		conn, err := DialContext(pq.l.ctx, r.path, "udp", r.servers[i].String())
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
	pq.m.Id = id
	b, err := pq.m.Pack()
	if err != nil {
		pq.state = qIdle
		return err
	}
	n := int64(len(b)) + overhead("udp", r.servers[i].Addr())
	r.opts.Bytes.Add(n)
	pq.bytes += n
	if _, err := mx.conn.Write(b); err != nil {
		pq.state = qIdle
		return err
	}
	mx.waiters[id] = pq
	pq.id, pq.state = id, qSent
	pq.gen++
	gen := pq.gen
	pq.timer = time.AfterFunc(r.opts.Timeout, func() { r.timedOut(pq, gen) })
	return nil
}

// releaseLocked frees a slot at server i and gives it to the oldest queued
// attempt; it returns the attempts that could not be sent.
func (r *Resolver) releaseLocked(i int) []failedQuery {
	mx := &r.muxes[i]
	mx.inflight--
	var failed []failedQuery
	for mx.inflight < max(r.opts.Cap, 1) && len(mx.queue) > 0 {
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
	}
	return failed
}

// timedOut ends attempt gen of pq without an answer: the next server is
// tried while retries are left.
func (r *Resolver) timedOut(pq *pendingQuery, gen int) {
	r.mu.Lock()
	if pq.state != qSent || pq.gen != gen {
		r.mu.Unlock()
		return
	}
	mx := &r.muxes[pq.server]
	if mx.waiters[pq.id] == pq {
		delete(mx.waiters, pq.id)
	}
	pq.state = qIdle
	failed := r.releaseLocked(pq.server)
	retry := pq.q.Attempts <= r.opts.Retries
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
	if err := resp.Unpack(b); err != nil || !sameQuestion(pq.m, resp) {
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
		failed := r.releaseLocked(pq.server)
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
	if resp.Truncated {
		pq.state = qTCP // keeps its slot
		r.mu.Unlock()
		go r.overTCP(pq)
		return
	}
	pq.state = qIdle
	failed := r.releaseLocked(pq.server)
	r.mu.Unlock()
	r.finishFailed(failed)
	r.finish(pq, resp, nil)
}

// overTCP asks a truncated question again over TCP.
func (r *Resolver) overTCP(pq *pendingQuery) {
	pq.q.TCP = true
	resp, err := r.exchangeOn(pq.l.ctx, "tcp", pq.q.Server, pq.m, &pq.bytes)
	r.mu.Lock()
	pq.state = qIdle
	failed := r.releaseLocked(pq.server)
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
	for _, pq := range l.queries {
		mx := &r.muxes[pq.server]
		switch pq.state {
		case qSent:
			pq.timer.Stop()
			if mx.waiters[pq.id] == pq {
				delete(mx.waiters, pq.id)
			}
			failed = append(failed, r.releaseLocked(pq.server)...)
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
			pq.addrs, pq.chain = answers(pq.m.Question[0].Name, pq.m.Question[0].Qtype, resp)
		}
	}
	r.mu.Lock()
	l.left--
	last := l.left == 0
	r.mu.Unlock()
	if last {
		l.stop()
		l.done(l.result())
	}
}

func (l *lookupRun) result() Lookup {
	out := Lookup{Name: l.name, Answers: []netip.Addr{}}
	seen := map[netip.Addr]struct{}{}
	for _, pq := range l.queries {
		out.Queries = append(out.Queries, pq.q)
		out.Bytes += pq.bytes
		if len(pq.chain) > len(out.CNAMEs) {
			out.CNAMEs = pq.chain
		}
		for _, x := range pq.addrs {
			if _, dup := seen[x]; !dup {
				seen[x] = struct{}{}
				out.Answers = append(out.Answers, x)
			}
		}
	}
	out.Time = time.Since(l.start)
	out.Status = lookupStatus(out.Queries, len(out.Answers) > 0)
	return out
}

func sameQuestion(q, a *dns.Msg) bool {
	if a.Id != q.Id || len(a.Question) != 1 || len(q.Question) != 1 {
		return false
	}
	x, y := q.Question[0], a.Question[0]
	return x.Qtype == y.Qtype && x.Qclass == y.Qclass && strings.EqualFold(x.Name, y.Name)
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
