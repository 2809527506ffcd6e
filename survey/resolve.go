package survey

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/mptester/mptester/probe"
)

// ResolutionRecord is one "resolution" line: one domain on one path.
type ResolutionRecord struct {
	Type    string        `json:"type"` // "resolution"
	Domain  string        `json:"domain"`
	Rank    int           `json:"rank"`
	Path    string        `json:"path"`
	Status  string        `json:"status"`
	Answers []netip.Addr  `json:"answers"`
	CNAMEs  []string      `json:"cname_chain,omitempty"`
	TimeMs  float64       `json:"time_ms"`
	Queries []QueryResult `json:"queries"`
	Bytes   int64         `json:"bytes"` // bytes sent for these queries (IP packets, estimated for TCP)
	Valid   bool          `json:"valid"`
}

// QueryResult is one A or AAAA query, after retries.
type QueryResult struct {
	QType    string  `json:"qtype"`
	Status   string  `json:"status"`
	Server   string  `json:"server,omitempty"`
	TCP      bool    `json:"tcp,omitempty"`
	Attempts int     `json:"attempts"`
	TimeMs   float64 `json:"time_ms"`
	Error    string  `json:"error,omitempty"`
}

// Resolver queries a path's own DNS servers through sockets bound to that
// path, with at most Cap queries in flight per server.
type Resolver struct {
	Path    probe.Path
	Timeout time.Duration // per attempt
	Retries int           // extra attempts after a timeout, rotating servers
	Bytes   *atomic.Int64 // bytes sent on the path (IP packets)

	servers []netip.AddrPort
	sems    []chan struct{}
	next    atomic.Uint32 // spreads first attempts over the path's servers
}

// NewResolver returns a resolver for p, or an error when p has no DNS.
func NewResolver(p probe.Path, timeout time.Duration, retries, cap int, bytes *atomic.Int64) (*Resolver, error) {
	r := &Resolver{Path: p, Timeout: timeout, Retries: retries, Bytes: bytes}
	for _, s := range p.DNS {
		if !s.Addr.IsValid() {
			continue
		}
		if _, ok := p.SourceAddr(probe.FamilyOf(s.Addr.Addr())); !ok {
			continue // e.g. an IPv6 resolver on a path without IPv6
		}
		r.servers = append(r.servers, s.Addr)
		r.sems = append(r.sems, make(chan struct{}, max(cap, 1)))
	}
	if len(r.servers) == 0 {
		return nil, fmt.Errorf("path %s has no usable DNS server (set one with --dns %s=ADDR or in the config)", p.Name, p.Name)
	}
	if r.Bytes == nil {
		r.Bytes = new(atomic.Int64)
	}
	return r, nil
}

// Resolve looks name up for the wanted families (A then AAAA).
func (r *Resolver) Resolve(ctx context.Context, d Domain, fam probe.Family) ResolutionRecord {
	rec := ResolutionRecord{Type: "resolution", Domain: d.Name, Rank: d.Rank, Path: r.Path.Name, Answers: []netip.Addr{}, Valid: true}
	start := time.Now()
	// A and AAAA go out together: a dead name costs one timeout, not two.
	qts := qtypes(fam)
	type answer struct {
		q     QueryResult
		addrs []netip.Addr
		chain []string
		bytes int64
	}
	ans := make([]answer, len(qts))
	var wg sync.WaitGroup
	for i, qt := range qts {
		wg.Go(func() {
			a := &ans[i]
			a.q, a.addrs, a.chain = r.query(ctx, d.Name, qt, &a.bytes)
		})
	}
	wg.Wait()
	var statuses []string
	seen := map[netip.Addr]struct{}{}
	for _, a := range ans {
		rec.Queries = append(rec.Queries, a.q)
		rec.Bytes += a.bytes
		statuses = append(statuses, a.q.Status)
		if len(a.chain) > len(rec.CNAMEs) {
			rec.CNAMEs = a.chain
		}
		for _, x := range a.addrs {
			if _, dup := seen[x]; !dup {
				seen[x] = struct{}{}
				rec.Answers = append(rec.Answers, x)
			}
		}
	}
	rec.TimeMs = msOf(time.Since(start))
	rec.Status = domainStatus(statuses, len(rec.Answers) > 0)
	return rec
}

