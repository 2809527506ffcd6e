package probe

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// windowSim drives one server's adaptive window with events on a fake
// clock: the window logic itself, without sockets or timers.
type windowSim struct {
	t   *testing.T
	r   *Resolver
	now time.Time
}

func newWindowSim(t *testing.T, servers int) *windowSim {
	var addrs []netip.AddrPort
	for range servers {
		addrs = append(addrs, deadServer(t))
	}
	r, err := NewResolver(loopbackPath(t, addrs...), ResolverOptions{Timeout: 2 * time.Second, Retries: 2, Cap: 500, Adaptive: true})
	require.NoError(t, err)
	return &windowSim{t: t, r: r, now: time.Unix(1e9, 0)}
}

// answer: a first attempt answered after rtt.
func (s *windowSim) answer(rtt time.Duration) {
	s.r.mu.Lock()
	s.r.adaptLocked(0, s.now, rtt, true, false, false)
	s.r.mu.Unlock()
}

// lost: a first attempt presumed lost by the sweep.
func (s *windowSim) lost() {
	s.r.mu.Lock()
	s.r.firstEndedLocked(&s.r.muxes[0], s.now, true)
	s.r.mu.Unlock()
}

// timeout: an attempt timed out.
func (s *windowSim) timeout() {
	s.r.mu.Lock()
	s.r.timeoutLocked(0)
	s.r.mu.Unlock()
}

func (s *windowSim) load() ServerLoad { return s.r.Load()[0] }

// A name that is never answered among names that are (1% of them, like
// the lab's planted timeouts) is no sign of overload: its first attempts
// presumed lost, its timeouts, and the end of a run when only such names
// are left and the server answers nothing for three timeouts, cut nothing
// and do not make the server silent for first attempts.
func TestWindowNeverAnsweredNameIsNotOverload(t *testing.T) {
	s := newWindowSim(t, 2)
	var deadAt []time.Time
	// 20,000 first attempts over 2.4 s at a 60 ms RTT (the window's worth
	// of answers each round trip); every 100th never answered.
	for k := range 20000 {
		s.now = s.now.Add(120 * time.Microsecond)
		if k%100 == 37 {
			s.lost() // presumed lost 3 RTTs after its send; it times out later
			deadAt = append(deadAt, s.now)
			continue
		}
		s.answer(60*time.Millisecond + time.Duration(k%7)*time.Millisecond)
	}
	l := s.load()
	assert.Equal(t, 500, l.PeakWindow, "grew to the cap")
	assert.Equal(t, 500, l.Window)
	// The end: only the never-answered names are left; each times out
	// three times, 2 s apart, with no answer from the server since.
	for a := 1; a <= 3; a++ {
		for _, d := range deadAt {
			s.now = d.Add(time.Duration(a) * 2 * time.Second)
			s.timeout()
		}
		s.r.mu.Lock()
		assert.False(t, s.r.silentLocked(0, s.now), "attempt %d: a server whose only unanswered names are never answered anywhere is not silent", a)
		s.r.mu.Unlock()
	}
	l = s.load()
	assert.Equal(t, [cutReasons]int{}, l.Cuts, "no cut")
	assert.Equal(t, 500, l.Window, "the window is not cut by names that are never answered")
}

// A server that drops 30% of the queries (first attempts presumed lost,
// names answered on a retry) is cut, and its window falls below the cap
// and stays there while it keeps dropping: growth does not outrun the
// cuts.
func TestWindowServerDropping30PercentIsCut(t *testing.T) {
	s := newWindowSim(t, 1)
	rng := rand.New(rand.NewPCG(5, 5))
	for range 5000 { // a clean start: the window at the cap
		s.now = s.now.Add(120 * time.Microsecond)
		s.answer(60 * time.Millisecond)
	}
	require.Equal(t, 500, s.load().Window)
	minWin := 500
	t0 := s.now
	for k := range 40000 {
		s.now = s.now.Add(120 * time.Microsecond)
		if rng.Float64() < 0.3 {
			s.lost()
			continue
		}
		s.answer(60 * time.Millisecond)
		// After a timeout, the names whose first attempt was dropped
		// answer their retries.
		if s.now.Sub(t0) > 2*time.Second && k%3 == 0 {
			s.r.mu.Lock()
			s.r.cutLocked(&s.r.muxes[0], s.now, CutLoss)
			s.r.mu.Unlock()
		}
		minWin = min(minWin, s.load().Window)
	}
	l := s.load()
	assert.Positive(t, l.Cuts[CutDrops], "the rise of lost first attempts cuts")
	assert.Positive(t, l.Cuts[CutLoss])
	assert.Equal(t, minWindow, minWin, "cut down to the floor")
	assert.Less(t, l.Window, 250, "still low while the server drops")
}

