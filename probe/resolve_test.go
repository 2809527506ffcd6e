package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/dnstest"
)

// zone is a dnstest.Zone that also counts queries in flight and checks
// that every query carries our EDNS0 size.
type zone struct {
	dnstest.Zone
	delay    time.Duration // per query, to observe concurrency
	inFlight atomic.Int32
	maxSeen  atomic.Int32
	noEDNS   atomic.Int32 // queries without the expected EDNS0 size
}

func newZone() *zone {
	z := &zone{Zone: dnstest.Zone{
		A: map[string][]string{
			"one.test.":   {"198.18.0.1"},
			"multi.test.": {"198.18.0.2", "198.18.0.3", "198.18.0.2"}, // duplicate removed
			"c2.test.":    {"198.18.0.4"},
		},
		AAAA:  map[string][]string{"one.test.": {"fd00::1"}, "v6only.test.": {"fd00::6"}},
		CNAME: map[string]string{"alias.test.": "c1.test.", "c1.test.": "c2.test."},
		Rcode: map[string]int{"nx.test.": dns.RcodeNameError, "fail.test.": dns.RcodeServerFailure,
			"refused.test.": dns.RcodeRefused, "notimp.test.": dns.RcodeNotImplemented},
		Hang: map[string]bool{"hang.test.": true},
	}}
	for i := 1; i <= 100; i++ { // too big for one 1232-byte UDP answer
		z.A["big.test."] = append(z.A["big.test."], fmt.Sprintf("198.18.1.%d", i))
	}
	z.A["empty.test."] = nil
	return z
}

func (z *zone) ServeDNS(rw dns.ResponseWriter, req *dns.Msg) {
	n := z.inFlight.Add(1)
	// A query stops being in flight when its answer is written: the client
	// may send the next one before this handler returns.
	done := sync.OnceFunc(func() { z.inFlight.Add(-1) })
	defer done()
	for {
		m := z.maxSeen.Load()
		if n <= m || z.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	if o := req.IsEdns0(); o == nil || o.UDPSize() != ednsSize {
		z.noEDNS.Add(1)
	}
	time.Sleep(z.delay)
	z.Zone.ServeDNS(answerWriter{rw, done}, req)
}

type answerWriter struct {
	dns.ResponseWriter
	before func()
}

func (w answerWriter) WriteMsg(m *dns.Msg) error { w.before(); return w.ResponseWriter.WriteMsg(m) }

// serveZone serves z on 127.0.0.1, UDP and TCP on the same port.
func serveZone(t testing.TB, z dns.Handler) netip.AddrPort { return dnstest.Serve(t, z) }

// deadServer is a UDP socket that never answers.
func deadServer(t testing.TB) netip.AddrPort {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { pc.Close() })
	return netip.MustParseAddrPort(pc.LocalAddr().String())
}

// loopbackPath is the host's loopback interface as a path using servers.
func loopbackPath(t testing.TB, servers ...netip.AddrPort) Path {
	t.Helper()
	ifs, err := net.Interfaces()
	require.NoError(t, err)
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback != 0 && ifc.Flags&net.FlagUp != 0 {
			p := Path{Name: ifc.Name, Index: ifc.Index, Kind: KindLoopback, Up: true,
				Addrs: []Addr{{IP: netip.MustParseAddr("127.0.0.1"), PrefixLen: 8, Scope: ScopeHost}}}
			for _, s := range servers {
				p.DNS = append(p.DNS, DNSServer{Addr: s, Source: DNSSourceFlag})
			}
			return p
		}
	}
	t.Skip("no loopback interface that is up")
	return Path{}
}

// queryLen is the size of the query message the resolver sends for name:
// the planted truth for the byte counts.
func queryLen(name string, qt uint16) int64 {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qt)
	m.SetEdns0(ednsSize, false)
	return int64(m.Len())
}

