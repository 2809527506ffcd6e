package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// DNS statuses of a query or a lookup, named as zdns names them.
const (
	DNSNoError  = "NOERROR"
	DNSNXDomain = "NXDOMAIN"
	DNSServFail = "SERVFAIL"
	DNSRefused  = "REFUSED"
	DNSTimeout  = "TIMEOUT"
	DNSNoAnswer = "NO_ANSWER" // NOERROR everywhere but no address of a wanted type
	DNSError    = "ERROR"     // any other rcode or a local failure
)

// ErrNoDNS: the path has no DNS server it can reach with its own addresses.
var ErrNoDNS = errors.New("no usable DNS server")

// ednsSize is the EDNS0 UDP payload size advertised (the DNS flag day 2020
// value: no IP fragmentation on common paths).
const ednsSize = 1232

// ResolverOptions tune a Resolver; zero values take the defaults.
type ResolverOptions struct {
	Timeout time.Duration // per attempt; default 2 s
	Retries int           // extra attempts after a timeout, rotating servers
	Cap     int           // queries in flight per server; default 1
	// Adaptive sizes each server's in-flight window from its answers (up
	// to Cap) and gives back the slot of an attempt unanswered for a few
	// round trips (resolve_mux.go); else Cap attempts hold a slot each
	// until answered or timed out.
	Adaptive bool
	Bytes    *atomic.Int64 // if set, counts the bytes sent on the path (IP packets)
	// HostLost, if set, says whether the host may have lost packets of
	// the resolver's sockets in (from, to] (drops it counted, or a stall
	// of the whole host). An attempt that timed out with such a loss
	// while its answer was due is not counted against the server: the
	// query gets one more attempt (at most MaxHostRetries of them).
	HostLost func(from, to time.Time) bool
}

// MaxHostRetries is how many attempts of a query the host's own losses
// can add (ResolverOptions.HostLost).
const MaxHostRetries = 3

// Resolver queries a path's own DNS servers through sockets bound to that
// path: the answers are the ones a host using only that path would get.
type Resolver struct {
	path    Path
	opts    ResolverOptions
	servers []netip.AddrPort
	next    atomic.Uint32 // spreads first attempts over the servers

	mu    sync.Mutex // the lookups' state (resolve_mux.go)
	muxes []udpMux   // per-server shared UDP socket
	room  chan struct{}
}

// NewResolver returns a resolver for p, or an error wrapping ErrNoDNS when
// p has no DNS server of a family it has an address of.
func NewResolver(p Path, o ResolverOptions) (*Resolver, error) {
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	o.Retries = max(o.Retries, 0)
	if o.Bytes == nil {
		o.Bytes = new(atomic.Int64)
	}
	r := &Resolver{path: p, opts: o, room: make(chan struct{}, 1)}
	for _, s := range p.DNS {
		if !s.Addr.IsValid() {
			continue
		}
		if _, ok := p.SourceAddr(FamilyOf(s.Addr.Addr())); !ok {
			continue // e.g. an IPv6 resolver on a path without IPv6
		}
		r.servers = append(r.servers, s.Addr)
	}
	r.muxes = make([]udpMux, len(r.servers))
	if len(r.servers) == 0 {
		return nil, fmt.Errorf("path %s has %w (set one with --dns %s=ADDR or in the config)", p.Name, ErrNoDNS, p.Name)
	}
	return r, nil
}

// Path is the path the resolver queries through.
func (r *Resolver) Path() Path { return r.path }

// Servers are the DNS servers used, in the path's order.
func (r *Resolver) Servers() []netip.AddrPort { return append([]netip.AddrPort(nil), r.servers...) }

// Query is one A or AAAA query, after retries.
type Query struct {
	QType    string         // "A" or "AAAA"
	Status   string         // DNS* status
	Server   netip.AddrPort // the server of the last attempt
	TCP      bool           // the answer came over TCP (UDP was truncated)
	Attempts int
	// HostRetries of the attempts were added because the host may have
	// lost an earlier one (ResolverOptions.HostLost); HostSuspect: the
	// query timed out and one of its counted attempts too may have been
	// lost by the host (no more could be added).
	HostRetries int
	HostSuspect bool
	Time        time.Duration // all attempts
	Err         error         // set for DNSTimeout and local DNSError failures
}

