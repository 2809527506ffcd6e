package survey

import (
	"math"
	"net/netip"
	"slices"
	"strings"
)

// DomainResult is what one path's resolvers said about one domain: the
// in-memory form of summaryInput (tests, small hand-built inputs); a run
// keeps a status byte per domain and path and the address index instead.
type DomainResult struct {
	Done   bool
	Status string
	Addrs  []netip.Addr
}

// TargetResult is what probing one address from one path gave.
type TargetResult struct {
	Responsive     bool
	MedianMs       float64
	HostOverloaded bool // no verdict: the host may have lost the answers
}

type skipKey struct{ probe, resolve, reason string }

// summaryInput is everything the summary is computed from, as streams:
// per domain and path a status, and every resolved address
// once with the domains that resolved to it. Nothing in it grows with the
// list beyond what the run holds anyway.
type summaryInput struct {
	Paths        []string // probe paths, in path order
	ResolvePaths []string // paths that resolved (had DNS), in path order
	Domains      int
	// Status is the status of domain d on path Paths[pi] ("" = not resolved).
	Status func(pi, d int) string
	// Addrs calls fn for every address some domain resolved to (NOERROR)
	// with those domains, each as index in Paths<<24 | domain index.
	Addrs func(fn func(a netip.Addr, doms []uint32))
	// Res, if set, replaces Status and Addrs: per resolve path, by domain
	// index, what its resolvers said.
	Res map[string][]DomainResult
	// Probe is the result of probing an address from Paths[i], if any.
	Probe func(i int, a netip.Addr) (TargetResult, bool)
	// Allowed reports the policy decision for (probe, resolve, addr).
	Allowed func(probe, resolve string, a netip.Addr) bool
	// Via, if set, reports whether a is probed from Paths[i] through the
	// path's NAT64 (Policy.ViaNAT64).
	Via     func(i int, a netip.Addr) bool
	Skipped map[skipKey]int
}

// fromResults sets Status and Addrs from Res.
func (in *summaryInput) fromResults() {
	res := in.Res
	paths := in.Paths
	in.Status = func(pi, d int) string {
		r := res[paths[pi]]
		if d >= len(r) || !r[d].Done {
			return ""
		}
		return r[d].Status
	}
	in.Addrs = func(fn func(netip.Addr, []uint32)) {
		idx := map[netip.Addr][]uint32{}
		var order []netip.Addr
		for pi, p := range paths {
			for d, dr := range res[p] {
				if !dr.Done || dr.Status != StatusNoError {
					continue
				}
				for _, a := range dr.Addrs {
					if _, ok := idx[a]; !ok {
						order = append(order, a)
					}
					idx[a] = append(idx[a], uint32(pi)<<24|uint32(d))
				}
			}
		}
		for _, a := range order {
			fn(a, idx[a])
		}
	}
}

// summaryChunk is how many domains the comparisons handle per pass over
// the address index (their per-domain RTTs are held for one chunk only).
var summaryChunk = 1 << 16