func TestLookupStatusesAndAnswers(t *testing.T) {
	z := newZone()
	srv := serveZone(t, z)
	var sent atomic.Int64
	r, err := NewResolver(loopbackPath(t, srv), ResolverOptions{Timeout: 300 * time.Millisecond, Cap: 8, Bytes: &sent})
	require.NoError(t, err)
	a := func(s ...string) []netip.Addr {
		out := []netip.Addr{}
		for _, x := range s {
			out = append(out, netip.MustParseAddr(x))
		}
		return out
	}
	cases := []struct {
		name     string
		fam      Family
		status   string
		qstatus  []string
		answers  []netip.Addr
		cnames   []string
		tcp      bool
		attempts int
	}{
		{"one.test", FamilyAny, DNSNoError, []string{DNSNoError, DNSNoError}, a("198.18.0.1", "fd00::1"), nil, false, 1},
		{"one.test", Family4, DNSNoError, []string{DNSNoError}, a("198.18.0.1"), nil, false, 1},
		{"one.test", Family6, DNSNoError, []string{DNSNoError}, a("fd00::1"), nil, false, 1},
		{"multi.test", Family4, DNSNoError, []string{DNSNoError}, a("198.18.0.2", "198.18.0.3"), nil, false, 1},
		{"v6only.test", FamilyAny, DNSNoError, []string{DNSNoError, DNSNoError}, a("fd00::6"), nil, false, 1},
		{"Alias.Test", Family4, DNSNoError, []string{DNSNoError}, a("198.18.0.4"), []string{"c1.test", "c2.test"}, false, 1},
		{"nx.test", FamilyAny, DNSNXDomain, []string{DNSNXDomain, DNSNXDomain}, a(), nil, false, 1},
		{"fail.test", Family4, DNSServFail, []string{DNSServFail}, a(), nil, false, 1},
		{"refused.test", Family4, DNSRefused, []string{DNSRefused}, a(), nil, false, 1},
		{"notimp.test", Family4, DNSError, []string{DNSError}, a(), nil, false, 1},
		{"empty.test", FamilyAny, DNSNoAnswer, []string{DNSNoError, DNSNoError}, a(), nil, false, 1},
		{"hang.test", Family4, DNSTimeout, []string{DNSTimeout}, a(), nil, false, 1},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%d", c.name, c.fam), func(t *testing.T) {
			before := sent.Load()
			l := r.Lookup(context.Background(), c.name, c.fam)
			assert.Equal(t, c.status, l.Status)
			assert.Equal(t, c.answers, l.Answers)
			assert.Equal(t, c.cnames, l.CNAMEs)
			var qs []string
			var want int64
			for _, q := range l.Queries {
				qs = append(qs, q.Status)
				assert.Equal(t, srv, q.Server)
				assert.Equal(t, c.tcp, q.TCP)
				assert.Equal(t, c.attempts, q.Attempts)
				assert.LessOrEqual(t, q.Time, l.Time)
				qt := dns.StringToType[q.QType]
				want += queryLen(c.name, qt) + 28
				if q.Status == DNSTimeout {
					assert.True(t, isTimeout(q.Err), "%v", q.Err)
					assert.GreaterOrEqual(t, q.Time, 300*time.Millisecond)
				} else {
					assert.NoError(t, q.Err)
				}
			}
			assert.Equal(t, c.qstatus, qs)
			// Exact: the message lengths plus IPv4 and UDP headers.
			assert.Equal(t, want, l.Bytes)
			assert.Equal(t, want, sent.Load()-before, "shared counter")
		})
	}
	assert.Zero(t, z.noEDNS.Load(), "every query carries EDNS0 with a %d-byte payload size", ednsSize)
}

// A truncated UDP answer is retried over TCP and its full answer used.
func TestLookupTCPFallback(t *testing.T) {
	srv := serveZone(t, newZone())
	r, err := NewResolver(loopbackPath(t, srv), ResolverOptions{Timeout: time.Second})
	require.NoError(t, err)
	l := r.Lookup(context.Background(), "big.test", Family4)
	require.Equal(t, DNSNoError, l.Status)
	assert.Len(t, l.Answers, 100)
	require.Len(t, l.Queries, 1)
	assert.True(t, l.Queries[0].TCP)
	n := queryLen("big.test", dns.TypeA)
	assert.Equal(t, n+28+n+126, l.Bytes, "UDP query plus the TCP one with its estimated overhead")
}