// On a real socket: lookups of names answered at once, among them a few
// that the server never answers, leave the window uncut at its peak (the
// never-answered ones time out after all the others, when the server
// has been silent for longer than a timeout); their TIMEOUT comes after
// exactly (retries+1) x timeout.
func TestAdaptiveNeverAnsweredNameKeepsWindow(t *testing.T) {
	srv := serveZone(t, newZone())
	const timeout = 300 * time.Millisecond
	r, err := NewResolver(loopbackPath(t, srv), ResolverOptions{Timeout: timeout, Retries: 2, Cap: 200, Adaptive: true})
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var dead []Lookup
	for i := range 600 {
		name := "one.test"
		if i%100 == 50 {
			name = "hang.test"
		}
		wg.Add(1)
		r.Start(context.Background(), name, Family4, func(l Lookup) {
			defer wg.Done()
			if name == "hang.test" {
				mu.Lock()
				dead = append(dead, l)
				mu.Unlock()
				return
			}
			assert.Equal(t, DNSNoError, l.Status)
		})
	}
	wg.Wait()
	require.Len(t, dead, 6)
	for _, l := range dead {
		assert.Equal(t, DNSTimeout, l.Status)
		assert.Equal(t, 3, l.Queries[0].Attempts)
		assert.GreaterOrEqual(t, l.Time, 3*timeout, "TIMEOUT only after 3 timeouts")
	}
	load := r.Load()[0]
	assert.Greater(t, load.PeakWindow, initWindow, "the window grew")
	assert.Equal(t, load.PeakWindow, load.Window, "and was not cut")
	assert.Zero(t, load.Cuts[CutDrops]+load.Cuts[CutLoss]+load.Cuts[CutLate], "cuts %v", load.Cuts)
}

// On a real socket: a server that drops 30% of the names' first queries
// (it answers their retries) gets its window cut for the loss, and every
// name still resolves.
func TestAdaptiveDroppingServerIsCut(t *testing.T) {
	z := newZone()
	var mu sync.Mutex
	seen := map[string]bool{}
	rng := rand.New(rand.NewPCG(7, 7))
	drop := dns.HandlerFunc(func(w dns.ResponseWriter, m *dns.Msg) {
		name := m.Question[0].Name + dns.TypeToString[m.Question[0].Qtype]
		mu.Lock()
		first := !seen[name]
		seen[name] = true
		lose := first && rng.Float64() < 0.3
		mu.Unlock()
		if lose {
			return
		}
		z.ServeDNS(w, m)
	})
	srv := serveZone(t, drop)
	r, err := NewResolver(loopbackPath(t, srv), ResolverOptions{Timeout: 200 * time.Millisecond, Retries: 2, Cap: 300, Adaptive: true})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 1500 {
		wg.Add(1)
		r.Start(context.Background(), fmt.Sprintf("n%d.test", i), Family4, func(l Lookup) {
			defer wg.Done()
			assert.Equal(t, DNSNXDomain, l.Status, "n%d", i)
		})
	}
	wg.Wait()
	load := r.Load()[0]
	assert.Positive(t, load.Cuts[CutLoss], "names answered on a retry: their first attempts were lost")
	assert.Positive(t, load.Cuts[CutDrops]+load.Cuts[CutLoss], "cuts %v", load.Cuts)
	assert.Less(t, load.Window, 300, "the window ends below the cap")
}

