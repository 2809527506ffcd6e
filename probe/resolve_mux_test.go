package probe

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/dnstest"
)

// TestSharedSocketDemux: 300 concurrent lookups of distinct names over the
// one shared socket each get their own answer, through one socket.
func TestSharedSocketDemux(t *testing.T) {
	z := &dnstest.Zone{A: map[string][]string{}}
	for i := range 300 {
		z.A[fmt.Sprintf("n%d.test.", i)] = []string{fmt.Sprintf("198.18.%d.%d", i/200, i%200+1)}
	}
	srv := serveZone(t, z)
	r, err := NewResolver(loopbackPath(t, srv), ResolverOptions{Timeout: 2 * time.Second, Cap: 300})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Go(func() {
			l := r.Lookup(context.Background(), fmt.Sprintf("n%d.test", i), Family4)
			assert.Equal(t, DNSNoError, l.Status)
			assert.Equal(t, []netip.Addr{netip.MustParseAddr(fmt.Sprintf("198.18.%d.%d", i/200, i%200+1))}, l.Answers, "n%d", i)
		})
	}
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.NotNil(t, r.muxes[0].conn, "one socket, still open")
	assert.Empty(t, r.muxes[0].waiters)
}

// TestSharedSocketIgnoresWrongAnswer: an answer with the query's ID but
// another question (spoofed, or late for an earlier query) is ignored and
// the real answer still taken.
func TestSharedSocketIgnoresWrongAnswer(t *testing.T) {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer pc.Close()
	go func() {
		buf := make([]byte, 2048)
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		q := new(dns.Msg)
		if q.Unpack(buf[:n]) != nil {
			return
		}
		wrong := new(dns.Msg)
		wrong.SetQuestion("other.test.", dns.TypeA)
		wrong.Id, wrong.Response = q.Id, true
		b, _ := wrong.Pack()
		pc.WriteTo(b, from)
		right := new(dns.Msg)
		right.SetReply(q)
		rr, _ := dns.NewRR(q.Question[0].Name + " 60 IN A 198.18.9.9")
		right.Answer = append(right.Answer, rr)
		b, _ = right.Pack()
		time.Sleep(20 * time.Millisecond)
		pc.WriteTo(b, from)
	}()
	srv := netip.MustParseAddrPort(pc.LocalAddr().String())
	r, err := NewResolver(loopbackPath(t, srv), ResolverOptions{Timeout: 2 * time.Second})
	require.NoError(t, err)
	l := r.Lookup(context.Background(), "mine.test", Family4)
	assert.Equal(t, DNSNoError, l.Status)
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("198.18.9.9")}, l.Answers)
}

// TestLookupsInFlightHoldNoGoroutines: 500 lookups waiting on a server
// that never answers are state, not goroutines (each held ~11 KB of stack
// before), and a cancellation ends the sent and the queued ones
// alike, at once.
func TestLookupsInFlightHoldNoGoroutines(t *testing.T) {
	srv := deadServer(t)
	r, err := NewResolver(loopbackPath(t, srv), ResolverOptions{Timeout: time.Minute, Cap: 300})
	require.NoError(t, err)
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Lookup, 500)
	for i := range 500 {
		r.Start(ctx, fmt.Sprintf("n%d.test", i), FamilyAny, func(l Lookup) { done <- l })
	}
	r.mu.Lock()
	sent, queued := len(r.muxes[0].waiters), len(r.muxes[0].queue)
	r.mu.Unlock()
	assert.Equal(t, 300, sent, "the cap's worth on the wire")
	assert.Equal(t, 700, queued, "the other queries wait for a slot")
	assert.LessOrEqual(t, runtime.NumGoroutine()-before, 5, "1,000 queries in flight")
	start := time.Now()
	cancel()
	for range 500 {
		l := <-done
		assert.Equal(t, DNSError, l.Status)
		for _, q := range l.Queries {
			assert.ErrorIs(t, q.Err, context.Canceled)
		}
	}
	assert.Less(t, time.Since(start), 5*time.Second)
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Empty(t, r.muxes[0].waiters)
	assert.Empty(t, r.muxes[0].queue)
	assert.Zero(t, r.muxes[0].inflight)
}

