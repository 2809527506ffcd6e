package probe

import (
	"context"
	"fmt"
	"net"
	"net/netip"
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
	r.muxes[0].mu.Lock()
	defer r.muxes[0].mu.Unlock()
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
