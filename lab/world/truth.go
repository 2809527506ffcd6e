package world

import (
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/mptester/mptester/survey"
)

// SkipCrossPathPrivate is the Skipped reason of private addresses that a
// survey does not probe from a path other than the one that resolved them.
const SkipCrossPathPrivate = "cross-path-private"

// ExpectOptions describe the survey whose outcome Truth predicts.
type ExpectOptions struct {
	Family            int      // 0: A and AAAA, 4: A only, 6: AAAA only
	Paths             []string // resolve and probe paths, in order; default the world's paths
	AllowCrossPrivate bool     // probe private addresses from every path
	// NAT64 is, per path, the prefix of its NAT64 (the path has no IPv4;
	// its resolver is a DNS64): the survey probes IPv4 targets from it
	// through the translator (via-nat64, their RTTs apart in the cells)
	// and maps the synthesized AAAA back to their IPv4, so the address
	// sets are the world's.
	NAT64 map[string]netip.Prefix
}

// Resolution is a domain's expected resolution on one path, restricted to
// the wanted families: Status per the survey definition, the CNAME chain
// and the addresses (A records first, in served order).
type Resolution struct {
	Status string       `json:"status"`
	CNAMEs []string     `json:"cnames,omitempty"`
	Addrs  []netip.Addr `json:"addrs,omitempty"`
}

// DomainTruth is the expected resolution of one domain on every path.
type DomainTruth struct {
	Rank     int                   `json:"rank"`
	Name     string                `json:"name"`
	Category string                `json:"category"`
	Paths    map[string]Resolution `json:"paths"`
}

// Truth is the ground truth of a world for one kind of survey: what
// every domain resolves to per path, which world addresses are
// unreachable from which path, the expected RTT (ms) of every reachable
// address per path, and the expected survey summary.
type Truth struct {
	Seed              int64                             `json:"seed"`
	Family            int                               `json:"family"`
	Paths             []string                          `json:"paths"`
	AllowCrossPrivate bool                              `json:"allow_cross_private"`
	NAT64             map[string]netip.Prefix           `json:"nat64,omitempty"` // ExpectOptions.NAT64
	Domains           []DomainTruth                     `json:"domains"`
	Unreachable       map[string][]netip.Addr           `json:"unreachable"`
	ExpectedRTTms     map[string]map[netip.Addr]float64 `json:"expected_rtt_ms"`
	Summary           survey.Summary                    `json:"summary"`
}

// ResolveView is what a survey asking for family (0, 4 or 6) learns from
// view v: NOERROR when it got at least one address, else the view's
// failure status (NXDOMAIN, SERVFAIL, TIMEOUT), else NO_ANSWER.
func ResolveView(v *View, family int) Resolution {
	var r Resolution
	if family != 6 {
		r.Addrs = append(r.Addrs, v.A...)
	}
	if family != 4 {
		r.Addrs = append(r.Addrs, v.AAAA...)
	}
	switch {
	case len(r.Addrs) > 0:
		r.Status = StatusNoError
	case v.Status == StatusNXDomain || v.Status == StatusServFail || v.Status == StatusTimeout:
		r.Status = v.Status
	default:
		r.Status = StatusNoAnswer
	}
	if v.Status == StatusNoError {
		r.CNAMEs = v.CNAMEs
	}
	return r
}

