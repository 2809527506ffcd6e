package probe

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// V6BlackholeName is the name DetectV6Blackhole asks for: any answer,
// even NXDOMAIN, shows the resolver was reached.
const V6BlackholeName = "ipv4only.arpa"

// DetectV6Blackhole returns what shows an IPv6 black hole on p ("" when
// nothing does, or when p cannot tell: no global IPv6 address, or not
// both an IPv4 and an IPv6 resolver of its own): the path's IPv4
// resolvers answer a query while its IPv6 ones, asked the same over p's
// IPv6 address and routes, answer nothing. One query per family, each
// bounded by timeout with one retry.
func DetectV6Blackhole(ctx context.Context, p Path, timeout time.Duration) string {
	src, ok := p.SourceAddr(Family6)
	if !ok {
		return ""
	}
	var by [2][]DNSServer // IPv4, IPv6
	for _, s := range p.DNS {
		i := 0
		if s.Addr.Addr().Unmap().Is6() {
			i = 1
		}
		by[i] = append(by[i], s)
	}
	if len(by[0]) == 0 || len(by[1]) == 0 {
		return ""
	}
	var (
		wg     sync.WaitGroup
		status [2]string
	)
	for i := range by {
		q := p
		q.DNS = by[i]
		wg.Go(func() {
			r, err := NewResolver(q, ResolverOptions{Timeout: timeout, Retries: 1})
			if err != nil {
				status[i] = DNSError
				return
			}
			status[i] = r.Lookup(ctx, V6BlackholeName, Family4).Status
		})
	}
	wg.Wait()
	if ctx.Err() != nil || status[0] == DNSTimeout || status[0] == DNSError || status[1] != DNSTimeout {
		return ""
	}
	var v6 []string
	for _, s := range by[1] {
		v6 = append(v6, s.Addr.Addr().String())
	}
	slices.Sort(v6)
	return fmt.Sprintf("v6-blackhole: %s has IPv6 address %s, yet its IPv6 resolvers (%s) answered nothing in 2 attempts of %s while its IPv4 resolvers did (%s)",
		p.Name, src, strings.Join(v6, ", "), timeout, status[0])
}