// TestLookupsEndExactlyOnce races answers, timeouts, retries, the cap's
// queue and cancellations: 600 lookups over two servers (one answers
// after a random delay, one never), a third of them cancelled at random
// moments. Every lookup ends exactly once, and the resolver is left with
// no waiter, no queued query and no slot taken.
func TestLookupsEndExactlyOnce(t *testing.T) {
	z := newZone()
	z.delay = 5 * time.Millisecond
	good, dead := serveZone(t, z), deadServer(t)
	r, err := NewResolver(loopbackPath(t, good, dead), ResolverOptions{Timeout: 60 * time.Millisecond, Retries: 2, Cap: 7})
	require.NoError(t, err)
	const n = 600
	var ended [n]atomic.Int32
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		if i%3 == 0 {
			time.AfterFunc(time.Duration(rand.IntN(200))*time.Millisecond, cancel)
		} else {
			defer cancel()
		}
		name := "one.test"
		if i%5 == 0 {
			name = "hang.test"
		}
		r.Start(ctx, name, FamilyAny, func(l Lookup) {
			if ended[i].Add(1) == 1 {
				wg.Done()
			}
			if len(l.Queries) != 2 {
				t.Errorf("lookup %d: %d queries", i, len(l.Queries))
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("lookups still running after 30 s")
	}
	time.Sleep(300 * time.Millisecond) // late timers and answers find nothing to end
	for i := range n {
		if c := ended[i].Load(); c != 1 {
			t.Errorf("lookup %d ended %d times", i, c)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.muxes {
		assert.Empty(t, r.muxes[i].waiters, "server %d", i)
		assert.Empty(t, r.muxes[i].queue, "server %d", i)
		assert.Zero(t, r.muxes[i].inflight, "server %d", i)
	}
}

// With the adaptive window, an attempt unanswered for a few round trips
// gives its slot back: names that will time out do not hold back the
// names after them, and their own timers stay exact. The cap here is 4
// slots and 4 dead names take them first; without the slots given back,
// the live names could start only when the dead ones time out (3 s).
func TestAdaptiveWindowDeadNamesFreeSlots(t *testing.T) {
	srv := serveZone(t, newZone())
	const timeout = 3 * time.Second
	r, err := NewResolver(loopbackPath(t, srv), ResolverOptions{Timeout: timeout, Cap: 4, Adaptive: true})
	require.NoError(t, err)
	var wg sync.WaitGroup
	dead := make([]Lookup, 4)
	for i := range dead {
		wg.Go(func() { dead[i] = r.Lookup(context.Background(), "hang.test", Family4) })
	}
	time.Sleep(50 * time.Millisecond) // the dead names hold the 4 slots
	live := make([]Lookup, 20)
	for i := range live {
		wg.Go(func() { live[i] = r.Lookup(context.Background(), "one.test", Family4) })
	}
	wg.Wait()
	for _, l := range live {
		assert.Equal(t, DNSNoError, l.Status)
		// Given back after half the timeout while no answer has set the
		// round trip (~1.45 s here); waiting for a timeout: 2.95 s.
		assert.Less(t, l.Time, timeout-500*time.Millisecond, "a live name waited for a dead one's timeout")
	}
	for _, l := range dead {
		assert.Equal(t, DNSTimeout, l.Status)
		assert.Equal(t, 1, l.Queries[0].Attempts)
		assert.GreaterOrEqual(t, l.Time, timeout, "TIMEOUT only after the timeout")
	}
}

// An answer that comes after its attempt was presumed lost still ends the
// query (NOERROR, one attempt), and it counts as queueing: the window is
// cut.
func TestAdaptiveWindowLateAnswerCounts(t *testing.T) {
	z := newZone()
	slow := dns.HandlerFunc(func(w dns.ResponseWriter, m *dns.Msg) {
		if m.Question[0].Name == "multi.test." {
			time.Sleep(600 * time.Millisecond)
		}
		z.ServeDNS(w, m)
	})
	srv := serveZone(t, slow)
	r, err := NewResolver(loopbackPath(t, srv), ResolverOptions{Timeout: 2 * time.Second, Cap: 100, Adaptive: true})
	require.NoError(t, err)
	for range 50 { // fast answers: the window grows, the loss delay is ~100 ms
		require.Equal(t, DNSNoError, r.Lookup(context.Background(), "one.test", Family4).Status)
	}
	load := r.Load()[0]
	assert.Greater(t, load.PeakWindow, initWindow, "the window grew with the answers")
	assert.LessOrEqual(t, load.PeakWindow, 100, "up to the cap")
	l := r.Lookup(context.Background(), "multi.test", Family4)
	assert.Equal(t, DNSNoError, l.Status)
	assert.Equal(t, 1, l.Queries[0].Attempts)
	assert.GreaterOrEqual(t, l.Time, 600*time.Millisecond)
	assert.Equal(t, 1, r.Load()[0].Cuts[CutLate])
}

// Without Adaptive the cap is a fixed window (as before), and no slot is
// given back before a query ends.
func TestFixedWindowHoldsSlots(t *testing.T) {
	srv := serveZone(t, newZone())
	r, err := NewResolver(loopbackPath(t, srv), ResolverOptions{Timeout: 600 * time.Millisecond, Cap: 1})
	require.NoError(t, err)
	var wg sync.WaitGroup
	var d, l Lookup
	wg.Go(func() { d = r.Lookup(context.Background(), "hang.test", Family4) })
	time.Sleep(50 * time.Millisecond)
	wg.Go(func() { l = r.Lookup(context.Background(), "one.test", Family4) })
	wg.Wait()
	assert.Equal(t, DNSTimeout, d.Status)
	assert.Equal(t, DNSNoError, l.Status)
	assert.GreaterOrEqual(t, l.Time, 500*time.Millisecond, "waited for the dead name's slot")
}

// A server that answers nothing gets no more first attempts once it has
// been silent for a timeout: the path's other server takes them (without
// that, half of all queries would wait for a timeout at the dead one).
func TestAdaptiveSkipsSilentServer(t *testing.T) {
	live := serveZone(t, newZone())
	r, err := NewResolver(loopbackPath(t, deadServer(t), live), ResolverOptions{Timeout: 300 * time.Millisecond, Retries: 1, Cap: 50, Adaptive: true})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 10 { // some first attempts go to the dead server and time out
		wg.Go(func() { assert.Equal(t, DNSNoError, r.Lookup(context.Background(), "one.test", Family4).Status) })
	}
	wg.Wait()
	time.Sleep(350 * time.Millisecond) // silent for a whole timeout
	retried := atomic.Int32{}
	for range 100 {
		wg.Go(func() {
			l := r.Lookup(context.Background(), "one.test", Family4)
			assert.Equal(t, DNSNoError, l.Status)
			if l.Queries[0].Attempts > 1 {
				retried.Add(1)
			}
		})
	}
	wg.Wait()
	assert.Zero(t, retried.Load(), "first attempts went to the silent server")
}

// A timer that fires well after its deadline (the resolver was not
// scheduled then) gives its attempt as long again, once: an answer that
// came in time and waits unread in the socket is taken, not counted as a
// timeout. A timer late by no more than lateTimer ends the attempt at
// once, and so does a second late firing. The lateness is planted by
// dating the attempt's send back and firing its timer by hand.
func TestLateTimerGraceOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		late   time.Duration
		twice  bool // the timer fires late a second time
		status string
	}{
		{"late-answer-taken", 300 * time.Millisecond, false, DNSNoError},
		{"on-time-ends-at-once", lateTimer / 2, false, DNSTimeout},
		{"grace-only-once", 300 * time.Millisecond, true, DNSTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			z := newZone()
			got, release := make(chan struct{}, 1), make(chan struct{})
			held := dns.HandlerFunc(func(w dns.ResponseWriter, m *dns.Msg) {
				got <- struct{}{}
				<-release
				z.ServeDNS(w, m)
			})
			srv := serveZone(t, held)
			t.Cleanup(func() {
				select {
				case <-release:
				default:
					close(release)
				}
			})
			const timeout = 2 * time.Second
			r, err := NewResolver(loopbackPath(t, srv), ResolverOptions{Timeout: timeout, Retries: 0, Cap: 10})
			require.NoError(t, err)
			ended := make(chan Lookup, 1)
			r.Start(context.Background(), "one.test", Family4, func(l Lookup) { ended <- l })
			<-got
			r.mu.Lock()
			require.Len(t, r.muxes[0].waiters, 1)
			var pq *pendingQuery
			for _, p := range r.muxes[0].waiters {
				pq = p
			}
			pq.timer.Stop()
			pq.sentAt = time.Now().Add(-timeout - tc.late)
			gen := pq.gen
			r.mu.Unlock()

			r.timedOut(pq, gen)
			if tc.twice {
				r.timedOut(pq, gen)
			}
			if tc.status == DNSTimeout {
				select { // ended by the call itself, not by a re-armed timer
				case l := <-ended:
					assert.Equal(t, DNSTimeout, l.Status)
					assert.Equal(t, 1, l.Queries[0].Attempts)
				default:
					t.Fatal("the timer's firing did not end the attempt")
				}
				return
			}
			select {
			case l := <-ended:
				t.Fatalf("a late timer ended the attempt without grace: %v", l.Status)
			default:
			}
			r.mu.Lock()
			assert.True(t, pq.graced)
			assert.Equal(t, qSent, pq.state)
			r.mu.Unlock()
			close(release)
			l := <-ended
			assert.Equal(t, DNSNoError, l.Status, "the answer that came during the grace is taken")
			assert.Equal(t, 1, l.Queries[0].Attempts)
		})
	}
}
