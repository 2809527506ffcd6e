package world

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Observe re-derives a domain's Resolution by asking a DNS server the way
// a survey does: A then AAAA (as family asks), over UDP with EDNS0 and a
// TCP retry when the reply is truncated. It exists so that tests can prove
// that what is served matches Truth. c may be nil (a default client with a
// 2s timeout); set c.Dialer to bind the queries to a path. Per-query
// statuses combine as in survey.Summary: NOERROR when any query returned
// an address, else the first other status, NO_ANSWER when all queries
// were NOERROR without addresses. tcpUsed reports a TCP fallback.
func Observe(ctx context.Context, c *dns.Client, server, name string, family int) (r Resolution, tcpUsed bool, err error) {
	if c == nil {
		c = &dns.Client{Timeout: 2 * time.Second}
	}
	var types []uint16
	if family != 6 {
		types = append(types, dns.TypeA)
	}
	if family != 4 {
		types = append(types, dns.TypeAAAA)
	}
	first := ""
	for _, qt := range types {
		st, cn, addrs, tcp, err := query(ctx, c, server, dns.Fqdn(name), qt)
		if err != nil {
			return Resolution{}, false, err
		}
		tcpUsed = tcpUsed || tcp
		if len(cn) > 0 && r.CNAMEs == nil {
			r.CNAMEs = cn
		}
		r.Addrs = append(r.Addrs, addrs...)
		if first == "" && st != StatusNoError {
			first = st
		}
	}
	switch {
	case len(r.Addrs) > 0:
		r.Status = StatusNoError
	case first != "":
		r.Status = first
	default:
		r.Status = StatusNoAnswer
	}
	return r, tcpUsed, nil
}

// query sends one question and returns the zdns-style status, the CNAME
// chain targets and the addresses. Only a cancelled ctx or a broken
// socket is an error; a silent server is TIMEOUT.
func query(ctx context.Context, c *dns.Client, server, fqdn string, qt uint16) (status string, cnames []string, addrs []netip.Addr, tcp bool, err error) {
	m := new(dns.Msg)
	m.SetQuestion(fqdn, qt)
	m.SetEdns0(1232, false)
	in, _, err := c.ExchangeContext(ctx, m, server)
	if err == nil && in.Truncated {
		tc := *c
		tc.Net = "tcp"
		tcp = true
		in, _, err = tc.ExchangeContext(ctx, m, server)
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", nil, nil, tcp, ctx.Err()
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
			return StatusTimeout, nil, nil, tcp, nil
		}
		return "", nil, nil, tcp, err
	}
	if in.Rcode != dns.RcodeSuccess {
		return dns.RcodeToString[in.Rcode], nil, nil, tcp, nil
	}
	for _, rr := range in.Answer {
		switch rr := rr.(type) {
		case *dns.CNAME:
			cnames = append(cnames, strings.TrimSuffix(strings.ToLower(rr.Target), "."))
		case *dns.A:
			if a, ok := netip.AddrFromSlice(rr.A.To4()); ok {
				addrs = append(addrs, a)
			}
		case *dns.AAAA:
			if a, ok := netip.AddrFromSlice(rr.AAAA.To16()); ok {
				addrs = append(addrs, a)
			}
		}
	}
	if len(addrs) == 0 {
		return StatusNoAnswer, cnames, nil, tcp, nil
	}
	return StatusNoError, cnames, addrs, tcp, nil
}

// CheckServed queries every domain of t on the resolver server of path
// (with Observe, workers at a time; c as in Observe) and returns an error
// describing the domains whose served resolution differs from t, or nil
// when everything served matches the truth. The lab uses it to prove that
// truth.json matches what its resolvers actually answer.
func (t *Truth) CheckServed(ctx context.Context, c *dns.Client, path, server string, workers int) error {
	if !slices.Contains(t.Paths, path) {
		return fmt.Errorf("world: check served: path %q not in truth %q", path, t.Paths)
	}
	workers = max(workers, 1)
	type result struct {
		i   int
		r   Resolution
		err error
	}
	jobs := make(chan int)
	results := make(chan result)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				r, _, err := Observe(ctx, c, server, t.Domains[i].Name, t.Family)
				results <- result{i, r, err}
			}
		}()
	}
	go func() {
		defer close(jobs)
		for i := range t.Domains {
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()
	var bad []string
	var firstErr error
	n := 0
	for x := range results {
		n++
		if x.err != nil {
			if firstErr == nil {
				firstErr = x.err
			}
			continue
		}
		if want := t.Domains[x.i].Paths[path]; !sameResolution(x.r, want) {
			bad = append(bad, fmt.Sprintf("%s: served %s %v %v, truth %s %v %v", t.Domains[x.i].Name,
				x.r.Status, x.r.CNAMEs, x.r.Addrs, want.Status, want.CNAMEs, want.Addrs))
		}
	}
	if firstErr != nil {
		return fmt.Errorf("world: check served on %s: %w", path, firstErr)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if nb := len(bad); nb > 0 {
		sort.Strings(bad)
		more := ""
		if nb > 10 {
			more = " (first 10 shown)"
			bad = bad[:10]
		}
		return fmt.Errorf("world: %d of %d domains served on %s differ from the truth%s:\n  %s", nb, n, path, more, strings.Join(bad, "\n  "))
	}
	return nil
}

// sameResolution compares status, CNAME chain (case-insensitively) and
// addresses in order.
func sameResolution(a, b Resolution) bool {
	if a.Status != b.Status || len(a.CNAMEs) != len(b.CNAMEs) || !slices.Equal(a.Addrs, b.Addrs) {
		return false
	}
	for i := range a.CNAMEs {
		if !strings.EqualFold(a.CNAMEs[i], b.CNAMEs[i]) {
			return false
		}
	}
	return true
}
