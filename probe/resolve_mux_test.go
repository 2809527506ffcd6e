package probe

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
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
// before; issue 18), and a cancellation ends the sent and the queued ones
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