// An attempt presumed lost after the host lost packets from its send
// until its answer was due (HostLost) does not count: it is replaced at
// once, at most MaxHostRetries times a query, and a TIMEOUT still means
// retries+1 attempts the host did not lose, declared no earlier than that
// many timeouts; once no more can be added, the query says HostSuspect. A
// host loss at any other time adds nothing.
func TestHostLossAddsOneAttemptPerLostAttempt(t *testing.T) {
	srv := serveZone(t, newZone())
	const timeout = 150 * time.Millisecond
	cases := []struct {
		name        string
		lossAt      func(sent0 time.Time) (from, to time.Time) // relative to the lookup's start
		wantRetries int
		wantSuspect bool
	}{
		{"no loss", nil, 0, false},
		{"loss at the first send", func(s time.Time) (time.Time, time.Time) { return s.Add(-time.Millisecond), s.Add(5 * time.Millisecond) }, 1, false},
		{"loss at the second send", func(s time.Time) (time.Time, time.Time) {
			return s.Add(timeout + 2*time.Millisecond), s.Add(timeout + 40*time.Millisecond)
		}, 1, false},
		{"loss long after a send, before its timeout", func(s time.Time) (time.Time, time.Time) {
			return s.Add(timeout - 20*time.Millisecond), s.Add(timeout - 10*time.Millisecond)
		}, 0, false},
		{"the host loses everything", func(s time.Time) (time.Time, time.Time) { return s.Add(-time.Second), s.Add(time.Hour) }, MaxHostRetries, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var from, to time.Time
			lost := func(a, b time.Time) bool {
				mu.Lock()
				defer mu.Unlock()
				return c.lossAt != nil && a.Before(to) && b.After(from)
			}
			r, err := NewResolver(loopbackPath(t, srv), ResolverOptions{Timeout: timeout, Retries: 2, Cap: 10, Adaptive: true, HostLost: lost})
			require.NoError(t, err)
			mu.Lock()
			start := time.Now()
			if c.lossAt != nil {
				from, to = c.lossAt(start)
			}
			mu.Unlock()
			l := r.Lookup(context.Background(), "hang.test", Family4)
			q := l.Queries[0]
			assert.Equal(t, DNSTimeout, l.Status)
			assert.Equal(t, c.wantRetries, q.HostRetries)
			assert.Equal(t, 3+c.wantRetries, q.Attempts)
			assert.Equal(t, c.wantSuspect, q.HostSuspect)
			// The counted attempts each waited a whole timeout; one the
			// host may have lost was replaced once presumed lost.
			assert.GreaterOrEqual(t, q.Time, 3*timeout, "TIMEOUT only after (retries+1) timeouts")
			// An answered name is never retried, loss or not.
			ok := r.Lookup(context.Background(), "one.test", Family4)
			assert.Equal(t, DNSNoError, ok.Status)
			assert.Equal(t, 1, ok.Queries[0].Attempts)
		})
	}
}

// A query the host lost (here: the server never sees the first one, and
// the host reports a loss at its send) is asked again as soon as it is
// presumed lost, not after its timeout, and its answer taken.
func TestHostLostQueryReplacedBeforeItsTimeout(t *testing.T) {
	z := newZone()
	var seen atomic.Int32
	h := dns.HandlerFunc(func(w dns.ResponseWriter, m *dns.Msg) {
		if seen.Add(1) == 1 {
			return // lost on its way
		}
		z.ServeDNS(w, m)
	})
	srv := serveZone(t, h)
	const timeout = 2 * time.Second
	start := time.Now()
	lost := func(from, to time.Time) bool { return from.Before(start.Add(50*time.Millisecond)) && to.After(start) }
	r, err := NewResolver(loopbackPath(t, srv), ResolverOptions{Timeout: timeout, Retries: 2, Cap: 10, Adaptive: true, HostLost: lost})
	require.NoError(t, err)
	l := r.Lookup(context.Background(), "one.test", Family4)
	q := l.Queries[0]
	assert.Equal(t, DNSNoError, l.Status)
	assert.Equal(t, 2, q.Attempts)
	assert.Equal(t, 1, q.HostRetries)
	assert.Less(t, q.Time, timeout, "replaced when presumed lost (half the timeout before any RTT is known)")
}