// Truth computes the ground truth for a survey described by opt.
func (w *World) Truth(opt ExpectOptions) (*Truth, error) {
	paths := opt.Paths
	if len(paths) == 0 {
		paths = w.Paths[:]
	}
	for i, p := range paths {
		if w.PathIndex(p) < 0 || slices.Contains(paths[:i], p) {
			return nil, fmt.Errorf("world: truth: bad or repeated path %q (have %q)", p, w.Paths)
		}
	}
	if opt.Family != 0 && opt.Family != 4 && opt.Family != 6 {
		return nil, fmt.Errorf("world: truth: family %d is not 0, 4 or 6", opt.Family)
	}
	if opt.Family != 0 && len(opt.NAT64) > 0 {
		// Family 4 has no source on the path, family 6 probes the
		// synthesized addresses as IPv6 targets: not modelled.
		return nil, fmt.Errorf("world: truth: family %d with a NAT64 path is not modelled (only both families)", opt.Family)
	}
	t := &Truth{
		Seed: w.Seed, Family: opt.Family, Paths: slices.Clone(paths), AllowCrossPrivate: opt.AllowCrossPrivate, NAT64: opt.NAT64,
		Domains:       make([]DomainTruth, len(w.Domains)),
		Unreachable:   make(map[string][]netip.Addr),
		ExpectedRTTms: make(map[string]map[netip.Addr]float64),
	}
	res := make([][]Resolution, len(paths))
	for pi, p := range paths {
		res[pi] = make([]Resolution, len(w.Domains))
		for di := range w.Domains {
			res[pi][di] = ResolveView(w.Domains[di].View(p), opt.Family)
		}
		t.Unreachable[p] = w.Unreachable(p)
		rtts := make(map[netip.Addr]float64)
		for a, tg := range w.Targets {
			if tg.Reachable(p) {
				rtts[a] = ms(w.ExpectedRTT(p, a))
			}
		}
		t.ExpectedRTTms[p] = rtts
	}
	for di, d := range w.Domains {
		dt := DomainTruth{Rank: d.Rank, Name: d.Name, Category: d.Category, Paths: make(map[string]Resolution, len(paths))}
		for pi, p := range paths {
			dt.Paths[p] = res[pi][di]
		}
		t.Domains[di] = dt
	}
	t.Summary = summarize(paths, res, func(probe, resolve string, a netip.Addr) (rtt float64, skip, ok bool) {
		tg := w.Targets[a]
		if tg.Private && probe != resolve && !opt.AllowCrossPrivate {
			return 0, true, false
		}
		if !tg.Reachable(probe) {
			return 0, false, false
		}
		return ms(w.ExpectedRTT(probe, a)), false, true
	}, func(probe string, a netip.Addr) bool {
		_, ok := opt.NAT64[probe]
		return ok && a.Is4()
	})
	for pi, p := range paths {
		pr := &t.Summary.Resolution[pi]
		if pr.NAT64Prefix = opt.NAT64[p]; !pr.NAT64Prefix.IsValid() {
			continue
		}
		// The DNS64 synthesizes AAAA for a name with A records and none
		// of its own (RFC 6147 §5.1).
		for di := range w.Domains {
			v := w.Domains[di].View(p)
			if res[pi][di].Status == StatusNoError && len(v.A) > 0 && len(v.AAAA) == 0 {
				pr.Synthesized++
			}
		}
	}
	return t, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Write saves the truth as indented JSON (truth.json).
func (t *Truth) Write(path string) error {
	b, err := json.MarshalIndent(t, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// probeFunc says what probing address a (resolved on resolve) from probe
// gives: skipped by policy, or responsive with rtt ms (ok), or neither.
type probeFunc func(probe, resolve string, a netip.Addr) (rtt float64, skip, ok bool)

// summarize follows the definitions of survey.Summary. res is indexed
// [path][domain].
func summarize(paths []string, res [][]Resolution, probe probeFunc, via func(probe string, a netip.Addr) bool) survey.Summary {
	s := survey.Summary{Type: "summary", Status: "ok"}
	nd := 0
	if len(res) > 0 {
		nd = len(res[0])
	}
	sets := make([][]netip.Addr, len(paths))
	for pi, p := range paths {
		pr := survey.PathResolution{Path: p, Domains: nd, ByStatus: map[string]int{}}
		for _, r := range res[pi] {
			pr.ByStatus[r.Status]++
			if r.Status == StatusNoError {
				pr.Resolved++
			}
		}
		pr.Failed = nd - pr.Resolved
		s.Resolution = append(s.Resolution, pr)
		sets[pi] = uniqueAddrs(res[pi])
	}
	if len(paths) >= 2 {
		s.Overlap = overlap(paths, res, sets)
	}

	// Cells, probe path major; domRTT[c][d] is NaN when d has no RTT in
	// c (direct targets only; viaRTT: through the probe path's NAT64).
	var domRTT, viaRTT [][]float64
	var names []string
	var hasVia []bool
	for _, p := range paths {
		for ri, r := range paths {
			c := survey.Cell{ProbePath: p, ResolvePath: r}
			skipped := 0
			var rtts, viaRTTs []float64
			for _, a := range sets[ri] {
				rtt, skip, ok := probe(p, r, a)
				if skip {
					skipped++
					continue
				}
				c.Targets++
				v := via(p, a)
				if v {
					c.ViaNAT64++
				}
				switch {
				case ok && v:
					viaRTTs = append(viaRTTs, rtt)
				case ok:
					rtts = append(rtts, rtt)
				}
			}
			c.ViaNAT64Responsive = len(viaRTTs)
			if c.ViaNAT64 > 0 {
				st := Stats(viaRTTs)
				c.RTTViaNAT64ms = &st
			}
			c.Responsive = len(rtts) + len(viaRTTs)
			c.Unresponsive = c.Targets - c.Responsive
			c.UnresponsivePct = pct(c.Unresponsive, c.Targets)
			c.RTTms = Stats(rtts)
			s.Cells = append(s.Cells, c)
			if skipped > 0 {
				s.Skipped = append(s.Skipped, survey.SkippedCount{ProbePath: p, ResolvePath: r, Reason: SkipCrossPathPrivate, Count: skipped})
			}
			dr, vr := make([]float64, nd), make([]float64, nd)
			for di, dres := range res[ri] {
				dr[di], vr[di] = math.NaN(), math.NaN()
				for _, a := range dres.Addrs {
					rtt, skip, ok := probe(p, r, a)
					if !ok || skip {
						continue
					}
					x := dr
					if via(p, a) {
						x = vr
					}
					if !(rtt >= x[di]) {
						x[di] = rtt // !(>=) also replaces NaN
					}
				}
			}
			domRTT, viaRTT = append(domRTT, dr), append(viaRTT, vr)
			names = append(names, p+"/"+r)
			hasVia = append(hasVia, c.ViaNAT64 > 0)
		}
	}
	for i := range domRTT {
		for j := i + 1; j < len(domRTT); j++ {
			s.Comparisons = append(s.Comparisons, compare(names[i], names[j], domRTT[i], domRTT[j]))
		}
	}
	// A domain's translated RTTs are compared only with translated ones.
	for i := range viaRTT {
		for j := i + 1; j < len(viaRTT); j++ {
			if hasVia[i] && hasVia[j] {
				c := compare(names[i], names[j], viaRTT[i], viaRTT[j])
				c.Route = survey.RouteViaNAT64
				s.Comparisons = append(s.Comparisons, c)
			}
		}
	}
	return s
}

// uniqueAddrs lists the distinct addresses of rs in first-seen order.
func uniqueAddrs(rs []Resolution) []netip.Addr {
	seen := make(map[netip.Addr]bool)
	var out []netip.Addr
	for _, r := range rs {
		for _, a := range r.Addrs {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}

func overlap(paths []string, res [][]Resolution, sets [][]netip.Addr) survey.Overlap {
	o := survey.Overlap{PathA: paths[0], PathB: paths[1], IPsPathA: len(sets[0]), IPsPathB: len(sets[1])}
	inA := make(map[netip.Addr]bool, len(sets[0]))
	for _, a := range sets[0] {
		inA[a] = true
	}
	for _, b := range sets[1] {
		if inA[b] {
			o.IPsCommon++
		}
	}
	o.OverlapPct = pct(o.IPsCommon, o.IPsPathA+o.IPsPathB-o.IPsCommon)
	nd := len(res[0])
	differ, unresolved := 0, 0
	for d := range nd {
		ra, rb := res[0][d], res[1][d]
		if ra.Status != StatusNoError || rb.Status != StatusNoError {
			unresolved++
			continue
		}
		if !sameSet(ra.Addrs, rb.Addrs) {
			differ++
		}
	}
	o.DomainsDifferPct = pct(differ, nd)
	o.DomainsUnresolvedSomewherePct = pct(unresolved, nd)
	return o
}

func sameSet(a, b []netip.Addr) bool {
	sa := slices.Clone(a)
	sb := slices.Clone(b)
	slices.SortFunc(sa, netip.Addr.Compare)
	slices.SortFunc(sb, netip.Addr.Compare)
	return slices.Equal(slices.Compact(sa), slices.Compact(sb))
}

// compare relates cells A and B over the domains with an RTT (not NaN)
// in both.
func compare(a, b string, ra, rb []float64) survey.Comparison {
	c := survey.Comparison{A: a, B: b}
	sum, slower := 0.0, 0
	for d := range ra {
		if math.IsNaN(ra[d]) || math.IsNaN(rb[d]) {
			continue
		}
		c.Domains++
		sum += ra[d] - rb[d]
		if ra[d] > rb[d]+survey.SlowerMarginMs {
			slower++
		}
	}
	if c.Domains > 0 {
		c.MeanDiffMs = sum / float64(c.Domains)
	}
	c.ASlowerPct = pct(slower, c.Domains)
	return c
}

// pct is 100*n/of, 0 when of is 0.
func pct(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

// Stats summarises xs (any order); all zero when empty.
func Stats(xs []float64) survey.RTTStats {
	if len(xs) == 0 {
		return survey.RTTStats{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return survey.RTTStats{
		Min: s[0], Max: s[len(s)-1], Mean: sum / float64(len(s)),
		P10: Percentile(s, 10), P25: Percentile(s, 25), P50: Percentile(s, 50),
		P75: Percentile(s, 75), P90: Percentile(s, 90),
	}
}

// Percentile of sorted xs, interpolating linearly between the closest
// ranks like numpy's default: rank p/100*(n-1). NaN when xs is empty.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	r := p / 100 * float64(n-1)
	lo := int(math.Floor(r))
	if lo < 0 {
		return sorted[0]
	}
	if lo >= n-1 {
		return sorted[n-1]
	}
	return sorted[lo] + (sorted[lo+1]-sorted[lo])*(r-float64(lo))
}
