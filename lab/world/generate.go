package world

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"time"
)

// MaxDomains bounds Generate so a typo cannot eat the machine.
const MaxDomains = 10_000_000

// Address layout: host h (1-based) of a target prefix has the IPv4 address
// prefix+off(h) and the IPv6 address prefix6+off(h), where off skips the
// .0 and .255 addresses of every /24 (some tools treat them specially).
// A /17 holds 128*254 hosts; when a class runs out, hosts are shared
// between domains (like CDN addresses are).
const hostsPerPrefix = 128 * 254

func hostOffset(h int) uint32 { return uint32((h-1)/254*256 + (h-1)%254 + 1) }

func addrAt(p netip.Prefix, off uint32) netip.Addr {
	b := p.Addr().AsSlice()
	n := len(b)
	for i := 0; i < 4; i++ {
		b[n-1-i] |= byte(off >> (8 * i))
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// host classes (who resolves the host, which sets its delay and reachability)
const (
	clsShared = iota // resolved on both paths
	clsRep0          // replica resolved on the first path
	clsRep1          // replica resolved on the second path (cellular CDN)
	clsPriv0         // private, resolved on the first path
	clsPriv1         // private, resolved on the second path
	nClasses
)

type host struct{ v4, v6 netip.Addr }

type generator struct {
	w       *World
	rng     *rand.Rand
	classes [nClasses][]host
	next    [2]int // next host id: public, private
}

// reuse is the chance that a domain shares a host already in use (CDN).
const reuse = 0.1

func (g *generator) host(cls int) host {
	space := 0
	if cls == clsPriv0 || cls == clsPriv1 {
		space = 1
	}
	used := g.classes[cls]
	if len(used) > 0 && (g.next[space] >= hostsPerPrefix || g.rng.Float64() < reuse) {
		return used[g.rng.IntN(len(used))]
	}
	if g.next[space] >= hostsPerPrefix { // class empty and space full: borrow any host of the space
		for c := range g.classes {
			if (c >= clsPriv0) == (space == 1) && len(g.classes[c]) > 0 {
				return g.classes[c][g.rng.IntN(len(g.classes[c]))]
			}
		}
	}
	g.next[space]++
	off := hostOffset(g.next[space])
	p4, p6 := PublicV4, PublicV6
	if space == 1 {
		p4, p6 = PrivateV4, PrivateV6
	}
	h := host{addrAt(p4, off), addrAt(p6, off)}
	g.classes[cls] = append(g.classes[cls], h)

	// Attributes are per host, shared by its two addresses. Extra delays
	// are whole milliseconds; second-path replicas are a bit farther on
	// average, so LL is slower than LW for about 60% of differing domains
	// (004 §III-B).
	s := &g.w.Shares
	p0, p1 := g.w.Paths[0], g.w.Paths[1]
	var extra int
	var unreach []string
	switch cls {
	case clsShared:
		extra = 5 + g.rng.IntN(76)
	case clsRep0:
		extra = 1 + g.rng.IntN(32)
	case clsRep1:
		extra = 1 + g.rng.IntN(40)
	default:
		extra = 1 + g.rng.IntN(20)
	}
	r := g.rng.Float64()
	t1 := s.Dead
	t2 := t1 + s.CarrierNAT
	t3 := t2 + s.FirstPathBlock
	t4 := t3 + s.SecondPathBlock
	switch {
	case cls == clsPriv0:
		unreach = []string{p1} // a private server is only reachable from inside its network
	case cls == clsPriv1:
		unreach = []string{p0}
	case r < t1:
		unreach = []string{p0, p1}
	case r < t2:
		if cls == clsRep1 {
			unreach = []string{p0}
		}
	case r < t3:
		unreach = []string{p0}
	case r < t4:
		unreach = []string{p1}
	}
	unreach6 := unreach
	if s.FirstPathV6Block > 0 && space != 1 && !slices.Contains(unreach, p0) && g.rng.Float64() < s.FirstPathV6Block {
		unreach6 = append(slices.Clone(unreach), p0)
	}
	for _, a := range []netip.Addr{h.v4, h.v6} {
		u := unreach
		if a == h.v6 {
			u = unreach6
		}
		g.w.Targets[a] = &Target{Addr: a, ExtraDelay: time.Duration(extra) * time.Millisecond,
			UnreachableFrom: u, Private: space == 1}
	}
	return h
}

// addrs picks n hosts of class cls and returns their addresses of the
// families fam (0 dual, 4, 6). Duplicate hosts are dropped.
func (g *generator) addrs(cls, n, fam int) (a4, a6 []netip.Addr) {
	seen := make(map[host]bool, n)
	for range n {
		h := g.host(cls)
		if seen[h] {
			continue
		}
		seen[h] = true
		if fam != 6 {
			a4 = append(a4, h.v4)
		}
		if fam != 4 {
			a6 = append(a6, h.v6)
		}
	}
	return a4, a6
}

var words = []string{
	"alpha", "bravo", "cedar", "delta", "ember", "fable", "gamma", "harbor",
	"indigo", "jasper", "kilo", "lumen", "maple", "nova", "orbit", "pixel",
	"quartz", "raven", "sierra", "tango", "umbra", "vertex", "willow", "xenon",
	"yonder", "zephyr", "atlas", "breeze", "comet", "dune", "echo", "fjord",
}

// Large answers: 36 A records (36*16 bytes) or 20 AAAA records (20*28
// bytes) are more than a 512-byte UDP reply can hold.
const (
	largeA    = 36
	largeAAAA = 20
)

func (o *Options) setDefaults() {
	if o.Paths == ([2]string{}) {
		o.Paths = DefaultPaths
	}
	if o.Shares == (Shares{}) {
		o.Shares = DefaultShares()
	}
	if o.BaseDelay == nil {
		o.BaseDelay = map[string]time.Duration{o.Paths[0]: 10 * time.Millisecond, o.Paths[1]: 30 * time.Millisecond}
	}
}

// Generate builds a world deterministically from o: the same Options give
// the same world, byte for byte once saved. Zero fields get defaults
// (DefaultPaths, DefaultShares, base delays 10ms and 30ms). Category counts
// are round(share*Domains), at least one of each planted category when
// Domains >= 20, with "same" taking the rest; categories are then shuffled
// over the ranks.
func Generate(o Options) (*World, error) {
	o.setDefaults()
	if o.Domains < 0 || o.Domains > MaxDomains {
		return nil, fmt.Errorf("world: domains %d out of range [0, %d]", o.Domains, MaxDomains)
	}
	s := o.Shares
	shares := []struct {
		cat string
		v   float64
	}{
		{CatDiffer, s.Differ}, {CatOnePath, s.OnePath}, {CatNXDomain, s.NXDomain},
		{CatServFail, s.ServFail}, {CatTimeout, s.Timeout}, {CatNoAnswer, s.NoAnswer},
		{CatLarge, s.Large}, {CatPrivate, s.Private},
	}
	sum := 0.0
	for _, x := range append(shares, struct {
		cat string
		v   float64
	}{"cname", s.CNAME}, struct {
		cat string
		v   float64
	}{"dead", s.Dead + s.CarrierNAT + s.FirstPathBlock + s.SecondPathBlock}) {
		if math.IsNaN(x.v) || x.v < 0 || x.v > 1 {
			return nil, fmt.Errorf("world: share %s = %v out of [0,1]", x.cat, x.v)
		}
	}
	for _, x := range shares {
		sum += x.v
	}
	if sum > 1 {
		return nil, fmt.Errorf("world: category shares add up to %v > 1", sum)
	}
	w := &World{Options: o, Targets: make(map[netip.Addr]*Target)}
	if err := w.Validate(); err != nil { // paths and delays
		return nil, err
	}
	w.Domains = make([]Domain, o.Domains)
	g := &generator{w: w, rng: rand.New(rand.NewPCG(uint64(o.Seed), 0x6d70746573746572))}
	n := o.Domains

	cats := make([]string, 0, n)
	for _, x := range shares {
		c := int(math.Round(x.v * float64(n)))
		if c == 0 && x.v > 0 && n >= 20 {
			c = 1
		}
		for range c {
			cats = append(cats, x.cat)
		}
	}
	if len(cats) > n {
		return nil, errors.New("world: too few domains for the planted categories")
	}
	for len(cats) < n {
		cats = append(cats, CatSame)
	}
	g.rng.Shuffle(n, func(i, j int) { cats[i], cats[j] = cats[j], cats[i] })

	// CNAME chains go to same and differ domains.
	var cnameIdx []int
	for i, c := range cats {
		if c == CatSame || c == CatDiffer {
			cnameIdx = append(cnameIdx, i)
		}
	}
	g.rng.Shuffle(len(cnameIdx), func(i, j int) { cnameIdx[i], cnameIdx[j] = cnameIdx[j], cnameIdx[i] })
	nc := int(math.Round(s.CNAME * float64(n)))
	if nc == 0 && s.CNAME > 0 && n >= 20 {
		nc = 1
	}
	cname := make(map[int]bool, nc)
	for _, i := range cnameIdx[:min(nc, len(cnameIdx))] {
		cname[i] = true
	}

	nLarge := 0
	for _, c := range cats {
		if c == CatLarge {
			nLarge++
		}
	}
	largeSets := make([]View, (nLarge+3)/4)

	views := make([]View, 2*n) // one allocation for all views
	p0, p1 := o.Paths[0], o.Paths[1]
	for i := range n {
		d := &w.Domains[i]
		d.Rank = i + 1
		label := words[g.rng.IntN(len(words))] + strconv.Itoa(d.Rank)
		d.Name = label + ".example"
		d.Category = cats[i]
		d.Views = views[2*i : 2*i+2 : 2*i+2]
		v0, v1 := &d.Views[0], &d.Views[1]
		v0.Path, v1.Path = p0, p1

		fam := 0 // 60% dual stack, 35% IPv4 only, 5% IPv6 only
		switch r := g.rng.Float64(); {
		case r < 0.35:
			fam = 4
		case r < 0.40:
			fam = 6
		}
		nh := 1 // hosts per answer: 75% one, 20% two, 5% three
		switch r := g.rng.Float64(); {
		case r < 0.05:
			nh = 3
		case r < 0.25:
			nh = 2
		}

		switch d.Category {
		case CatSame:
			v0.Status = StatusNoError
			v0.A, v0.AAAA = g.addrs(clsShared, nh, fam)
			*v1 = *v0
			v1.Path = p1
		case CatDiffer:
			v0.Status, v1.Status = StatusNoError, StatusNoError
			v0.A, v0.AAAA = g.addrs(clsRep0, nh, fam)
			v1.A, v1.AAAA = g.addrs(clsRep1, nh, fam)
		case CatOnePath:
			good, bad := v0, v1
			if g.rng.IntN(2) == 1 {
				good, bad = v1, v0
			}
			good.Status = StatusNoError
			good.A, good.AAAA = g.addrs(clsShared, nh, fam)
			bad.Status = StatusNXDomain
			if g.rng.IntN(3) == 0 {
				bad.Status = StatusServFail
			}
		case CatNXDomain:
			v0.Status, v1.Status = StatusNXDomain, StatusNXDomain
		case CatServFail:
			v0.Status, v1.Status = StatusServFail, StatusServFail
		case CatTimeout:
			v0.Status, v1.Status = StatusTimeout, StatusTimeout
		case CatNoAnswer:
			v0.Status, v1.Status = StatusNoAnswer, StatusNoAnswer
		case CatLarge:
			// A few big CDN address sets shared by all large domains.
			k := g.rng.IntN(len(largeSets))
			if largeSets[k].A == nil {
				ls := &largeSets[k]
				seen := map[host]bool{}
				for range largeA {
					if h := g.host(clsShared); !seen[h] {
						seen[h] = true
						ls.A = append(ls.A, h.v4)
						if len(ls.AAAA) < largeAAAA {
							ls.AAAA = append(ls.AAAA, h.v6)
						}
					}
				}
			}
			*v0 = largeSets[k]
			v0.Status, v0.Large = StatusNoError, true
			*v1 = *v0
			v0.Path, v1.Path = p0, p1
		case CatPrivate:
			// Mostly a cellular-core server seen only from the second path.
			priv, pub, pcls, rcls := v1, v0, clsPriv1, clsRep0
			if g.rng.IntN(3) == 0 {
				priv, pub, pcls, rcls = v0, v1, clsPriv0, clsRep1
			}
			priv.Status, pub.Status = StatusNoError, StatusNoError
			priv.A, priv.AAAA = g.addrs(pcls, 1, fam)
			pub.A, pub.AAAA = g.addrs(rcls, nh, fam)
		}
		if cname[i] {
			hops := 1 + g.rng.IntN(3)
			for k := 1; k <= hops; k++ {
				v0.CNAMEs = append(v0.CNAMEs, fmt.Sprintf("h%d.%s.cdn.example", k, label))
			}
			if d.Category == CatSame {
				v1.CNAMEs = v0.CNAMEs
			} else { // per-path CDN edges
				v0.CNAMEs[hops-1] = fmt.Sprintf("h%d.%s.v0.cdn.example", hops, label)
				v1.CNAMEs = append([]string(nil), v0.CNAMEs...)
				v1.CNAMEs[hops-1] = fmt.Sprintf("h%d.%s.v1.cdn.example", hops, label)
			}
		}
	}
	return w, nil
}