// Lookup is the result of looking one name up on one path.
type Lookup struct {
	Name    string
	Status  string       // DNSNoError if any address came back, else the first failing query's status, else DNSNoAnswer
	Answers []netip.Addr // deduplicated, A answers first
	CNAMEs  []string     // the longest CNAME chain followed, without trailing dots
	Queries []Query      // in query order (A, AAAA)
	Time    time.Duration
	Bytes   int64 // bytes sent for these queries (IP packets, estimated for TCP)
}

// lookupStatus: NOERROR if any address came back, else the first query
// status that is not NOERROR, else NO_ANSWER (survey/summary.go defines it).
func lookupStatus(qs []Query, anyAddr bool) string {
	if anyAddr {
		return DNSNoError
	}
	for _, q := range qs {
		if q.Status != DNSNoError {
			return q.Status
		}
	}
	return DNSNoAnswer
}

func qtypes(f Family) []uint16 {
	switch f {
	case Family4:
		return []uint16{dns.TypeA}
	case Family6:
		return []uint16{dns.TypeAAAA}
	}
	return []uint16{dns.TypeA, dns.TypeAAAA}
}

func rcodeStatus(rc int) string {
	switch rc {
	case dns.RcodeSuccess:
		return DNSNoError
	case dns.RcodeNameError:
		return DNSNXDomain
	case dns.RcodeServerFailure:
		return DNSServFail
	case dns.RcodeRefused:
		return DNSRefused
	}
	return DNSError
}

// isTimeout: a cancelled context is not a timeout (the caller gave up).
func isTimeout(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (r *Resolver) exchangeOn(ctx context.Context, network string, server netip.AddrPort, m *dns.Msg, sent *int64) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	conn, err := dialResolver(ctx, r.path, network, server.String())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// The DNS client only honours the deadline: a cancelled caller must not
	// wait for it.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	n := int64(m.Len()) + overhead(network, server.Addr())
	r.opts.Bytes.Add(n)
	*sent += n
	c := &dns.Client{Net: network, UDPSize: ednsSize, Timeout: r.opts.Timeout}
	resp, _, err := c.ExchangeWithConnContext(ctx, m, &dns.Conn{Conn: conn, UDPSize: ednsSize})
	if err != nil && ctx.Err() != nil {
		// Report the deadline or the cancellation, whatever the read said.
		return nil, fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return resp, err
}

// overhead is the IP and transport header bytes of one query: IPv4 20 or
// IPv6 40, plus UDP 8; over TCP the 2-byte length prefix plus three more
// header-only packets (handshake and FIN) are counted as an estimate.
func overhead(network string, a netip.Addr) int64 {
	hdr := int64(28)
	if a.Is6() && !a.Is4In6() {
		hdr = 48
	}
	if network == "tcp" {
		hdr += 2 + 3*hdr + 12
	}
	return hdr
}

// answers follows the CNAME chain from qname and returns the addresses of
// the wanted type owned by any name in the chain.
func answers(qname string, qt uint16, resp *dns.Msg) ([]netip.Addr, []string) {
	owner := strings.ToLower(qname)
	inChain := map[string]bool{owner: true}
	var chain []string
	for range 16 { // loop guard
		next := ""
		for _, rr := range resp.Answer {
			if c, ok := rr.(*dns.CNAME); ok && strings.ToLower(c.Hdr.Name) == owner {
				next = strings.ToLower(c.Target)
				break
			}
		}
		if next == "" || inChain[next] {
			break
		}
		chain = append(chain, strings.TrimSuffix(next, "."))
		inChain[next] = true
		owner = next
	}
	var out []netip.Addr
	for _, rr := range resp.Answer {
		if !inChain[strings.ToLower(rr.Header().Name)] {
			continue
		}
		var ip []byte
		switch v := rr.(type) {
		case *dns.A:
			if qt == dns.TypeA {
				ip = v.A
			}
		case *dns.AAAA:
			if qt == dns.TypeAAAA {
				ip = v.AAAA
			}
		}
		if a, ok := netip.AddrFromSlice(ip); ok {
			if qt == dns.TypeA {
				a = a.Unmap()
			}
			out = append(out, a)
		}
	}
	return out, chain
}