func qtypes(f probe.Family) []uint16 {
	switch f {
	case probe.Family4:
		return []uint16{dns.TypeA}
	case probe.Family6:
		return []uint16{dns.TypeAAAA}
	}
	return []uint16{dns.TypeA, dns.TypeAAAA}
}

func (r *Resolver) query(ctx context.Context, name string, qt uint16, sent *int64) (QueryResult, []netip.Addr, []string) {
	q := QueryResult{QType: dns.TypeToString[qt]}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qt)
	m.SetEdns0(1232, false)
	start := time.Now()
	var resp *dns.Msg
	var err error
	first := int(r.next.Add(1))
	for attempt := 0; attempt <= r.Retries; attempt++ {
		if ctx.Err() != nil {
			err = ctx.Err()
			break
		}
		i := (first + attempt) % len(r.servers)
		q.Attempts++
		q.Server = r.servers[i].String()
		resp, q.TCP, err = r.exchange(ctx, i, m, sent)
		if err == nil || !isTimeout(err) {
			break
		}
	}
	q.TimeMs = msOf(time.Since(start))
	switch {
	case err != nil && isTimeout(err):
		q.Status = StatusTimeout
		q.Error = err.Error()
		return q, nil, nil
	case err != nil:
		q.Status = StatusError
		q.Error = err.Error()
		return q, nil, nil
	}
	q.Status = rcodeStatus(resp.Rcode)
	if resp.Rcode != dns.RcodeSuccess {
		return q, nil, nil
	}
	addrs, chain := answers(m.Question[0].Name, qt, resp)
	return q, addrs, chain
}

func rcodeStatus(rc int) string {
	switch rc {
	case dns.RcodeSuccess:
		return StatusNoError
	case dns.RcodeNameError:
		return StatusNXDomain
	case dns.RcodeServerFailure:
		return StatusServFail
	case dns.RcodeRefused:
		return StatusRefused
	}
	return StatusError
}

func isTimeout(err error) bool { return classifyErr(err) == ProbeTimeout }

// exchange sends m to server i over UDP, falling back to TCP when the
// answer is truncated.
func (r *Resolver) exchange(ctx context.Context, i int, m *dns.Msg, sent *int64) (*dns.Msg, bool, error) {
	sem := r.sems[i]
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	defer func() { <-sem }()
	resp, err := r.exchangeOn(ctx, "udp", r.servers[i], m, sent)
	if err != nil || !resp.Truncated {
		return resp, false, err
	}
	resp, err = r.exchangeOn(ctx, "tcp", r.servers[i], m, sent)
	return resp, true, err
}

func (r *Resolver) exchangeOn(ctx context.Context, network string, server netip.AddrPort, m *dns.Msg, sent *int64) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	conn, err := probe.DialContext(ctx, r.Path, network, server.String())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	hdr := int64(28)
	if server.Addr().Is6() && !server.Addr().Is4In6() {
		hdr = 48
	}
	if network == "tcp" {
		hdr += 2 + 3*hdr + 12 // length prefix, handshake and FIN, TCP headers (estimate)
	}
	r.Bytes.Add(int64(m.Len()) + hdr)
	*sent += int64(m.Len()) + hdr
	c := &dns.Client{Net: network, UDPSize: 1232, Timeout: r.Timeout}
	resp, _, err := c.ExchangeWithConnContext(ctx, m, &dns.Conn{Conn: conn, UDPSize: 1232})
	if err != nil && ctx.Err() != nil && !errors.Is(err, context.Canceled) {
		// The deadline fired: report it as a timeout whatever the read said.
		return nil, fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
	}
	return resp, err
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