// computeSummary computes the summary by streaming over the statuses and
// the address index: resolution counts, overlap and cells in one pass per
// cell (each cell's medians sorted for exact percentiles, then dropped),
// comparisons in passes over chunks of domains. It equals the in-memory
// computation exactly (TestSummaryStreamingEqualsInMemory).
func computeSummary(in summaryInput) Summary {
	if in.Res != nil {
		in.fromResults()
	}
	s := Summary{Type: "summary", Status: "ok", Resolution: []PathResolution{}, Cells: []Cell{}, Comparisons: []Comparison{}}
	pidx := func(name string) int { return slices.Index(in.Paths, name) }
	rpis := make([]int, len(in.ResolvePaths)) // resolve paths as indexes in Paths
	for k, r := range in.ResolvePaths {
		rpis[k] = pidx(r)
	}
	okOn := make([]func(d int) bool, len(rpis)) // NOERROR on resolve path k
	for k, r := range in.ResolvePaths {
		pr := PathResolution{Path: r, ByStatus: map[string]int{}}
		for d := range in.Domains {
			st := in.Status(rpis[k], d)
			if st == "" {
				continue
			}
			pr.Domains++
			pr.ByStatus[st]++
			if st == StatusNoError {
				pr.Resolved++
			}
		}
		pr.Failed = pr.Domains - pr.Resolved
		s.Resolution = append(s.Resolution, pr)
		pi := rpis[k]
		okOn[k] = func(d int) bool { return in.Status(pi, d) == StatusNoError }
	}

	// Addresses per resolve path, the first two paths' common ones, and
	// the domains whose address sets differ between them.
	ips := make([]int, len(rpis))
	common := 0
	var differ []bool
	var scratch []uint32
	if len(rpis) >= 2 {
		differ = make([]bool, in.Domains)
	}
	in.Addrs(func(a netip.Addr, doms []uint32) {
		on := onPaths(doms)
		for k, pi := range rpis {
			if on&(1<<pi) != 0 {
				ips[k]++
			}
		}
		if differ == nil {
			return
		}
		pa, pb := uint32(rpis[0]), uint32(rpis[1])
		if on&(1<<pa) != 0 && on&(1<<pb) != 0 {
			common++
		}
		// A domain listed here on one of the two paths only has
		// different address sets on them.
		scratch = scratch[:0]
		for _, e := range doms {
			if p := e >> 24; p == pa || p == pb {
				side := uint32(0)
				if p == pb {
					side = 1
				}
				scratch = append(scratch, (e&(maxDomains-1))<<1|side)
			}
		}
		slices.Sort(scratch)
		scratch = slices.Compact(scratch)
		for i := 0; i < len(scratch); {
			d := scratch[i] >> 1
			if i+1 < len(scratch) && scratch[i+1]>>1 == d {
				i += 2
				continue
			}
			differ[d] = true
			i++
		}
	})
	switch {
	case len(rpis) >= 2:
		o := Overlap{PathA: in.ResolvePaths[0], PathB: in.ResolvePaths[1], IPsPathA: ips[0], IPsPathB: ips[1], IPsCommon: common}
		if union := o.IPsPathA + o.IPsPathB - o.IPsCommon; union > 0 {
			o.OverlapPct = 100 * float64(o.IPsCommon) / float64(union)
		}
		if in.Domains > 0 {
			nDiffer, unresolved := 0, 0
			for d := range in.Domains {
				if !okOn[0](d) || !okOn[1](d) {
					unresolved++
				} else if differ[d] {
					nDiffer++
				}
			}
			o.DomainsDifferPct = 100 * float64(nDiffer) / float64(in.Domains)
			o.DomainsUnresolvedSomewherePct = 100 * float64(unresolved) / float64(in.Domains)
		}
		s.Overlap = o
	case len(rpis) == 1:
		s.Overlap = Overlap{PathA: in.ResolvePaths[0], IPsPathA: ips[0]}
	}
	differ = nil

	// Cells, one pass over the addresses each.
	for pi, p := range in.Paths {
		for k, r := range in.ResolvePaths {
			c := Cell{ProbePath: p, ResolvePath: r}
			var medians, viaMedians []float64
			in.Addrs(func(a netip.Addr, doms []uint32) {
				if onPaths(doms)&(1<<rpis[k]) == 0 || !in.Allowed(p, r, a) {
					return
				}
				tr, ok := in.Probe(pi, a)
				if !ok {
					return
				}
				c.Targets++
				via := in.Via != nil && in.Via(pi, a)
				if via {
					c.ViaNAT64++
				}
				switch {
				case tr.Responsive && via:
					c.Responsive++
					c.ViaNAT64Responsive++
					viaMedians = append(viaMedians, tr.MedianMs)
				case tr.Responsive:
					c.Responsive++
					medians = append(medians, tr.MedianMs)
				case tr.HostOverloaded:
					c.HostOverloaded++
				}
			})
			c.Unresponsive = c.Targets - c.Responsive - c.HostOverloaded
			if measured := c.Targets - c.HostOverloaded; measured > 0 {
				c.UnresponsivePct = 100 * float64(c.Unresponsive) / float64(measured)
			}
			c.RTTms = rttStats(medians)
			if c.ViaNAT64 > 0 {
				st := rttStats(viaMedians)
				c.RTTViaNAT64ms = &st
			}
			s.Cells = append(s.Cells, c)
		}
	}
	s.Comparisons = comparisons(in, rpis, s.Cells)
	s.Skipped = skippedCounts(in)
	return s
}

// onPaths is the set of paths doms lists, as bits of path indexes.
func onPaths(doms []uint32) uint64 {
	var on uint64
	for _, e := range doms {
		on |= 1 << (e >> 24)
	}
	return on
}