// After a timeout the next attempt goes to the next server.
func TestLookupRetriesRotateServers(t *testing.T) {
	good := serveZone(t, newZone())
	dead := deadServer(t)
	p := loopbackPath(t, dead, good)
	for _, retries := range []int{0, 1} {
		r, err := NewResolver(p, ResolverOptions{Timeout: 150 * time.Millisecond, Retries: retries})
		require.NoError(t, err)
		byFirst := map[netip.AddrPort]Query{}
		for range 2 { // first attempts alternate between the servers
			l := r.Lookup(context.Background(), "one.test", Family4)
			q := l.Queries[0]
			first := q.Server
			if q.Attempts == 2 {
				first = dead
			}
			byFirst[first] = q
		}
		require.Len(t, byFirst, 2, "retries=%d: first attempts went to both servers", retries)
		assert.Equal(t, Query{QType: "A", Status: DNSNoError, Server: good, Attempts: 1}, zeroTime(byFirst[good]))
		if retries == 0 {
			assert.Equal(t, DNSTimeout, byFirst[dead].Status)
			assert.Equal(t, dead, byFirst[dead].Server)
		} else {
			assert.Equal(t, Query{QType: "A", Status: DNSNoError, Server: good, Attempts: 2}, zeroTime(byFirst[dead]))
		}
	}
}

func zeroTime(q Query) Query { q.Time = 0; return q }

// No more than Cap queries are in flight at one server.
func TestLookupInFlightCap(t *testing.T) {
	for _, cap := range []int{1, 3} {
		z := newZone()
		z.delay = 30 * time.Millisecond
		srv := serveZone(t, z)
		r, err := NewResolver(loopbackPath(t, srv), ResolverOptions{Timeout: 5 * time.Second, Cap: cap})
		require.NoError(t, err)
		var wg sync.WaitGroup
		for range 12 {
			wg.Go(func() {
				if l := r.Lookup(context.Background(), "one.test", FamilyAny); l.Status != DNSNoError {
					t.Errorf("status %s", l.Status)
				}
			})
		}
		wg.Wait()
		// 24 queries of 30 ms each: the server sees exactly cap at once.
		assert.Equal(t, int32(cap), z.maxSeen.Load(), "cap %d", cap)
	}
}

// Queries leave through the path's socket binding: a path naming an
// interface that does not exist cannot send.
func TestLookupIsBoundToPath(t *testing.T) {
	srv := serveZone(t, newZone())
	p := loopbackPath(t, srv)
	p.Name, p.Index = "nosuch0", 1<<20
	r, err := NewResolver(p, ResolverOptions{Timeout: time.Second})
	require.NoError(t, err)
	l := r.Lookup(context.Background(), "one.test", Family4)
	assert.Equal(t, DNSError, l.Status)
	require.Error(t, l.Queries[0].Err)
	assert.Contains(t, l.Queries[0].Err.Error(), "nosuch0")
}

func TestLookupCancelled(t *testing.T) {
	srv := serveZone(t, newZone())
	r, err := NewResolver(loopbackPath(t, srv), ResolverOptions{Timeout: 5 * time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	l := r.Lookup(ctx, "hang.test", Family4)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, DNSError, l.Status, "a cancelled lookup is not a timeout")
	assert.ErrorIs(t, l.Queries[0].Err, context.Canceled)
}

func TestNewResolverNeedsUsableDNS(t *testing.T) {
	p := loopbackPath(t)
	_, err := NewResolver(p, ResolverOptions{})
	assert.ErrorIs(t, err, ErrNoDNS)
	assert.Contains(t, err.Error(), "path "+p.Name+" has no usable DNS server")
	// An IPv6 server on a path with only IPv4 is unusable.
	p.DNS = []DNSServer{{Addr: netip.MustParseAddrPort("[fd00::53]:53")}, {}}
	_, err = NewResolver(p, ResolverOptions{})
	assert.True(t, errors.Is(err, ErrNoDNS), "%v", err)
	p.DNS = append(p.DNS, DNSServer{Addr: netip.MustParseAddrPort("127.0.0.1:53")})
	r, err := NewResolver(p, ResolverOptions{})
	require.NoError(t, err)
	assert.Equal(t, []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")}, r.Servers())
	assert.Equal(t, p.Name, r.Path().Name)
}

func TestAnswersFollowCNAMEChain(t *testing.T) {
	m := new(dns.Msg)
	m.SetQuestion("www.Example.com.", dns.TypeA)
	rr := func(s string) dns.RR { r, err := dns.NewRR(s); assert.NoError(t, err); return r }
	m.Answer = []dns.RR{
		rr("www.example.com. 60 IN CNAME edge.cdn.net."),
		rr("edge.cdn.net. 60 IN CNAME loop.cdn.net."),
		rr("loop.cdn.net. 60 IN CNAME edge.cdn.net."), // a loop ends the chain
		rr("edge.cdn.net. 60 IN A 198.19.0.7"),
		rr("loop.cdn.net. 60 IN A 198.19.0.8"),
		rr("other.net. 60 IN A 198.19.0.9"), // not in the chain: ignored
		rr("edge.cdn.net. 60 IN AAAA fd00:ff::7"),
	}
	addrs, chain := answers("www.example.com.", dns.TypeA, m)
	assert.Equal(t, []string{"edge.cdn.net", "loop.cdn.net"}, chain)
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("198.19.0.7"), netip.MustParseAddr("198.19.0.8")}, addrs)
	addrs, _ = answers("www.example.com.", dns.TypeAAAA, m)
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("fd00:ff::7")}, addrs)
}

