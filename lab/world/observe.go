package world

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
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