// comparisons relates every pair of cells over the domains with an RTT in
// both (a domain's RTT in a cell: the lowest median of its responsive
// addresses there), a chunk of domains at a time, summing in domain order.
// A target probed through a NAT64 (in.Via) counts for its domain's
// translated RTT, never its direct one: the direct comparisons come first,
// then, for the pairs of cells that both have targets via a NAT64, the
// same over their translated RTTs (Route via-nat64).
func comparisons(in summaryInput, rpis []int, cells []Cell) []Comparison {
	nc := len(cells)
	routes := 1 // 0 direct, 1 via-nat64
	if slices.ContainsFunc(cells, func(c Cell) bool { return c.ViaNAT64 > 0 }) && in.Via != nil {
		routes = 2
	}
	cmps := make([]Comparison, 0, nc*(nc-1)/2)
	type acc struct {
		sum       float64
		n, slower int
	}
	accs := make([]acc, routes*nc*nc)
	chunk := min(summaryChunk, max(in.Domains, 1))
	best := make([][]float64, routes*nc) // route*nc + cell
	for c := range best {
		best[c] = make([]float64, chunk)
	}
	nr := len(rpis)
	cellRTT := make([]float64, routes*nc) // of the current address; NaN: none
	for lo := 0; lo < in.Domains; lo += chunk {
		hi := min(lo+chunk, in.Domains)
		for c := range best {
			for i := range best[c] {
				best[c][i] = math.NaN()
			}
		}
		in.Addrs(func(a netip.Addr, doms []uint32) {
			inChunk := false
			for _, e := range doms {
				if d := int(e & (maxDomains - 1)); d >= lo && d < hi {
					inChunk = true
					break
				}
			}
			if !inChunk {
				return
			}
			on := onPaths(doms)
			for c := range cellRTT {
				cellRTT[c] = math.NaN()
			}
			for pi, p := range in.Paths {
				tr, ok := in.Probe(pi, a)
				rt := 0
				if routes > 1 && in.Via(pi, a) {
					rt = 1
				}
				for k, r := range in.ResolvePaths {
					if ok && tr.Responsive && on&(1<<rpis[k]) != 0 && in.Allowed(p, r, a) {
						cellRTT[rt*nc+pi*nr+k] = tr.MedianMs
					}
				}
			}
			for _, e := range doms {
				d := int(e & (maxDomains - 1))
				if d < lo || d >= hi {
					continue
				}
				k := slices.Index(rpis, int(e>>24))
				if k < 0 {
					continue
				}
				for rt := range routes {
					for pi := range in.Paths {
						c := rt*nc + pi*nr + k
						if v := cellRTT[c]; !math.IsNaN(v) && (math.IsNaN(best[c][d-lo]) || v < best[c][d-lo]) {
							best[c][d-lo] = v
						}
					}
				}
			}
		})
		for rt := range routes {
			for i := range nc {
				for j := i + 1; j < nc; j++ {
					x := &accs[rt*nc*nc+i*nc+j]
					for d := range hi - lo {
						a, b := best[rt*nc+i][d], best[rt*nc+j][d]
						if math.IsNaN(a) || math.IsNaN(b) {
							continue
						}
						x.n++
						x.sum += a - b
						if a > b+SlowerMarginMs {
							x.slower++
						}
					}
				}
			}
		}
	}
	for rt := range routes {
		for i := range nc {
			for j := i + 1; j < nc; j++ {
				if rt == 1 && (cells[i].ViaNAT64 == 0 || cells[j].ViaNAT64 == 0) {
					continue
				}
				x := accs[rt*nc*nc+i*nc+j]
				cmp := Comparison{A: cells[i].ProbePath + "/" + cells[i].ResolvePath,
					B: cells[j].ProbePath + "/" + cells[j].ResolvePath, Domains: x.n}
				if rt == 1 {
					cmp.Route = RouteViaNAT64
				}
				if x.n > 0 {
					cmp.MeanDiffMs = x.sum / float64(x.n)
					cmp.ASlowerPct = 100 * float64(x.slower) / float64(x.n)
				}
				cmps = append(cmps, cmp)
			}
		}
	}
	return cmps
}

func skippedCounts(in summaryInput) []SkippedCount {
	keys := make([]skipKey, 0, len(in.Skipped))
	for k := range in.Skipped {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b skipKey) int {
		pa, pb := slices.Index(in.Paths, a.probe), slices.Index(in.Paths, b.probe)
		if pa != pb {
			return pa - pb
		}
		ra, rb := slices.Index(in.ResolvePaths, a.resolve), slices.Index(in.ResolvePaths, b.resolve)
		if ra != rb {
			return ra - rb
		}
		return strings.Compare(a.reason, b.reason)
	})
	var out []SkippedCount
	for _, k := range keys {
		out = append(out, SkippedCount{ProbePath: k.probe, ResolvePath: k.resolve, Reason: k.reason, Count: in.Skipped[k]})
	}
	return out
}