// FuzzAnswers feeds arbitrary DNS messages to the answer extraction.
func FuzzAnswers(f *testing.F) {
	m := new(dns.Msg)
	m.SetQuestion("a.test.", dns.TypeA)
	m.Answer = []dns.RR{&dns.CNAME{Hdr: dns.RR_Header{Name: "a.test.", Rrtype: dns.TypeCNAME, Class: dns.ClassINET}, Target: "b.test."},
		&dns.A{Hdr: dns.RR_Header{Name: "b.test.", Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.IPv4(198, 19, 0, 1)}}
	b, _ := m.Pack()
	f.Add(b)
	f.Add([]byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m dns.Msg
		if m.Unpack(b) != nil || len(m.Question) == 0 {
			return
		}
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
			addrs, chain := answers(m.Question[0].Name, qt, &m)
			if len(chain) > 16 {
				t.Fatalf("chain longer than the loop guard: %d", len(chain))
			}
			for _, a := range addrs {
				if qt == dns.TypeA && !a.Is4() {
					t.Fatalf("A answer %v is not IPv4", a)
				}
				if qt == dns.TypeAAAA && len(a.AsSlice()) != 16 {
					t.Fatalf("AAAA answer %v is not 16 bytes", a)
				}
			}
		}
	})
}

// Lookup and query times include the server's planted delay: at least the
// delay, and not much more on loopback (tolerance 100 ms for a loaded CI).
func TestLookupTimeMatchesServerDelay(t *testing.T) {
	z := newZone()
	z.delay = 80 * time.Millisecond
	srv := serveZone(t, z)
	r, err := NewResolver(loopbackPath(t, srv), ResolverOptions{Timeout: 2 * time.Second, Cap: 2})
	require.NoError(t, err)
	l := r.Lookup(context.Background(), "one.test", FamilyAny)
	require.Equal(t, DNSNoError, l.Status)
	// A and AAAA in parallel: the lookup takes one delay, not two.
	assert.GreaterOrEqual(t, l.Time, z.delay)
	assert.Less(t, l.Time, z.delay+100*time.Millisecond)
	for _, q := range l.Queries {
		assert.GreaterOrEqual(t, q.Time, z.delay, q.QType)
		assert.Less(t, q.Time, z.delay+100*time.Millisecond, q.QType)
	}
}

// BenchmarkLookup: A+AAAA lookups per second against a loopback server
// (the resolver's own cost: bound sockets, EDNS0 packing, answer parsing).
func BenchmarkLookup(b *testing.B) {
	srv := serveZone(b, newZone())
	r, err := NewResolver(loopbackPath(b, srv), ResolverOptions{Timeout: 2 * time.Second, Cap: 64})
	require.NoError(b, err)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if l := r.Lookup(context.Background(), "multi.test", FamilyAny); l.Status != DNSNoError {
				b.Errorf("status %s", l.Status)
				return
			}
		}
	})
}

// The domain status of survey/summary.go: NOERROR when any family gave an
// address, else the first non-NOERROR query status, else NO_ANSWER.
func TestLookupStatusDefinition(t *testing.T) {
	q := func(ss ...string) []Query {
		var out []Query
		for _, s := range ss {
			out = append(out, Query{Status: s})
		}
		return out
	}
	for _, c := range []struct {
		qs   []Query
		addr bool
		want string
	}{
		{q(DNSNXDomain, DNSNoError), true, DNSNoError},
		{q(DNSNoError, DNSNXDomain), false, DNSNXDomain},
		{q(DNSTimeout, DNSServFail), false, DNSTimeout},
		{q(DNSNoError, DNSNoError), false, DNSNoAnswer},
	} {
		if got := lookupStatus(c.qs, c.addr); got != c.want {
			t.Errorf("lookupStatus(%v, %v) = %s, want %s", c.qs, c.addr, got, c.want)
		}
	}
}
