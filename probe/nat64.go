package probe

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// NAT64 prefixes (RFC 6052) and their discovery (RFC 7050).

// nat64Lengths are the prefix lengths RFC 6052 §2.2 allows.
var nat64Lengths = []int{96, 64, 56, 48, 40, 32}

// IPv4OnlyARPA are ipv4only.arpa's well-known addresses (RFC 7050 §2.2).
var IPv4OnlyARPA = []netip.Addr{netip.AddrFrom4([4]byte{192, 0, 0, 170}), netip.AddrFrom4([4]byte{192, 0, 0, 171})}

// v4Octets are the byte positions of the IPv4 address in an IPv6 address
// synthesized with a prefix of each length (RFC 6052 §2.2: bits 64-71,
// byte 8, are skipped and must be zero).
func v4Octets(plen int) ([4]int, bool) {
	switch plen {
	case 32:
		return [4]int{4, 5, 6, 7}, true
	case 40:
		return [4]int{5, 6, 7, 9}, true
	case 48:
		return [4]int{6, 7, 9, 10}, true
	case 56:
		return [4]int{7, 9, 10, 11}, true
	case 64:
		return [4]int{9, 10, 11, 12}, true
	case 96:
		return [4]int{12, 13, 14, 15}, true
	}
	return [4]int{}, false
}

// Extract4 returns the IPv4 address embedded in a by a NAT64 prefix of
// length plen (RFC 6052 §2.2); false when plen is not one of the allowed
// lengths or byte 8 (the "u" octet) is not zero.
func Extract4(a netip.Addr, plen int) (netip.Addr, bool) {
	pos, ok := v4Octets(plen)
	if !ok || !a.Is6() || a.Is4In6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	if plen < 96 && b[8] != 0 {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte{b[pos[0]], b[pos[1]], b[pos[2]], b[pos[3]]}), true
}

// Embed4 synthesizes the IPv6 address of v4 under NAT64 prefix p (RFC
// 6052 §2.2); false for a prefix length RFC 6052 does not allow.
func Embed4(p netip.Prefix, v4 netip.Addr) (netip.Addr, bool) {
	pos, ok := v4Octets(p.Bits())
	if !ok || !p.Addr().Is6() || !v4.Is4() {
		return netip.Addr{}, false
	}
	b := p.Masked().Addr().As16()
	for i := p.Bits() / 8; i < 16; i++ {
		b[i] = 0
	}
	v := v4.As4()
	for i, o := range pos {
		b[o] = v[i]
	}
	return netip.AddrFrom16(b), true
}

// NAT64Prefixes returns the prefixes under which the AAAA answers of
// ipv4only.arpa embed its well-known addresses (RFC 7050 §3: every
// well-known address found at an RFC 6052 position gives a prefix; the
// lengths are tried from /96 down and the first that embeds one wins).
func NAT64Prefixes(aaaa []netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range aaaa {
		for _, l := range nat64Lengths {
			v4, ok := Extract4(a, l)
			if !ok || !slices.Contains(IPv4OnlyARPA, v4) {
				continue
			}
			p := netip.PrefixFrom(a, l).Masked()
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
			break
		}
	}
	return out
}

// DiscoverNAT64 asks path r's DNS servers for the AAAA records of
// ipv4only.arpa (RFC 7050): a DNS64 synthesizes them, so their prefixes
// are the path's NAT64 prefixes. None (and a nil error) means the path's
// resolver is no DNS64.
func DiscoverNAT64(ctx context.Context, r *Resolver) ([]netip.Prefix, error) {
	lk := r.Lookup(ctx, "ipv4only.arpa", Family6)
	var aaaa []netip.Addr
	for _, a := range lk.Answers {
		if a.Is6() && !a.Is4In6() {
			aaaa = append(aaaa, a)
		}
	}
	if len(aaaa) == 0 && lk.Status != DNSNoError && lk.Status != DNSNoAnswer && lk.Status != DNSNXDomain {
		return nil, fmt.Errorf("ipv4only.arpa on %s: %s", r.Path().Name, lk.Status)
	}
	return NAT64Prefixes(aaaa), nil
}

// CGNAT is the shared address space of carrier-grade NAT (RFC 6598): a
// path with an address in it is behind one.
var CGNAT = netip.MustParsePrefix("100.64.0.0/10")

// NAT64Discovery is one path's RFC 7050 discovery: the prefixes found, or
// why none could be asked for or found.
type NAT64Discovery struct {
	Prefixes []netip.Prefix
	Err      error
}

// DiscoverNAT64Paths runs DiscoverNAT64 on every path with DNS servers,
// all at once, each through its own resolvers (timeout per query, one
// retry): the result per path name.
func DiscoverNAT64Paths(ctx context.Context, paths []Path, timeout time.Duration) map[string]NAT64Discovery {
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		out = map[string]NAT64Discovery{}
	)
	for _, p := range paths {
		if len(p.DNS) == 0 {
			continue
		}
		wg.Go(func() {
			var d NAT64Discovery
			r, err := NewResolver(p, ResolverOptions{Timeout: timeout, Retries: 1})
			if err != nil {
				d.Err = fmt.Errorf("no resolver: %w", err)
			} else {
				d.Prefixes, d.Err = DiscoverNAT64(ctx, r)
			}
			mu.Lock()
			out[p.Name] = d
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}
